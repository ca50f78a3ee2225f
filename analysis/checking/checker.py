"""One run's check: load the history, count every anomaly with examples, decide the verdict and
write RUN_DIR/results.json. `check_run` is the entry point for `harness run` and the CLI."""

from __future__ import annotations

import datetime as dt
import importlib
import inspect
import json
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis.checking import anomalies as A
from analysis.checking.history_load import HistoryError, load_history
from analysis.explain.replica_evidence import NAME as REPLICA_DIVERGENCE, divergence_permitted, read_replica_divergence, truncation_refusals
from analysis.rules.permissions import allowed as permitted, effective_profile, model_permitted
from analysis.explain.explanations import clock as wall_clock
from analysis.checking.lag import summary as realtime_lag
from analysis.explain.producer_evidence import attach_producer_ids, duplicate_hint, match_duplicates, out_of_order_sequences
from analysis.rules.registry import ANOMALIES, MAX_EXAMPLES, REGISTRY, Anomaly
from analysis.checking.results_file import RESULTS, history_fingerprint, probe_writable, retire, write_results
from analysis.rules.verdict import decide, headline
from harness.errors import HarnessError

RESULTS_VERSION = 1


def read_config(run_dir: Path) -> dict[str, Any] | None:
    """config.json, or None when absent (→ the safe profile, drain status unknown)."""
    path = Path(run_dir) / "config.json"
    if not path.exists():
        return None
    try:
        config = json.loads(path.read_text())
    except ValueError as err:
        raise HistoryError(f"{path}: not valid JSON ({err}); fix or remove it") from err
    if not isinstance(config, dict):
        raise HistoryError(f"{path}: must hold a JSON object")
    return config


def drain_status(config: dict[str, Any] | None) -> tuple[bool | None, dict[str, int] | None]:
    """config.json["drain"] = {"complete": bool, "high_watermarks": {"<key>": int}}; absent → None."""
    drain = (config or {}).get("drain")
    if not isinstance(drain, dict) or not isinstance(drain.get("complete"), bool):
        return None, None
    hws = drain.get("high_watermarks")
    return drain["complete"], ({str(k): int(v) for k, v in hws.items()} if isinstance(hws, dict) else None)


def _unseen_on_drained(unseen: DataFrame, config: dict[str, Any] | None) -> int:
    """Unseen records on partitions the final drain did read to their high watermark, when it
    left others out (config.json drain.undrained, drain.timed_out_partitions): those are lost, not
    merely unread. 0 when the drain completed (every unseen record counts then) or did not say
    which partitions it finished. Why: with one partition offline at the drain (old brokers,
    issue 21) every unseen record used to become `unknown`, hiding losses on the other seven."""
    drain = (config or {}).get("drain") or {}
    if drain.get("complete") is not False or not isinstance(drain.get("undrained"), dict):
        return 0
    left_out = sorted({int(k) for k in drain["undrained"] if str(k).lstrip("-").isdigit()}
                      | {int(k) for k in drain.get("timed_out_partitions") or []})
    return unseen.filter(~F.col("key").isin(left_out)).count()


def drain_undrained(config: dict[str, Any] | None) -> dict[str, str]:
    """config.json["drain"]["undrained"] = {"<key>": "why"}: the partitions the final drain did not
    read to their end (e.g. offline, no leader); absent (older runs) → {}."""
    undrained = ((config or {}).get("drain") or {}).get("undrained")
    return {str(k): str(v) for k, v in undrained.items()} if isinstance(undrained, dict) else {}


def worker_errors(config: dict[str, Any] | None) -> list[str]:
    """The client workers that died (config.json "worker_errors"), unless the run allowed them
    ("allow_worker_errors": true, `harness run --allow-worker-errors`)."""
    cfg = config or {}
    errors = cfg.get("worker_errors")
    if cfg.get("allow_worker_errors") is True or not isinstance(errors, list):
        return []
    return [str(e) for e in errors]


def _plain(x: Any) -> Any:
    if hasattr(x, "asDict"):
        return {k: _plain(v) for k, v in x.asDict(recursive=False).items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _ops_at(d: A.Derived, rows: list[dict], by: str) -> None:
    """Attach every op that observed an example's position (by="position") or value
    (by="value"): these anomalies are about a group of ops, found by aggregation."""
    if not rows:
        return
    if by == "position":
        cond = None
        for r in rows:
            c = (F.col("key") == r["key"]) & (F.col("offset") == r["offset"])
            cond = c if cond is None else cond | c
        group = ["key", "offset"]
    else:
        cond = F.col("value").isin([r["value"] for r in rows])
        group = ["value"]
    found: dict[tuple, list] = {}
    for op in d.positions.filter(cond).orderBy("index").limit(len(rows) * 50).collect():
        found.setdefault(tuple(op[g] for g in group), []).append(
            {"index": op["index"], "time": op["time"], "process": op["process"], "f": op["f"],
             "type": op["type"], "key": op["key"], "offset": op["offset"], "value": op["value"]})
    for r in rows:
        ops = found.get(tuple(r[g] for g in group), [])
        r["ops"] = ops[:10]
        if by == "position":
            r["values"] = sorted({o["value"] for o in ops})
        else:
            r["positions"] = sorted({(o["key"], o["offset"]) for o in ops})
            r["positions"] = [{"key": k, "offset": o} for k, o in r["positions"]]


def _ops_by_index(d: A.Derived, rows: list[dict]) -> None:
    """Replace each example's `op_indexes` by the ops themselves (index, time, process, f, type):
    anomalies found by aggregation carry only the indexes of their ops."""
    wanted = {i for r in rows for i in r.get("op_indexes") or [] if i is not None}
    if not wanted:
        return
    found = {op["index"]: op.asDict() for op in d.events.filter(F.col("index").isin(sorted(wanted))).select(
        "index", "time", "process", "f", "type").collect()}
    for r in rows:
        if "op_indexes" in r:
            r["ops"] = [dict(found[i]) for i in r.pop("op_indexes") if i in found]


MAX_DUPLICATE_SENDS = 10_000


def _duplicate_sends(d: A.Derived, duplicates: DataFrame) -> list[dict[str, Any]]:
    """Each duplicated value's send: its key, when it was invoked and completed (seconds on the
    history's clock). For matching the brokers' OutOfOrderSequenceExceptions to them
    (producer_evidence.match_duplicates); a value sent in a transaction has no invoke of its own."""
    values = [r["value"] for r in duplicates.select("value").limit(MAX_DUPLICATE_SENDS).collect()]
    rows = d.events.filter((F.col("f") == "send") & F.col("value.value").isin(values)).select(
        "type", "time", "process", F.col("value.key").alias("key"), F.col("value.value").alias("value")).collect()
    sends = {v: {"value": v, "key": None, "invoke_s": None, "complete_s": None, "process": None} for v in values}
    for r in sorted(rows, key=lambda r: r["time"]):
        s = sends[r["value"]]
        s["key"], s["process"] = r["key"], r["process"]
        if r["type"] == "invoke" and s["invoke_s"] is None:
            s["invoke_s"] = r["time"] / 1e9
        elif r["type"] != "invoke" and s["complete_s"] is None:
            s["complete_s"] = r["time"] / 1e9
    processes = {s["process"] for s in sends.values() if s["process"] is not None}
    ids = [(r["process"], r["time"] / 1e9, r["id"]) for r in d.events.filter(
        (F.col("f") == "producer") & F.col("process").isin(list(processes)) & F.col("value.producer_id").isNotNull()).select(
        "process", "time", F.col("value.producer_id").alias("id")).collect()] if processes else []
    return attach_producer_ids(list(sends.values()), ids)


def _find(anomaly: Anomaly, d: A.Derived, pairs: DataFrame) -> DataFrame:
    """The anomaly's findings, by its finder in analysis/<module>.py (registry.py names it). A finder that takes the
    read pairs is given the persisted ones: computing them is the costly part, shared by two."""
    finder = getattr(importlib.import_module(f"analysis.checking.{anomaly.module}"), anomaly.finder)
    return finder(d, pairs) if "pairs" in inspect.signature(finder).parameters else finder(d)


def _examples(anomaly: Anomaly, df: DataFrame, d: A.Derived) -> list[dict]:
    name = anomaly.name
    rows = [_plain(r) for r in df.orderBy(*anomaly.example_order).limit(MAX_EXAMPLES).collect()]
    _ops_by_index(d, rows)
    if name == "inconsistent-offsets":
        _ops_at(d, rows, "position")
    elif name == "duplicate":
        _ops_at(d, rows, "value")
        for r in rows:  # the first position it was observed at
            if r["positions"]:
                r["key"], r["offset"] = r["positions"][0]["key"], r["positions"][0]["offset"]
    return rows


def check_history(spark: SparkSession, run_dir: Path, config: dict[str, Any] | None,
                  prefer: str | None = None) -> dict[str, Any]:
    """The results dict for one run (nothing written)."""
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    history = load_history(spark, run_dir, prefer=prefer)
    timings["load_s"] = round(time.perf_counter() - t0, 3)

    d = pairs = None
    try:
        d = A.derive(history.events, history.op_stats,
                     read_committed=effective_profile(config)["isolation.level"] != "read_uncommitted")
        d.op_stats = history.op_stats
        timings["derive_s"] = round(time.perf_counter() - t0 - timings["load_s"], 3)  # the persisted offsets
        # Only reads that are not one after the other: small, and used by two anomalies and
        # their examples, so it is computed once.
        pairs = A.read_pairs(d).persist(A.DERIVED_STORAGE)
        findings = {a.name: _find(a, d, pairs) for a in REGISTRY}
        # Every count but one in one Spark job (shared scans and exchanges; the value-level
        # anomalies in one pass over d.values); examples only where found. poll-skip joins the
        # read pairs with the offsets: counted in a second job, once the pairs are persisted and
        # their size known, so the planner can broadcast them (usually a handful of rows) instead
        # of shuffling and sorting every offset.
        t = time.perf_counter()
        union = A.value_findings(d)
        for a in REGISTRY:
            if a.name not in A.VALUE_LEVEL and a.name != "poll-skip" and (a.module in A.PLAIN_MODULES or d.has_txns()):
                union = union.unionAll(findings[a.name].select(F.lit(a.name).alias("anomaly")))
        found = {r["anomaly"]: r["count"] for r in union.groupBy("anomaly").count().collect()}
        found["poll-skip"] = findings["poll-skip"].count()
        # A G1c that only a ww edge closes is permitted (analysis/rules/permissions.py): count the rest.
        g1c_wr_only = findings["G1c"].filter("wr_only").count() if found.get("G1c") else 0
        counts = {name: int(found.get(name, 0)) for name in ANOMALIES}
        unseen_drained = _unseen_on_drained(findings["unseen"], config) if counts.get("unseen") else 0
        timings["count_s"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()
        if any(counts[name] for name in A.VALUE_LEVEL):
            d.values.persist(A.DERIVED_STORAGE)  # each anomaly found reads it again for examples
        examples = {a.name: _examples(a, findings[a.name], d) if counts[a.name] else [] for a in REGISTRY}
        dup_sends = _duplicate_sends(d, findings["duplicate"]) if counts.get("duplicate") else None
        timings["examples_s"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()  # a measurement, no anomaly (analysis/checking/lag.py); the drain's reads are left out
        lag = realtime_lag(d, ((config or {}).get("drain") or {}).get("first_index")) if any(
            (history.op_stats.get(f) or {}).get("ok") for f in ("poll", "txn")) else None
        timings["lag_s"] = round(time.perf_counter() - t, 3)
    finally:
        if pairs is not None:
            pairs.unpersist()
        if d is not None:
            d.unpersist()
        history.release()

    complete, hws = drain_status(config)
    allow, rules = permitted(config)
    model, why = model_permitted(counts, g1c_wr_only)
    allow, rules = set(allow) | model, [*rules, *why]
    v = decide(counts, allow, complete, truncated=history.truncated, ops=history.count,
               ok_ops=sum((history.op_stats.get(f) or {}).get("ok", 0) for f in ("send", "txn", "poll")),
               worker_errors=worker_errors(config), undrained=drain_undrained(config), unseen_drained=unseen_drained)
    replicas = read_replica_divergence(run_dir)
    if replicas is not None and replicas["diverged"]:
        where = f"{replicas['diverged_offsets']} offset(s) from offset {replicas['first_offset']}"
        if divergence_permitted(effective_profile(config)):
            allow = set(allow) | {REPLICA_DIVERGENCE}
            rules = [*rules, "unclean.leader.election.enable=true (replicas may diverge)"]
        else:
            v.verdict = "invalid"
            v.forbidden = [*v.forbidden, REPLICA_DIVERGENCE]
            said = [p["explanation"] for p in replicas["partitions"].values() if p.get("explanation")][:3]
            v.reasons = [*v.reasons, f"replicas diverged after healing: {where} (not permitted without unclean election)"
                         + "".join(f"; {line}" for line in said)]
    sequences = out_of_order_sequences(run_dir) if "duplicate" in v.forbidden else None
    if sequences is not None:  # which duplicates a refused batch on their partition explains
        clk = wall_clock(run_dir, config, None)
        sequences["duplicates_matched"] = match_duplicates(sequences, dup_sends, clk.start_ns if clk.exact else None,
                                                           (config or {}).get("topic"))
        del sequences["events"]  # up to 10k parsed lines: the match says what they showed
    hint = duplicate_hint(sequences)
    if hint:
        v.reasons = [*v.reasons, hint]
    refused = truncation_refusals(run_dir)  # evidence beside the verdict, never a verdict of its own
    if refused:
        v.reasons = [*v.reasons, refused["sentence"]]
    if (config or {}).get("unresponsive"):  # harness/cluster/watch.py: the brokers, not the harness
        gone = config["unresponsive"]
        v.reasons = [*v.reasons, f"the brokers stopped answering at {gone.get('at_s')} s ({gone.get('reason')}); the workload "
                                 "stopped then, and what had been read is what was checked"]
    timings["total_s"] = round(time.perf_counter() - t0, 3)
    cfg = config or {}
    return {
        "results_version": RESULTS_VERSION,
        "verdict": v.verdict,
        "reasons": v.reasons,
        "forbidden": v.forbidden,
        "counts": counts,
        "headline": headline(counts, complete, v.forbidden, unseen_drained=unseen_drained, replica_diverged=
                             replicas["diverged_offsets"] if replicas is not None and replicas["diverged"] else 0),
        "allowed": sorted(allow, key=lambda a: ANOMALIES.index(a) if a in ANOMALIES else len(ANOMALIES)),
        "allowed_by": rules,
        "examples": examples,
        "op_stats": history.op_stats,
        "drain": {"complete": complete, "high_watermarks": hws, "undrained": drain_undrained(config)},
        "replica_divergence": replicas,
        "truncation_refused": refused,
        "unresponsive": (config or {}).get("unresponsive"),
        "realtime_lag": lag,
        "out_of_order_sequences": sequences,
        "history": {"path": str(history.path), "format": history.format, "events": history.count,
                    "truncated": history.truncated},
        "run": {"seed": cfg.get("seed"), "kafka_version": cfg.get("kafka_version"),
                "workload": cfg.get("workload"), "profile": effective_profile(config)["name"],
                "nemesis": sorted(cfg.get("nemesis") or [])},
        "checked_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "timings": timings,
    }


class ResultsNotWritten(HarnessError):
    """The check finished but results.json could not be written: `results` holds the verdict, so
    that the caller can still print it (a verdict is never lost to a write error)."""

    def __init__(self, results: dict[str, Any], output: Path, err: OSError) -> None:
        where = f"{err.filename}: {err.strerror}" if err.filename and err.strerror else str(err)
        super().__init__(f"the check finished (verdict: {results['verdict']}) but could not write "
                         f"{Path(output) / RESULTS}: {where}",
                         hint="make that folder writable, or write elsewhere with --output DIR")
        self.results = results


def check_run(run_dir: Path | str, spark: SparkSession | None = None, prefer: str | None = None,
              output: Path | str | None = None) -> dict[str, Any]:
    """Check one run directory, write results.json (into `output`, default the run directory) and
    return the results dict. Any earlier results.json and report.html there are first renamed
    stale (analysis/checking/results_file.py), so a failed check never leaves an old verdict standing.
    Raises HistoryError for bad input, OSError when `output` cannot be written (found before
    Spark starts), ResultsNotWritten when it became unwritable during the check. Starts a local
    Spark session when none is given."""
    run_dir = Path(run_dir)
    out = Path(output) if output is not None else run_dir
    config = read_config(run_dir)
    if output is not None:
        out.mkdir(parents=True, exist_ok=True)
    probe_writable(out)
    retire(run_dir, out)
    fingerprint = history_fingerprint(run_dir)
    if spark is None:
        from analysis.checking.spark import get_session

        spark = get_session()
    results = check_history(spark, run_dir, config, prefer=prefer)
    results["history"]["fingerprint"] = fingerprint
    from analysis.explain.explanations import attach  # each example's context: faults, leader, reads, logs, UTC

    attach(run_dir, results, config)
    try:
        write_results(results, out)
    except OSError as err:
        raise ResultsNotWritten(results, out, err) from err
    return results
