"""The store's dashboard, `STORE/index.html`: one row per run (sortable, filterable) and trend
plots of anomaly rates by Kafka version and by nemesis set over time, drawn as static SVG (no
chart library: a 100-run dashboard is a small page that opens at once).

Trends come from `python -m analysis trends STORE` (`STORE/_trends/summary.json`, its "daily"
rows) when present and at least as new as every results.json; otherwise the same daily rows are
computed here from each run's results.json (no Spark needed for a page)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd
from markupsafe import Markup, escape

from analysis.report import html
from analysis.rules.registry import ANOMALIES
from analysis.report.svg import Panel, chart
from analysis.report.templates import DASHBOARD
from analysis.checking.results_file import run_dirs, stale_reason
from analysis.rules.verdict import HEADLINE
from harness.errors import HarnessError
from harness.history.record import EMPTY, RecordError, RunRecord, read_record

COLOURS = {"valid": "#1b8a3a", "invalid": "#c62828", "unknown": "#d98c00", "stale": "#7c3aed", "unchecked": "#6b7280"}
COLUMNS = [("date", False), ("run", False), ("Kafka", False), ("nemeses", False), ("workload", False),
           ("profile", False), ("client", False), ("verdict", False), ("lost", True), ("duplicated", True), ("reordered", True),
           ("diverged", True), ("other", True), ("events", True), ("duration s", True),
           ("no ok write s", True)]
RUN_ID_TIME = re.compile(r"^(\d{8}T\d{6})")


def _client(record: RunRecord) -> str:
    """'java 4.4.0', 'librdkafka 2.16.0': the run's client library and its version (config.json
    `client`); runs from before the choice of client ran librdkafka, which their row says."""
    client = record.mapping("client")
    name = client.get("name") if isinstance(client.get("name"), str) else "librdkafka"
    versions = client.get("versions") if isinstance(client.get("versions"), dict) else {}
    own = versions.get({"librdkafka": "librdkafka", "java": "kafka-clients"}.get(name, name))
    return f"{name} {own}" if own else name


def _version(record: RunRecord, run: dict[str, Any]) -> str:
    """The Kafka version a run is filed under; an upgrade run under `A→B`, its own row and trend
    line: its faults and its verdict belong to neither version alone."""
    version = record.kafka_version or run.get("kafka_version") or "?"
    to = record.raw.get("upgrade_to")
    return f"{version}→{to}" if isinstance(to, str) and to else version


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _run_date(run_dir: Path, results: dict[str, Any] | None) -> dt.datetime:
    m = RUN_ID_TIME.match(run_dir.name)
    if m:
        return dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%S")
    if results and results.get("checked_at"):
        try:
            return dt.datetime.fromisoformat(results["checked_at"]).replace(tzinfo=None)
        except ValueError:
            pass
    return dt.datetime.fromtimestamp(run_dir.stat().st_mtime)


def _record(run_dir: Path) -> RunRecord:
    """The run's record; EMPTY when it has none or it cannot be read (the row then says '?')."""
    try:
        return read_record(run_dir) or EMPTY
    except (OSError, RecordError):
        return EMPTY


def collect_runs(store: Path) -> list[dict[str, Any]]:
    """One row per run directory (a folder with config.json, results.json or a history), in the
    store or in a shard's store inside it; `run_id` is its path relative to the store."""
    rows = []
    for d in run_dirs(store):
        record, results = _record(d), _load(d / "results.json")
        # A results.json that no longer describes the history is not a verdict (results_file.py).
        stale = stale_reason(d, results) if results is not None else None
        run = (results or {}).get("run") or {}
        head = (results or {}).get("headline") or {}
        when = _run_date(d, results)
        rows.append({
            "run_id": d.relative_to(store).as_posix(), "date": when.strftime("%Y-%m-%d %H:%M"), "date_sort": when.isoformat(),
            "report": f"{d.relative_to(store).as_posix()}/report.html" if (d / "report.html").exists() else None,
            "version": _version(record, run),
            "nemesis": "+".join(sorted(record.nemesis or run.get("nemesis") or [])) or "none",
            "workload": record.workload or run.get("workload") or "?",
            "profile": record.profile_name or run.get("profile") or "?",
            "client": _client(record),
            "verdict": "stale" if stale else (results or {}).get("verdict", "unchecked") if (results or {}).get("verdict") in COLOURS else "unchecked",
            "stale": stale,
            **{k: head.get(k) if results and not stale else None for k in HEADLINE},
            "events": ((results or {}).get("history") or {}).get("events"),
            "duration": record.seconds.workload if record.seconds.workload is not None else record.time_limit_s,
            "counts": (results or {}).get("counts") or {},
            **_longest_unavailable(results if not stale else None),
            "checked_at": (results or {}).get("checked_at"), "checked": results is not None and not stale,
            "day": when.date().isoformat(),
        })
    return rows


def worst_band(results: dict[str, Any] | None) -> dict[str, Any] | None:
    """The fault band (results.json "unavailability") with the run's longest stretch of no ok write,
    an operation's band first, as SREs ask after a rolling restart: "did clients notice?". A run with
    no operation band (the coordinator package's kill, pause or cut) is measured on every band."""
    bands = ((results or {}).get("unavailability") or {}).get("bands") or []
    ops = [b for b in bands if b.get("operation")] or bands
    return max(ops, key=lambda b: b.get("no_write_s") or 0.0, default=None)


def _longest_unavailable(results: dict[str, Any] | None) -> dict[str, Any]:
    """worst_band's figure and which band it was, for a dashboard row."""
    worst = worst_band(results)
    if worst is None:
        return {"no_write": None, "no_write_during": None}
    return {"no_write": worst.get("no_write_s"), "no_write_during": f"{worst.get('label')} at {worst.get('start_s')} s"}


def _daily_from_runs(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The trends output's "daily" rows (analysis/report/trends.py), computed from the runs directly."""
    recs = []
    for r in rows:
        if not r["checked"]:
            continue
        rec = {"day": r["day"], "kafka_version": r["version"], "nemesis": r["nemesis"].replace("none", ""),
               "runs": 1, "invalid": int(r["verdict"] == "invalid"), "events": r["events"] or 0}
        for a in ANOMALIES:
            rec[a.replace("-", "_")] = r["counts"].get(a, 0) or 0
        recs.append(rec)
    return pd.DataFrame(recs)


def _trend_source(store: Path, rows: list[dict[str, Any]]) -> tuple[pd.DataFrame, str]:
    summary = store / "_trends" / "summary.json"
    newest = max([(store / r["run_id"] / "results.json").stat().st_mtime for r in rows if r["checked"]] or [0])  # run_id: relative path
    if summary.exists() and summary.stat().st_mtime >= newest:
        data = _load(summary)
        daily = pd.DataFrame((data or {}).get("daily") or [])
        if not daily.empty and {"day", "kafka_version", "nemesis", "runs", "invalid"} <= set(daily.columns):
            return daily, f"Trends from {summary} (written by python -m analysis trends)."
    return _daily_from_runs(rows), ("Trends computed from each run's results.json "
                                     f"(run python -m analysis trends {store} for the Spark aggregation).")


def trend_table(daily: pd.DataFrame, by: str) -> pd.DataFrame:
    """Per day and `by` group: runs, invalid runs, events, anomalies, the share of runs invalid and
    anomalies per million events."""
    cols = [a.replace("-", "_") for a in ANOMALIES if a.replace("-", "_") in daily.columns]
    d = daily.copy()
    d[by] = d[by].fillna("").replace("", "none").astype(str)
    d["anomalies"] = d[cols].fillna(0).sum(axis=1) if cols else 0
    g = d.groupby(["day", by], as_index=False)[["runs", "invalid", "events", "anomalies"]].sum().sort_values("day")
    g["invalid_share"] = g["invalid"] / g["runs"]
    g["per_million"] = (g["anomalies"] * 1e6 / g["events"].where(g["events"] > 0)).fillna(0)
    return g


PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def trend_chart(daily: pd.DataFrame, by: str, title: str, div_id: str) -> Markup:
    """Two panels of static SVG (analysis/report/svg.py): share of runs invalid and anomalies per
    million events, per day, one line per `by` group. Each point says how many runs it stands for,
    on hover and on the plot (n=…; past 20 days only where it is not zero): one invalid run of one
    is not one of twenty (issue 19)."""
    g = trend_table(daily, by)
    days = sorted(g["day"].astype(str).unique())
    pos = {d: i for i, d in enumerate(days)}
    xdom = (-0.5, len(days) - 0.5)
    share = Panel(56, 40, 520, 220, xdom, (0, 1.05))
    share.frame("share of runs invalid", pct=True, xcats=days)
    per = Panel(666, 40, 520, 220, xdom, (0, max(float(g["per_million"].max()) if len(g) else 1, 1e-9) * 1.15))
    per.frame("anomalies per million events", xcats=days)
    legend = []
    for i, (name, part) in enumerate(g.groupby(by)):
        colour = PALETTE[i % len(PALETTE)]
        xs = [float(pos[str(d)]) for d in part["day"]]
        for panel, col, tips in (
                (share, "invalid_share", [f"{name} {d}: {inv}/{n} runs invalid" for d, inv, n in zip(part["day"], part["invalid"], part["runs"])]),
                (per, "per_million", [f"{name} {d}: {a:.0f} anomalies in {e:.0f} events, {n} runs"
                                      for d, a, e, n in zip(part["day"], part["anomalies"], part["events"], part["runs"])])):
            ys = part[col].to_numpy(dtype=float)
            panel.line(xs, ys, colour)
            panel.marks(xs, ys, "circle", colour, tips, 4.5)
            for x, y, n in zip(xs, ys, part["runs"]):
                if len(days) > 20 and not y:  # many days: label the points that are not zero (hover says all)
                    continue
                panel.label(x, (panel.y(y) - panel.top - 9) / panel.h, f"n={n}", colour, anchor="middle", size=9)
        legend.append((colour, "line", str(name)))
    return Markup(f"<h3>{escape(title)}</h3>") + chart(div_id, 1200, 290, [share, per], legend, f"trends {title}")


def render_dashboard(store: Path | str, render_reports: bool = False, output: Path | str | None = None) -> Path:
    """Write index.html (into STORE, or `output`) and return its path; with `render_reports`, first
    write the report.html of every run that has none (into the run, or `output`/<run>/). Raises
    HarnessError when STORE is not a folder."""
    store = Path(store)
    out = Path(output) if output is not None else store
    if not store.is_dir():
        raise HarnessError(f"{store}: no such store folder.", hint="pass the folder given to `harness run --store`")
    rows = collect_runs(store)
    if render_reports:
        from analysis.report.page import render_report

        for r in rows:
            if r["report"] is None:
                try:
                    if out != store:
                        (out / r["run_id"]).mkdir(parents=True, exist_ok=True)
                    render_report(store / r["run_id"], None if out == store else out / r["run_id"])
                    r["report"] = f"{r['run_id']}/report.html"
                except HarnessError:
                    pass  # a broken run keeps its row, without a link
    rows.sort(key=lambda r: r["date_sort"], reverse=True)
    if out != store:  # links from out/index.html: a report written there, or the one in the store
        for r in rows:
            if r["report"] and not (out / r["report"]).is_file():
                r["report"] = os.path.relpath(store / r["report"], out)
    daily, source = _trend_source(store, rows)
    plots = []
    if not daily.empty:
        plots = [trend_chart(daily, "kafka_version", "by Kafka version", "plot-trend-version"),
                 trend_chart(daily, "nemesis", "by nemesis set", "plot-trend-nemesis")]
    tally: dict[str, int] = {}
    for r in rows:
        tally[r["verdict"]] = tally.get(r["verdict"], 0) + 1
    body = html.env().from_string(DASHBOARD).render(
        store=str(store.resolve()), rows=rows, tally=tally, colours=COLOURS,
        columns=[{"label": c, "num": n} for c, n in COLUMNS], trend_plots=plots, trends_source=source,
        generated=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    title = f"Kafka chaos runs: {tally.get('invalid', 0)} invalid of {len(rows)}"
    return html.write_atomic(out / "index.html", html.page(title, body))
