"""One run's HTML report, `RUN_DIR/report.html`: verdict first, then run facts, the timeline
(throughput, latency, consumer lag, faults as bands), each anomaly's examples with offset
plots of the affected partitions, and links to the broker logs.

The report only reads: results.json (the checker's verdict, never written here), config.json (the
run's record, through harness/history/record.py), cluster.json, the history, and the broker folders. Any of them may be missing; the page says so.
A results.json that exists but is not the checker's JSON is an error (exit 2 from the CLI).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
from pathlib import Path
from typing import Any

from markupsafe import Markup

from analysis.report import html
from analysis.rules.registry import ANOMALIES, meaning
from analysis.report.templates import REPORT
from analysis.checking.results_file import RUN_FILES, stale_reason
from harness.errors import HarnessError
from harness.history.record import EMPTY, Drain, RecordLike, as_record, read_record, record_path

MAX_PARTITIONS_PER_KIND = 3
MAX_OFFSET_PLOTS = 12
FAULT_ROWS = 100  # fault table rows; a longer run's table keeps the faults clients felt most, every one is listed below it


def _read_json(path: Path, what: str) -> dict[str, Any] | None:
    """The JSON object in `path`, None when absent; HarnessError when it is not an object."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{path}: {what} is not valid JSON ({exc}).",
                           hint=f"re-create it (for results.json: python -m analysis check {path.parent})") from exc
    if not isinstance(data, dict):
        raise HarnessError(f"{path}: {what} must hold a JSON object.", hint=f"re-create it: python -m analysis check {path.parent}")
    return data


def load_results(run_dir: Path) -> dict[str, Any] | None:
    """results.json checked for the fields the report uses; None when the run is not checked yet."""
    results = _read_json(run_dir / "results.json", "results.json")
    if results is None:
        return None
    missing = [k for k in ("verdict", "counts", "headline") if not isinstance(results.get(k), (str, dict))]
    if missing:
        raise HarnessError(f"{run_dir / 'results.json'}: malformed results (missing {', '.join(missing)}).",
                           hint=f"re-run the check: python -m analysis check {run_dir}")
    return results


def _reproduce(record: RecordLike, run_dir: Path) -> str:
    """The command line that repeats this run: `harness scenario run` for a scenario, else `harness
    run --replay` of its config.json, which repeats every setting (each fault package's too) and
    the executed fault schedule. It used to spell the flags out, and named only the partition and
    kill/pause targets: a disk or power run's repeat lost its own settings."""
    record = as_record(record)
    workload = record.workload or "queue"
    if workload.startswith("scenario:"):
        args = ["python", "-m", "harness", "scenario", "run", workload.split(":", 1)[1]]
        if record.kafka_version:
            args += ["--kafka-version", record.kafka_version]
        return shlex.join(args)
    return shlex.join(["python", "-m", "harness", "run", "--replay", str(record_path(run_dir).resolve())])


def _or(value: Any, absent: str = "?") -> Any:
    return absent if value is None else value


def _drain_text(drain: Drain | None) -> str:
    if drain is None:
        return "not recorded"
    if drain.complete:
        return "complete"
    if drain.undrained:  # partition -> why (absent in older runs)
        return "INCOMPLETE (not drained: " + "; ".join(f"partition {p}: {why}" for p, why in drain.undrained.items()) + ")"
    timed_out = list(drain.timed_out_partitions) if drain.timed_out_partitions is not None else None
    return f"INCOMPLETE (timed out on partitions {timed_out})"


def _facts(run_dir: Path, record: RecordLike, cluster: dict[str, Any] | None,
           results: dict[str, Any] | None) -> list[tuple[str, Any]]:
    c = as_record(record)
    run = (results or {}).get("run") or {}
    prof = c.profile
    prof_text = (f"{_or(prof.name, 'custom')} — {prof.description or ''}".rstrip(" —")
                 if prof is not None else (run.get("profile") or "safe (no config.json)"))
    seconds = c.seconds
    nem = c.nemesis if c.nemesis is not None else run.get("nemesis")
    version = c.kafka_version or (cluster or {}).get("kafka_version") or run.get("kafka_version")
    facts = [
        ("run id", c.run_id or run_dir.name),
        ("status", c.status or "unknown"),
        ("Kafka version", f"{version}, upgraded to {c.raw['upgrade_to']} under load (below)" if c.raw.get("upgrade_to") else version),
        ("brokers", c.brokers if c.brokers is not None else len((cluster or {}).get("brokers") or []) or None),
        ("workload", f"{c.workload or run.get('workload', '?')}: topic {_or(c.topic)}, "
                     f"{_or(c.partitions)} partitions × RF {_or(c.replication_factor)}, "
                     f"{_or(c.producers)} producers, {_or(c.consumers)} consumers, "
                     f"target {html.fmt(c.rate)} sends/s"),
        ("client profile", prof_text),
        ("nemeses", ", ".join(nem) if nem else "none (fault-free run)"),
        ("seed", c.seed if c.seed is not None else run.get("seed")),
        ("duration", f"workload {html.fmt(seconds.workload if seconds.workload is not None else c.time_limit_s)} s"
                     + (f", heal {seconds.heal} s" if seconds.heal is not None else "")
                     + (f", drain {seconds.drain} s" if seconds.drain is not None else "")
                     + (f", cluster start {seconds.cluster_ready} s" if seconds.cluster_ready is not None else "")),
        ("final drain", _drain_text(c.drain)),
    ]
    faults = c.mapping("nemesis_config")
    observed = faults.get("observed")
    if isinstance(observed, dict):  # the state watch's totals (docs/guided.md), under guided or --observe
        kinds = observed.get("log_facts") if isinstance(observed.get("log_facts"), dict) else {}
        facts.append(("abstract states", f"{faults.get('scheduler', '?')} schedule: {observed.get('distinct_states')} distinct "
                      f"states, {observed.get('distinct_transitions')} distinct transitions over {observed.get('ticks')} "
                      "ticks; log facts " + (", ".join(f"{k} {n}" for k, n in kinds.items()) or "none")))
        risks = observed.get("writes_at_risk")
        if isinstance(risks, list):  # nemesis/guided/risk.py; absent before 2026-11-28, design 6's rule before design 7's
            where = ", ".join(f"{r.get('partition')} (leader {r.get('leader')}"
                              + (f", cut off by {'+'.join(map(str, r['cut_by']))}" if r.get("cut_by") else "") + ")"
                              for r in risks[:10] if isinstance(r, dict))
            facts.append(("writes at risk", f"{observed.get('writes_at_risk_count', len(risks))} time(s) a broker was elected "
                          "leader soon after it truncated that partition, cut off from its leader and not back in the ISR, "
                          "acknowledged writes above its truncation" + (f": {where}" if where else "")))
    lag = (results or {}).get("realtime_lag")  # a measurement (analysis/checking/lag.py), absent in older results
    if isinstance(lag, dict):
        w = lag.get("worst") or {}
        facts.append(("consumer realtime lag", f"max {html.fmt(lag.get('max_ms'))} ms (process {w.get('process')}, "
                      f"partition {w.get('key')}), p50 {html.fmt(lag.get('p50_ms'))} ms, p99 {html.fmt(lag.get('p99_ms'))} ms"))
    client = c.mapping("client")
    versions = client.get("versions") if isinstance(client.get("versions"), dict) else (cluster or {}).get("client")
    if isinstance(versions, dict) and versions:
        named = f"{client['name']}: " if isinstance(client.get("name"), str) else ""
        facts.append(("client library", named + ", ".join(f"{k} {v}" for k, v in versions.items())))
    nodes = [*((cluster or {}).get("dedicated_controllers") or []), *((cluster or {}).get("brokers") or [])]
    if any(isinstance(n, dict) and n.get("roles") for n in nodes):  # which node does what: dedicated controllers show here
        facts.append(("nodes", "; ".join(f"{n.get('node_id')}: {'+'.join(n.get('roles') or ['broker (ZooKeeper)'])}"
                                         for n in sorted(nodes, key=lambda n: n.get("node_id") or 0) if isinstance(n, dict))))
    given = c.mapping("settings")
    if given:  # the user's own settings, as given (secrets REDACTED): harness/kafka_settings
        facts.append(("settings given", "; ".join(f"--{scope}-config " + " ".join(f"{k}={v}" for k, v in values.items())
                                                  for scope, values in given.items() if isinstance(values, dict))))
    target = c.mapping("target")
    if target:  # a cluster the harness did not start (harness/target): where, and whether TLS was verified
        sec = target.get("security") if isinstance(target.get("security"), dict) else {}
        trust = {True: "TLS certificates verified", False: "TLS verification OFF (verify = false in the target file)",
                 None: "no TLS"}.get(sec.get("tls_verify"), "?")
        facts.append(("target", f"{target.get('name')} at {target.get('bootstrap_servers')}: {sec.get('protocol')}"
                                f"{' ' + str(sec['sasl_mechanism']) if sec.get('sasl_mechanism') else ''}, {trust}"))
    upgrade = c.mapping("upgrade")
    if upgrade:  # a rolling upgrade (nemesis/upgrade.py): each node's version after the heal, the features finalized
        facts.append(("rolling upgrade", upgrade_text(upgrade)))
    if c.failure:
        facts.append(("failure", c.failure))
    return facts


def upgrade_text(upgrade: dict[str, Any]) -> str:
    """'4.3.1 to 4.4.0; after the heal node 1 on 4.4.0, ...; features: finalized metadata.version=4.4-IV0, ...' or Kafka's refusal."""
    nodes = upgrade.get("nodes") if isinstance(upgrade.get("nodes"), dict) else {}
    feat = upgrade.get("features") if isinstance(upgrade.get("features"), dict) else {}
    on = ", ".join(f"node {n} on {v}" + (" (rolled back)" if v != upgrade.get("to") else "") for n, v in nodes.items())
    if not feat or feat.get("dropped"):
        said = f"not finalized ({feat.get('dropped') or 'the upgrade did not reach that step'})"
    elif feat.get("refused"):
        last = (feat.get("staged") or [feat])[-1]
        said = f"refused by Kafka (exit {last.get('exit')}): {str(last.get('answer') or '')[-300:]}"
    else:
        said = "finalized " + ", ".join(f"{k}={v}" for k, v in (feat.get("after") or {}).items() if k in (feat.get("wanted") or {}))
    if feat.get("staged"):  # harness/cluster/features.py staged: metadata.version alone, then the rest
        said += (f" (in {len(feat['staged'])} more requests, metadata.version alone first, after Kafka refused all at once: "
                 f"{str(feat.get('answer') or '')[-200:]})")
    return f"{upgrade.get('from')} to {upgrade.get('to')}; after the heal {on or '?'}; features: {said}"


def _op_text(op: dict[str, Any], clock: Any = None) -> str:
    t = op.get("time")
    when = f"{t / 1e9:.3f}s" if isinstance(t, (int, float)) else "?"
    utc = clock.utc(t / 1e9) if clock is not None and isinstance(t, (int, float)) else None
    return f"#{op.get('index')} @{when}{f' ({utc})' if utc else ''} p{op.get('process')} {op.get('f')} {op.get('type')}"


def _example_rows(name: str, examples: list[dict[str, Any]], clock: Any = None) -> list[dict[str, str]]:
    rows = []
    for ex in examples:
        where = ex.get("offsets") or ([f"{p.get('key')}/{p.get('offset')}" for p in ex.get("positions") or []]) or ex.get("offset")
        values = ex.get("values") or ex.get("value")
        extra = {k: v for k, v in ex.items() if k not in {"key", "offset", "offsets", "positions", "value", "values", "ops"}}
        rows.append({
            "key": html.fmt(ex.get("key")),
            "where": ", ".join(map(str, where)) if isinstance(where, list) else html.fmt(where),
            "vals": ", ".join(map(str, values)) if isinstance(values, list) else html.fmt(values),
            "extra": ", ".join(f"{k}={v}" for k, v in extra.items()),
            "ops": "; ".join(_op_text(o, clock) for o in ex.get("ops") or [] if isinstance(o, dict)),
        })
    return rows


def _files(run_dir: Path) -> list[dict[str, Any]]:
    """Links (relative to the report) to every broker's logs and the run's own files."""
    out = []
    brokers = run_dir / "brokers"
    if brokers.is_dir():
        ids = sorted((p for p in brokers.iterdir() if p.is_dir()), key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name))
        for b in ids:
            for name in ("server.log", "stdout.log", "controller.log", "state-change.log"):
                if (b / name).is_file():
                    out.append({"group": f"broker {b.name}", "href": f"brokers/{b.name}/{name}", "name": name,
                                "size": (b / name).stat().st_size})
    for name in ("results.json", "config.json", "cluster.json", "history.jsonl", "history.parquet", "librdkafka.log",
                 "client.log", "FAILED"):
        if (run_dir / name).is_file():
            out.append({"group": "run", "href": name, "name": name, "size": (run_dir / name).stat().st_size})
    return out


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def render_report(run_dir: Path | str, output: Path | str | None = None, inline: bool = False) -> Path:
    """Write report.html (into RUN_DIR, or `output`) and return its path: charts as static SVG
    (a small page that draws anywhere, with no script and no other file), or with `inline`,
    interactive Plotly charts with Plotly's JavaScript inlined (one ~5 MB file). Raises HarnessError for a
    missing run directory or a malformed results.json/config.json; anything else missing is shown
    on the page. Results are read from `output` when it holds a results.json (`check --output`),
    else from RUN_DIR; results that no longer describe the history are refused, with the reason."""
    from analysis.explain import timeline
    from analysis.rules.permissions import allowed as permitted

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise HarnessError(f"{run_dir}: no such run directory.", hint="pass a folder written by `python -m harness run` (<store>/<run-id>)")
    out = Path(output) if output is not None else run_dir
    results_dir = out if (out / "results.json").is_file() else run_dir
    if not any((d / name).is_file() for d in {run_dir, results_dir} for name in RUN_FILES):
        # An empty or unrelated folder used to get a 4.8 MB "not checked yet" page and exit 0.
        raise HarnessError(f"{run_dir} holds no run: none of {', '.join(RUN_FILES)} is there.",
                           hint="pass a folder written by `python -m harness run` (<store>/<run-id>); "
                                "`python -m harness dashboard STORE` lists a store's runs")
    results = load_results(results_dir)
    record = read_record(run_dir)  # harness/history/record.py; a malformed one is a HarnessError (exit 2)
    cluster = _read_json(run_dir / "cluster.json", "cluster.json")

    problems: list[str] = []
    stale = stale_reason(run_dir, results, results_dir / "results.json") if results else None
    if stale:  # a verdict drawn from another history is no verdict: shown as not checked, with why
        problems.append(f"results.json is stale, so no verdict is shown: {stale}")
        results = None
    if record is None:
        problems.append("config.json is missing: run facts are incomplete and the safe profile's permissions are assumed.")
    tl = None
    try:
        tl = timeline.build(run_dir, record)
    except timeline.TimelineError as exc:
        problems.append(f"the history could not be read, so there is no timeline: {exc}")

    from analysis.report import explanations as report_explain
    explained, clock, why = report_explain.explanations(run_dir, results, record)
    problems += [why] if why else []
    from analysis.explain.explanations import clock as run_clock

    clk = run_clock(run_dir, record, tl.duration_s if tl is not None else None)  # UTC beside run times
    allow, rules = (results.get("allowed", []), results.get("allowed_by", [])) if results else permitted(record)
    counts = (results or {}).get("counts") or {}
    examples = (results or {}).get("examples") or {}
    kinds = _anomaly_sections(counts, examples, allow, explained, clock, clk, tl, inline)
    timeline_html = _timeline(tl, inline) if tl is not None else None

    verdict = results["verdict"] if results else "unchecked"
    gap = _gaps(results)
    body = html.env().from_string(REPORT).render(
        run_id=(record or EMPTY).run_id or run_dir.name, run_dir=str(run_dir.resolve()),
        verdict=verdict, results=results, headline=(results or {}).get("headline") or {},
        reasons=(results or {}).get("reasons") or [], forbidden=(results or {}).get("forbidden") or [],
        counts=[{"name": n, "count": counts.get(n), "allowed": n in allow, "definition": meaning(n)} for n in ANOMALIES],
        allowed=allow, rules=rules, facts=_facts(run_dir, record, cluster, results),
        command=(record or EMPTY).command_line, reproduce=_reproduce(record, run_dir) if record is not None else None,
        tl=tl, timeline=timeline_html, kinds=kinds, files=[{**f, "size": _size(f["size"]), "href": _href(f["href"], run_dir, out)}
                                                           for f in _files(run_dir)],
        problems=problems, generated=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        check_cmd=f"python -m analysis check {run_dir}",
        replicas=(results or {}).get("replica_divergence"),
        no_faults=report_explain.no_faults(record, tl), timeline_tables=report_explain.timeline_tables(tl, run_dir, record),
        extra_css=report_explain.CSS, utc=lambda t: clk.utc(t) or "", gap=gap,
        fault_rows=_fault_rows(tl.faults if tl is not None else [], gap),
    )
    title = f"{verdict.upper()} · Kafka run {(record or EMPTY).run_id or run_dir.name}"
    return html.write_atomic(out / "report.html", html.page(title, body, plotly=inline))


def _fault_rows(faults: list[Any], gap: Any) -> list[Any]:
    """The faults the table shows: all of them, or in a long run the FAULT_ROWS whose clients
    noticed most (longest stretch of no ok write, then read), in time order; the page lists every
    fault below in plain lines. The 2-hour soak's 917 rows were 225 KB of a 1.73 MB report."""
    if len(faults) <= FAULT_ROWS:
        return list(faults)

    def felt(f: Any) -> tuple[float, float]:
        g = gap(f) or {}
        return (g.get("no_write_s") or 0.0, g.get("no_read_s") or 0.0)

    return sorted(sorted(faults, key=felt, reverse=True)[:FAULT_ROWS], key=lambda f: f.start_s)


def _gaps(results: dict[str, Any] | None) -> Any:
    """A fault band (the timeline's) -> its unavailability figures in results.json, or None."""
    bands = ((results or {}).get("unavailability") or {}).get("bands") or []
    found = {(b["f"], round(float(b["start_s"]), 2)): b for b in bands}
    return lambda fault: found.get((fault.f, round(fault.start_s, 2)))


def _anomaly_sections(counts: dict[str, Any], examples: dict[str, Any], allow: list[str], explained: dict[str, Any],
                      clock: Any, clk: Any, tl: Any, inline: bool) -> list[dict[str, Any]]:
    """One section per anomaly found, in the registry's order: its definition, its examples (with UTC
    beside run times), their explanations, and offset plots of the first partitions, at most
    MAX_OFFSET_PLOTS over the whole page so that a run with many anomalies keeps its size."""
    from analysis.report import charts
    from analysis.report import explanations as report_explain

    kinds = []
    n_plots = 0
    for name in ANOMALIES:
        found = counts.get(name, 0) or 0
        ex = examples.get(name) or []
        kind = {"name": name, "count": found, "allowed": name in allow, "definition": meaning(name),
                "rows": _example_rows(name, ex, clk), "plots": [], "shown": len(ex),
                "explained": report_explain.render(name, explained.get(name) or [], clock)}
        if found and ex and tl is not None:
            pts = charts.anomaly_points(name, ex, explained.get(name))
            for key in list(dict.fromkeys(pts["key"].tolist()))[:MAX_PARTITIONS_PER_KIND]:
                if n_plots >= MAX_OFFSET_PLOTS:
                    break
                n_plots += 1
                kind["plots"].append(_offsets(tl, key, {name: pts}, f"plot-offsets-{name}-{key}", inline))
        if found:
            kinds.append(kind)
    return kinds


def _timeline(tl: Any, inline: bool) -> Markup:
    from analysis.report import charts as report_charts
    if not inline:
        return report_charts.timeline_chart(tl)
    from analysis.report import figures as report_figures
    return html.figure_html(report_figures.timeline_figure(tl), "plot-timeline")


def _offsets(tl: Any, key: int, points: dict[str, Any], div_id: str, inline: bool) -> Markup:
    from analysis.report import charts as report_charts
    if not inline:
        return report_charts.offset_chart(tl, key, points, div_id)
    from analysis.report import figures as report_figures
    return html.figure_html(report_figures.offset_figure(tl, key, points), div_id)


def _href(href: str, run_dir: Path, out: Path) -> str:
    """A run file's link from a report written elsewhere (`report --output`)."""
    return href if out == run_dir else os.path.relpath(run_dir / href, out)
