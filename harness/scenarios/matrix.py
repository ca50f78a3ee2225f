"""scenario x version → one Markdown table row each: lost / diverged / detected-by-client, verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from harness.errors import HarnessError
from harness.run.finish import Finisher
from harness.provision.kafka_jars import kraft_supported
from harness.provision.settings import kafka_version as resolve_kafka_version
from harness.scenarios import Scenario

HEADER = ("| scenario | Kafka | client | lost | diverged (history) | replicas diverged | detected by client | verdict | bug shown | run |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


def client_text(record: dict[str, Any] | None) -> str:
    """`librdkafka 2.16.0` or `java 4.4.0`: the client a scenario's driven clients ran (scenario.json)."""
    record = record or {"name": "librdkafka"}
    versions = record.get("versions") or {}
    version = versions.get("librdkafka") or versions.get("kafka-clients") or next(iter(versions.values()), "")
    return f"{record.get('name', '?')} {version}".strip()


def parse_clients(text: str) -> list[tuple[str, str | None]]:
    """`librdkafka,java,java:3.9.1` → [(librdkafka, None), (java, None), (java, 3.9.1)]; an unknown
    client name is a HarnessError (exit 2) before anything starts."""
    from workloads import drivers

    out: list[tuple[str, str | None]] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, _, version = item.partition(":")
        if name not in drivers.names():
            raise HarnessError(f"--clients {text!r}: unknown client {name!r}.",
                               hint=f"give a comma-separated list of {', '.join(drivers.names())}, each optionally NAME:VERSION (java:3.9.1)")
        out.append((name, version or None))
    if not out:
        raise HarnessError(f"--clients {text!r} names no client.", hint="e.g. --clients librdkafka,java")
    return out


def _load(run_dir: Path, name: str) -> dict[str, Any]:
    path = run_dir / name
    return json.loads(path.read_text()) if path.exists() else {}


def row(run_dir: Path, results: dict[str, Any] | None) -> str:
    s = _load(run_dir, "scenario.json")
    h = s["headline"]
    div = s["replica_divergence"]
    rep = f"yes, from offset {div['first_offset']} ({div['diverged_offsets']} offsets)" if div["diverged"] else "no"
    if results:
        lost, diverged = results["headline"]["lost"], results["headline"]["diverged"]
        verdict = results["verdict"] + (f" ({', '.join(results['forbidden'])} forbidden)" if results.get("forbidden") else "")
    else:
        lost, diverged, verdict = h["lost"], h["diverged"], "not checked"
    detected = s["observations"].get("classification", "–")
    if s["observations"].get("classification"):
        detected = f"{h['detected_by_client']} ({detected})"
    bug = {True: "**yes**", False: "no", None: "–"}[s.get("bug_shown")]
    if s["status"] != "completed":
        bug = f"incomplete: {s['incomplete_reason'][:120]}"
    return f"| {s['scenario']} | {s['kafka_version']} | {client_text(s.get('client'))} | {lost} | {diverged} | {rep} | {detected} | {verdict} | {bug} | {s['run_id']} |"


def render_run(run_dir: Path, results: dict[str, Any] | None) -> str:
    s = _load(run_dir, "scenario.json")
    lines = [f"run directory: {run_dir}", f"status: {s['status']}" + (f" ({s['incomplete_reason']})" if s.get("incomplete_reason") else "")]
    for w in s["writes"]:
        lines.append(f"  write {w['label']:>4} value {w['value']:>3} to {w.get('to')}: "
                     + (f"acked at offset {w['offset']}" if w["acked"] else f"not acked ({w['error']})"))
    d = s["replica_divergence"]
    lines.append(f"replicas: log ends {d['log_end_offsets']}, diverged: {d['diverged']}"
                 + (f" from offset {d['first_offset']}: {d['differences'][:3]}" if d["diverged"] else ""))
    if s["observations"]:
        lines.append(f"observations: {json.dumps({k: v for k, v in s['observations'].items() if k != 'reads_after_election'})}")
    lines.append(f"history (reference checker): {s['history_counts']}")
    if results:
        lines.append(f"checker verdict: {results['verdict']} headline {results['headline']}")
    lines.append(HEADER)
    lines.append(row(run_dir, results))
    return "\n".join(lines)


def run_matrix(chosen: list[Scenario], versions: list[str], store: Path | str, use_checker: bool = True,
               echo: Callable[[str], None] = print, clients: list[tuple[str, str | None]] | None = None) -> str:
    """Run every runnable scenario on every version with every client (`scenario matrix --clients`;
    default librdkafka alone). A scenario that cannot drive a client, or a version it does not serve,
    is a 'not applicable' row; infrastructure failures become rows too."""
    from harness.scenarios.runner import clients_of, run_scenario

    finisher = Finisher() if use_checker else None
    rows = [HEADER]
    for s in chosen:
        if not s.runnable:
            rows.append(f"| {s.name} | all | – | – | – | – | – | not runnable | {s.reason[:160]}… | – |")
            continue
        for v in versions:
            refused = s.serves(kraft_supported(resolve_kafka_version(v)))
            for client, client_version in clients or [("librdkafka", None)]:
                label = client + (f" {client_version}" if client_version else "")
                why = refused or (None if client in clients_of(s) else f"drives {' and '.join(clients_of(s))} only")
                if why:  # a row that says so, not a failure: nothing started
                    rows.append(f"| {s.name} | {v} | {label} | – | – | – | – | not applicable | {why} | – |")
                    continue
                echo(f"running {s.name} on Kafka {v} with {label} …")
                try:
                    run_dir = run_scenario(s, v, store, client=client, client_version=client_version)
                except HarnessError as exc:
                    rows.append(f"| {s.name} | {v} | {label} | – | – | – | – | failed to run | {str(exc)[:160]} | – |")
                    echo(f"  failed: {exc}")
                    continue
                results = _check(finisher, run_dir, echo) if finisher is not None else None
                rows.append(row(run_dir, results))
                echo("  " + rows[-1])
    return "\n".join(rows)


def table_from_store(store: Path | str, use_checker: bool = True, echo: Callable[[str], None] = print) -> str:
    """The table for every scenario run already in `store` (newest run per scenario and version),
    checked with the normal checker unless results.json exists or `use_checker` is off."""
    from harness.provision.kafka_jars import parse_version
    from harness.scenarios import scenarios

    order = list(scenarios())
    latest: dict[tuple[str, str], Path] = {}
    for run_dir in sorted(Path(store).iterdir()):
        s = _load(run_dir, "scenario.json") if run_dir.is_dir() else {}
        if s:
            latest[(s["scenario"], s["kafka_version"], client_text(s.get("client")))] = run_dir  # run ids sort by time
    finisher = Finisher()
    rows = [HEADER]
    for (name, version, _), run_dir in sorted(latest.items(), key=lambda kv: (order.index(kv[0][0]) if kv[0][0] in order else 99,
                                                                              [-x for x in parse_version(kv[0][1])], kv[0][2])):
        results = _load(run_dir, "results.json") or None
        if results is None and use_checker:
            results = _check(finisher, run_dir, echo)
        rows.append(row(run_dir, results))
    for s in scenarios().values():
        if not s.runnable:
            rows.append(f"| {s.name} | all | – | – | – | – | – | not runnable | see docs/scenarios.md | – |")
    return "\n".join(rows)


def _check(finisher: Finisher, run_dir: Path, echo: Callable[[str], None]) -> dict | None:
    """The Spark checker's results, or None (and why, echoed): a row falls back to the
    reference checker's counts in scenario.json."""
    try:
        return finisher.check(run_dir)
    except Exception as exc:
        echo(f"  checker failed on {run_dir}: {type(exc).__name__}: {exc}")
        return None
