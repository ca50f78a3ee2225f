"""The campaign page (`python -m harness campaign STORE`): coverage over time per Kafka version, one
line per schedule, every find with its replay command and replays, and a summary per schedule.

One self-contained HTML file in the reports' shell (analysis/report/html.py): charts are static SVG
drawn by analysis/report/svg.py, as in report.html and the dashboard since issue 34, so the page
opens offline, copied on its own, with no chart library in it or beside it.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from markupsafe import Markup, escape

from harness.experiments.campaign import CampaignRun, Group, load_campaign

PAGE = "campaign.html"
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"]
FIND = "#c62828"  # no schedule line is red: a find stands out on any of them


def render_campaign(store: Path, out: Path | None = None, replay_ledgers: list[Path] | None = None) -> Path:
    """Write the page (STORE/campaign.html unless `out`) and return its path."""
    from analysis.report import html

    store = Path(store)
    groups = load_campaign(store, replay_ledgers)
    out = Path(out) if out is not None else store / PAGE
    out.parent.mkdir(parents=True, exist_ok=True)
    finds = sum(len(g.finds) for g in groups)
    runs = sum(len(g.runs) for g in groups)
    body = [f"<h1>Campaign: {escape(str(store.resolve()))}</h1>",
            f"<p class=muted>{runs} runs with a verdict, {finds} finds (invalid for a forbidden loss or divergence); "
            f"written {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC from {escape(str(store / 'detection.jsonl'))}. "
            "Distinct states and transitions are counted from each run's <code>observed</code> events "
            "(docs/guided.md); the union grows in the order the runs started.</p>",
            "<h2>Summary per schedule</h2>", summary_table(groups), "<h2>Coverage over time</h2>"]
    versions: dict[tuple[str, str], list[Group]] = {}
    for g in groups:
        versions.setdefault((g.version, g.profile), []).append(g)
    # One colour per schedule over the whole page, so that random is the same line on every chart.
    colours = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(sorted({g.schedule for g in groups}))}
    for n, ((version, profile), gs) in enumerate(versions.items()):
        body.append(coverage_chart(version, profile, gs, f"coverage-{n}", colours))
    body += ["<h2>Finds</h2>", finds_table(groups, out.parent), "<h2>Every run</h2>", runs_table(groups, out.parent)]
    title = f"Kafka campaign: {finds} finds in {runs} runs"
    return html.write_atomic(out, html.page(title, "\n".join(body)))


def _mean(values: list[int]) -> str:
    return f"{sum(values) / len(values):.1f}" if values else "–"


def first_find_text(g: Group) -> str:
    first = g.first_find()
    if first is None:
        return "–"
    n, before, into = first
    where = f"{before + into:,.0f} s ({before:,.0f} s of earlier runs + {into:,.1f} s into run {n})" if into is not None \
        else f"within {before + g.runs[n - 1].workload_s:,.0f} s (run {n})"
    return where


def summary_table(groups: list[Group]) -> str:
    rows = []
    for g in groups:
        watched = [r for r in g.runs if r.watched]
        rate = f"{len(g.finds) / len(g.runs):.0%}" if g.runs else "–"
        rows.append(
            f"<tr><td>{escape(g.version)}</td><td>{escape(g.profile)}</td><td>{escape(g.schedule)}</td>"
            f"<td class=n>{len(g.runs)}</td><td class=n>{g.failed}</td><td class=n>{len(g.finds)}</td><td class=n>{rate}</td>"
            f"<td class=n>{_mean([len(r.states) for r in watched])}</td><td class=n>{_mean([len(r.transitions) for r in watched])}</td>"
            f"<td class=n>{len(g.union_states)}</td><td class=n>{len(g.union_transitions)}</td>"
            f"<td class=n>{sum(r.workload_s for r in g.runs):,.0f}</td><td>{escape(first_find_text(g))}</td></tr>")
    return ("<table><tr><th>version</th><th>profile</th><th>schedule</th><th class=n>runs</th><th class=n>failed</th>"
            "<th class=n>finds</th><th class=n>find rate</th><th class=n>distinct states per run (mean)</th>"
            "<th class=n>transitions per run (mean)</th><th class=n>union of states</th><th class=n>union of transitions</th>"
            "<th class=n>workload (s)</th><th>time to the first find (campaign seconds of workload)</th></tr>"
            + "".join(rows) + "</table>"
            "<p class=muted>Means are over the runs that recorded <code>observed</code> events (a run without the state "
            "watch has none). The time to the first find counts the workload seconds of the schedule's earlier runs, plus "
            "how far into its run the first loss example's evidence was complete (when results.json explains one).</p>")


def coverage_chart(version: str, profile: str, groups: list[Group], div_id: str, colours: dict[str, str]) -> Markup:
    """Two panels, union of distinct states and of transitions against campaign seconds of workload,
    one line per schedule, rising at each observed event; a dot is a run's end, a star a find's."""
    from analysis.report.svg import Panel, chart

    xmax = max((g.curve[-1][0] for g in groups), default=1.0) or 1.0
    smax = max((g.curve[-1][1] for g in groups), default=1) or 1
    tmax = max((g.curve[-1][2] for g in groups), default=1) or 1
    states = Panel(64, 30, 520, 240, (0, xmax), (0, smax * 1.08))
    states.frame("union of distinct states", xlabel="campaign seconds of workload", ylabel="states")
    trans = Panel(684, 30, 520, 240, (0, xmax), (0, tmax * 1.08))
    trans.frame("union of distinct transitions", xlabel="campaign seconds of workload", ylabel="transitions")
    legend = []
    for g in groups:
        colour = colours[g.schedule]
        xs = [c[0] for c in g.curve]
        tips = ["start"] + [f"{g.schedule} run {n} ({r.run_id}, seed {r.row.seed}, {r.row.verdict}): {len(r.states)} states, "
                            f"{len(r.transitions)} transitions in the run; union {c[1]} states, {c[2]} transitions"
                            for n, (r, c) in enumerate(zip(g.runs, g.curve[1:]), 1)]
        for panel, k in ((states, 1), (trans, 2)):
            ys = [float(c[k]) for c in g.curve]
            panel.line([c[0] for c in g.growth], [float(c[k]) for c in g.growth], colour, width=2)
            panel.marks(xs, ys, "circle", colour, tips, 3.5)  # each run's end
            found = [(x, y, t) for x, y, t, r in zip(xs[1:], ys[1:], tips[1:], g.runs) if r.row.found]
            if found:
                panel.marks([f[0] for f in found], [f[1] for f in found], "star", FIND,
                            ["FIND: " + f[2] for f in found], 9)
        legend.append((colour, "line", f"{g.schedule}: {len(g.runs)} runs, {len(g.finds)} finds"))
    if any(g.finds for g in groups):
        legend.append((FIND, "dot", "a run that found a loss or divergence (star)"))
    return Markup(f"<h3>{escape(version)} ({escape(profile)})</h3>") + chart(
        div_id, 1230, 310, [states, trans], legend, f"coverage over time on {version}")


def _link(path: Path, base: Path, text: str) -> str:
    if not path.exists():
        return escape(text)
    return f'<a href="{escape(os.path.relpath(path, base))}">{escape(text)}</a>'


def _what(r: CampaignRun) -> str:
    return (f"lost {r.row.lost}, diverged {r.row.diverged}, duplicated {r.row.duplicated}; "
            f"forbidden: {', '.join(r.row.forbidden) or '–'}")


def replays_text(r: CampaignRun, base: Path) -> str:
    if not r.replays:
        return f"<span class=muted>none yet:</span><pre>python -m harness replay-find {escape(str(r.run_dir))} --times 5</pre>"
    k = sum(1 for x in r.replays if x.found)
    ids = ", ".join(_link(Path(x.run_dir) / "report.html", base, f"{Path(x.run_dir).name} ("
                          + (f"found: lost {x.lost}, diverged {x.diverged}, {', '.join(x.forbidden)}" if x.found else x.verdict) + ")")
                    for x in r.replays)
    return f"<b>reproduced {k} of {len(r.replays)}</b>: {ids}"


WHY_SHOWN = 800  # characters of the sentence shown (an unclean election is named after about 600); the rest opens on a click


def why_row(r: CampaignRun) -> str:
    """A find's explanation under its row: what results.json's first loss example says (the
    election, the cuts, the faults), the first WHY_SHOWN characters, the rest in a <details>."""
    if not r.first_evidence:
        return ""
    from analysis.explain.text import clip

    head, rest = clip(r.first_evidence, WHY_SHOWN)
    more = f" <details><summary>… the rest</summary>{escape(rest)}</details>" if rest else ""
    return f"<tr><td></td><td colspan=7><b>Why:</b> {escape(head)}{more}</td></tr>"


def finds_table(groups: list[Group], base: Path) -> str:
    rows = []
    for g in groups:
        before = 0.0
        for n, r in enumerate(g.runs, 1):
            if r.row.found:
                evidence = (f'<span title="{escape(r.first_evidence)}">{r.first_evidence_s:,.1f} s after the workload began</span>'
                            if r.first_evidence_s is not None else "<span class=muted>no loss example explained</span>")
                rows.append(
                    f"<tr><td>{escape(g.version)} {escape(g.schedule)}</td>"
                    f"<td>{_link(r.run_dir / 'report.html', base, r.run_id)}</td><td class=n>{r.row.seed}</td>"
                    f"<td>{escape(_what(r))}</td><td>run {n}, after {before + r.workload_s:,.0f} s of workload</td>"
                    f"<td>{evidence}</td><td><pre>{escape(r.replay_command)}</pre></td>"
                    f"<td>{replays_text(r, base)}</td></tr>" + why_row(r))
            before += r.workload_s
    if not rows:
        return "<p>No run found a forbidden loss or divergence.</p>"
    return ("<table><tr><th>schedule</th><th>run (report)</th><th class=n>seed</th><th>what was found</th>"
            "<th>when in the campaign</th><th>first evidence in the run</th><th>replay command</th><th>replays</th></tr>"
            + "".join(rows) + "</table>"
            "<p class=muted>A replay repeats the run's executed faults at their recorded times on their recorded targets "
            "(docs/commands.md); <code>replay-find</code> replays it N times into the store and counts the replays that "
            "found a loss or divergence again (any: not necessarily the same records; each replay's report says which). "
            "Under each find, why: its first loss example's sentence, from the run's results.json.</p>")


def verdict_label(r: CampaignRun) -> str:
    """The run's verdict, and for an `invalid` one what made it so: FIND (a forbidden loss or
    divergence), a known client bug (librdkafka's epoch bump re-sending batches already in the log,
    from results.json), or the forbidden kinds. The 4.4.0 campaign's seed 19 was `invalid` for 27,727
    duplicates of librdkafka's; the page said only "invalid" beside seed 5's loss."""
    import json

    from analysis.explain.producer_evidence import known_client_duplicates

    if r.row.found:
        return f"{r.row.verdict} (FIND)"
    if r.row.verdict != "invalid":
        return r.row.verdict
    try:
        results = json.loads((r.run_dir / "results.json").read_text())
    except (OSError, ValueError):
        results = {}
    if known_client_duplicates(results):
        return "invalid (known client bug: librdkafka's epoch bump, duplicates only)"
    return f"invalid ({', '.join(r.row.forbidden) or 'see its report'})"


def runs_table(groups: list[Group], base: Path) -> str:
    rows = []
    for g in groups:
        union: set[str] = set()
        for n, r in enumerate(g.runs, 1):
            new = len(r.states - union)
            union |= r.states
            verdict = verdict_label(r)
            rows.append(f"<tr><td>{escape(g.version)} {escape(g.schedule)}</td><td class=n>{n}</td>"
                        f"<td>{_link(r.run_dir / 'report.html', base, r.run_id)}</td><td class=n>{r.row.seed}</td>"
                        f"<td>{escape(verdict)}</td><td class=n>{len(r.states) if r.watched else '–'}</td>"
                        f"<td class=n>{len(r.transitions) if r.watched else '–'}</td><td class=n>{new if r.watched else '–'}</td></tr>")
    return ("<table><tr><th>schedule</th><th class=n>#</th><th>run</th><th class=n>seed</th><th>verdict</th>"
            "<th class=n>distinct states</th><th class=n>transitions</th><th class=n>states new to the campaign</th></tr>"
            + "".join(rows) + "</table>")
