"""One run's check: load the history, count every anomaly with examples, decide the verdict and
write RUN_DIR/results.json. `check_run` is the entry point for `harness run` and the CLI.

`check_history` is a row of steps, each with one job: load the history; derive the tables every
finder reads; count every anomaly (calling, for each registry entry, the finder that claimed it:
analysis/checking/finders.py); take examples of what was found (analysis/checking/examples.py);
measure the consumers' lag; judge (what the run's record and Kafka's model permit, the verdict,
and the evidence beside it); and lay out the results. `check_run` then adds each example's
explanation and writes results.json. The run's record is config.json as harness/history/record.py
reads it."""

from __future__ import annotations

import datetime as dt
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis.checking import anomalies as A
from analysis.checking import read_order
from analysis.checking.examples import gather_examples
from analysis.checking.finders import FINDERS, Findings
from analysis.checking.history_load import History, load_history
from analysis.explain.replica_evidence import NAME as REPLICA_DIVERGENCE, divergence_permitted, read_replica_divergence, truncation_refusals
from analysis.rules.permissions import REBALANCE_KINDS, allowed as permitted, effective_profile, model_permitted, rebalance_permitted
from analysis.explain.explanations import clock as wall_clock
from analysis.checking.lag import summary as realtime_lag
from analysis.checking import unavailability
from harness.history.faults import BY_START
from analysis.explain.producer_evidence import (client_explained, duplicate_hint, librdkafka_only, match_duplicates,
                                                out_of_order_sequences, timeout_hint)
from analysis.rules.registry import ANOMALIES, BY_NAME, REGISTRY
from analysis.checking.results_file import RESULTS, history_fingerprint, probe_writable, retire, write_results
from analysis.rules.verdict import Verdict, decide, headline
from harness.errors import HarnessError
from harness.history.record import RecordLike, RunRecord, as_record, read_record

RESULTS_VERSION = 1


def drain_status(record: RecordLike) -> tuple[bool | None, dict[str, int] | None]:
    """The final drain's (complete, high watermarks by key); (None, None) when the record has no
    drain or its `complete` is no boolean: the drain's status is unknown."""
    drain = as_record(record).drain
    if drain is None or drain.complete is None:
        return None, None
    return drain.complete, (dict(drain.high_watermarks) if drain.high_watermarks is not None else None)


def _unseen_on_drained(unseen: DataFrame, record: RunRecord) -> int:
    """Unseen records on partitions the final drain did read to their high watermark, when it
    left others out (the record's drain.undrained, drain.timed_out_partitions): those are lost, not
    merely unread. 0 when the drain completed (every unseen record counts then) or did not say
    which partitions it finished. Why: with one partition offline at the drain (old brokers,
    issue 21) every unseen record used to become `unknown`, hiding losses on the other seven."""
    drain = record.drain
    if drain is None or drain.complete is not False or drain.undrained is None:
        return 0
    left_out = sorted({int(k) for k in drain.undrained if k.lstrip("-").isdigit()} | set(drain.timed_out_partitions or ()))
    return unseen.filter(~F.col("key").isin(left_out)).count()


def drain_undrained(record: RecordLike) -> dict[str, str]:
    """The partitions the final drain did not read to their end ("<key>": why, e.g. offline, no
    leader); {} when none or not recorded (older runs)."""
    drain = as_record(record).drain
    return dict(drain.undrained) if drain is not None and drain.undrained is not None else {}


def worker_errors(record: RecordLike) -> list[str]:
    """The client workers that died (the record's `worker_errors`), unless the run allowed them
    (`allow_worker_errors`, `harness run --allow-worker-errors`)."""
    record = as_record(record)
    if record.allow_worker_errors is True or record.worker_errors is None:
        return []
    return list(record.worker_errors)


@contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    began = time.perf_counter()
    yield
    timings[name] = round(time.perf_counter() - began, 3)


@dataclass
class Counted:
    counts: dict[str, int]  # every anomaly of the registry, in its order
    g1c_wr_only: int  # G1c components that a cycle of wr edges alone closes (the rest are permitted)
    unseen_drained: int  # unseen records on partitions the drain did finish (_unseen_on_drained)
    # Of the poll-skip and nonmonotonic-poll pairs, how many have a group rebalance between their
    # reads (the rest are never permitted by it). Every kind of REBALANCE_KINDS present.
    across_rebalance: dict[str, int] | None = None


@dataclass
class Judged:
    verdict: Verdict
    allow: set[str]
    rules: list[str]
    replicas: dict[str, Any] | None = None  # replicas.json's comparison, when the run compared them
    sequences: dict[str, Any] | None = None  # the brokers' OutOfOrderSequenceExceptions, for duplicates
    client_duplicates: dict[str, Any] | None = None  # duplicates a librdkafka epoch bump explains, by cause
    refused: dict[str, Any] | None = None  # truncations the replicas refused, beside the verdict


def derive(history: History, record: RunRecord) -> tuple[A.Derived, DataFrame]:
    """The tables every finder reads, and the read pairs that two of them share (only reads that
    are not one after the other: small, so computed and persisted once)."""
    d = A.derive(history.events, history.op_stats,
                 read_committed=effective_profile(record)["isolation.level"] != "read_uncommitted")
    d.op_stats = history.op_stats
    return d, read_order.read_pairs(d).persist(A.DERIVED_STORAGE)


def count(d: A.Derived, findings: dict[str, DataFrame], record: RunRecord) -> Counted:
    """Every count but one in one Spark job (shared scans and exchanges; the value-level anomalies
    in one pass over d.values); a finder that only txns can feed is left out of a history
    without one. poll-skip joins the read pairs with the offsets: counted in a second job, once the
    pairs are persisted and their size known, so the planner can broadcast them (usually a handful
    of rows) instead of shuffling and sorting every offset."""
    union = A.value_findings(d)
    for a in REGISTRY:
        if a.name not in A.VALUE_LEVEL and a.name != "poll-skip" and (not a.txns_only or d.has_txns()):
            union = union.unionAll(findings[a.name].select(F.lit(a.name).alias("anomaly")))
    found = {r["anomaly"]: r["count"] for r in union.groupBy("anomaly").count().collect()}
    found["poll-skip"] = findings["poll-skip"].count()
    if not d.has_txns() and found.get("duplicate"):
        d.flags["duplicates"] = True  # a value on two keys can close a ww cycle (cycles.possible)
        findings["G0"] = FINDERS[BY_NAME["G0"]](d, None)  # built again: the first saw no cycle possible
        found["G0"] = findings["G0"].count()
    # A G1c that only a ww edge closes is permitted (analysis/rules/permissions.py): count the rest.
    g1c_wr_only = findings["G1c"].filter("wr_only").count() if found.get("G1c") else 0
    counts = {name: int(found.get(name, 0)) for name in ANOMALIES}
    unseen_drained = _unseen_on_drained(findings["unseen"], record) if counts.get("unseen") else 0
    across = {k: findings[k].filter("across_rebalance").count() if counts.get(k) else 0 for k in REBALANCE_KINDS}
    return Counted(counts, g1c_wr_only, unseen_drained, across)


def lag_of(d: A.Derived, history: History, record: RunRecord) -> dict[str, Any] | None:
    """The consumers' realtime lag: a measurement, no anomaly (analysis/checking/lag.py). The
    drain's reads are left out; None when no poll or txn completed ok."""
    if not any((history.op_stats.get(f) or {}).get("ok") for f in ("poll", "txn")):
        return None
    return realtime_lag(d, record.drain.first_index if record.drain is not None else None)


def unavailability_of(spark: SparkSession, history: History, record: RunRecord) -> dict[str, Any] | None:
    """The clients' longest stretches with no ok write and no ok read during each fault band: a
    measurement, no anomaly (analysis/checking/unavailability.py). None when no fault struck (the
    counts per f tell, so a fault-free run never reads its history file again)."""
    if not any(f in BY_START for f in history.op_stats):
        return None
    reads = any((history.op_stats.get(f) or {}).get("ok") for f in ("poll", "txn"))
    return unavailability.measure(spark, history.events, str(history.path), history.format,
                                  record.drain.first_index if record.drain is not None else None, reads)


def judge(run_dir: Path, record: RunRecord, history: History, counted: Counted, dup_sends: list | None) -> Judged:
    """The verdict from what was found and what the run's configuration and Kafka's transaction
    model permit; then the evidence beside it, in the order its reasons are read."""
    complete, _ = drain_status(record)
    allow, rules = permitted(record)
    model, why = model_permitted(counted.counts, counted.g1c_wr_only)
    group, group_why = rebalance_permitted(counted.counts, counted.across_rebalance or {}, record.subscribe is True)
    allow, rules = set(allow) | model | group, [*rules, *why, *group_why]
    ok_ops = sum((history.op_stats.get(f) or {}).get("ok", 0) for f in ("send", "txn", "poll"))
    ended = [(history.op_stats.get(f) or {}) for f in ("send", "txn")]
    writes = (sum(n for st in ended for t, n in st.items() if t != "invoke"), sum(st.get("ok", 0) for st in ended))
    v = decide(counted.counts, allow, complete, truncated=history.truncated, ops=history.count, ok_ops=ok_ops,
               worker_errors=worker_errors(record), undrained=drain_undrained(record), unseen_drained=counted.unseen_drained,
               writes=writes)
    if record.subscribe is True:  # a kind partly across rebalances stays forbidden whole: say how much is
        for k in REBALANCE_KINDS:
            n, m = counted.counts.get(k, 0), (counted.across_rebalance or {}).get(k, 0)
            if k in v.forbidden and m:
                v.reasons = [*v.reasons, f"of the {n} {k}, {m} have a group rebalance between their reads "
                                         f"(permitted by subscribe) and {n - m} have none"]
    judged = Judged(v, allow, rules)
    _replica_divergence(run_dir, record, judged)
    _producer_sequences(run_dir, record, judged, dup_sends)
    judged.refused = truncation_refusals(run_dir)  # evidence beside the verdict, never a verdict of its own
    if judged.refused:
        v.reasons = [*v.reasons, judged.refused["sentence"]]
    if record.stuck_workers:  # not dead (workloads/threads.py): their last operation is unresolved, as any unknown one
        v.reasons = [*v.reasons, f"{len(record.stuck_workers)} client thread(s) were still inside a client call when the "
                                 f"run stopped its clients ({record.stuck_workers[0]}); the operation each was in stays "
                                 "unresolved, an unknown outcome, not a failure"]
    gone = record.unresponsive  # harness/cluster/watch.py: the brokers, not the harness
    if gone is not None:
        v.reasons = [*v.reasons, f"the brokers stopped answering at {gone.at_s} s ({gone.reason}); the workload "
                                 "stopped then, and what had been read is what was checked"]
    return judged


def _replica_divergence(run_dir: Path, record: RunRecord, judged: Judged) -> None:
    """Replicas that diverged after healing (replicas.json): permitted with unclean election, else invalid."""
    replicas = judged.replicas = read_replica_divergence(run_dir)
    if replicas is None or not replicas["diverged"]:
        return
    v = judged.verdict
    where = f"{replicas['diverged_offsets']} offset(s) from offset {replicas['first_offset']}"
    if divergence_permitted(effective_profile(record)):
        judged.allow = set(judged.allow) | {REPLICA_DIVERGENCE}
        judged.rules = [*judged.rules, "unclean.leader.election.enable=true (replicas may diverge)"]
    else:
        v.verdict = "invalid"
        v.forbidden = [*v.forbidden, REPLICA_DIVERGENCE]
        said = [p["explanation"] for p in replicas["partitions"].values() if p.get("explanation")][:3]
        v.reasons = [*v.reasons, f"replicas diverged after healing: {where} (not permitted without unclean election)"
                     + "".join(f"; {line}" for line in said)]


def _producer_sequences(run_dir: Path, record: RunRecord, judged: Judged, dup_sends: list | None) -> None:
    """Which forbidden duplicates a batch the broker refused on their partition explains, and which a
    local message timeout of their producer does (both: librdkafka's epoch bump)."""
    v = judged.verdict
    sequences = out_of_order_sequences(run_dir) if "duplicate" in v.forbidden else None
    if sequences is not None:
        clk = wall_clock(run_dir, record, None)
        sequences["duplicates_matched"] = match_duplicates(sequences, dup_sends, clk.start_ns if clk.exact else None, record.topic)
        del sequences["events"]  # up to 10k parsed lines: the match says what they showed
    judged.sequences = sequences
    client = record.mapping("client")
    name = client.get("name") or "librdkafka"
    hint = duplicate_hint(sequences, name)
    if hint:
        v.reasons = [*v.reasons, hint]
    if "duplicate" in v.forbidden:
        judged.client_duplicates = client_explained(librdkafka_only(dup_sends, name), name)
        hint = timeout_hint(judged.client_duplicates)
        if hint:
            v.reasons = [*v.reasons, hint]


def _client_evidence(examples: dict[str, list], dup_sends: list | None) -> None:
    """Each duplicate example gets what explains it on the client's side (`client`: a refused batch,
    a local message timeout, the epoch seen rising; producer_evidence), for its sentence."""
    by_value = {s["value"]: s for s in dup_sends or []}
    for ex in examples.get("duplicate") or []:
        send = by_value.get(ex.get("value")) or {}
        found = {k: send[k] for k in ("refused_batch", "timed_out_s", "epoch_bump") if send.get(k) is not None}
        if found:
            ex["client"] = found


def results_of(record: RunRecord, history: History, counted: Counted, examples: dict[str, list], lag: dict[str, Any] | None,
               judged: Judged, timings: dict[str, float]) -> dict[str, Any]:
    """The results dict, as results.json holds it (docs/checker.md)."""
    v, replicas, counts = judged.verdict, judged.replicas, counted.counts
    complete, hws = drain_status(record)
    return {
        "results_version": RESULTS_VERSION,
        "verdict": v.verdict,
        "reasons": v.reasons,
        "forbidden": v.forbidden,
        "counts": counts,
        "headline": headline(counts, complete, v.forbidden, unseen_drained=counted.unseen_drained, replica_diverged=
                             replicas["diverged_offsets"] if replicas is not None and replicas["diverged"] else 0),
        "allowed": sorted(judged.allow, key=lambda a: ANOMALIES.index(a) if a in ANOMALIES else len(ANOMALIES)),
        "allowed_by": judged.rules,
        # Of each, the pairs with a group rebalance between their reads (docs/checker.md): an addition.
        "across_rebalance": counted.across_rebalance,
        "examples": examples,
        "op_stats": history.op_stats,
        "drain": {"complete": complete, "high_watermarks": hws, "undrained": drain_undrained(record)},
        "replica_divergence": replicas,
        "truncation_refused": judged.refused,
        "unresponsive": record.unresponsive.as_json() if record.unresponsive is not None else None,
        "realtime_lag": lag,
        "out_of_order_sequences": judged.sequences,
        "client_duplicates": judged.client_duplicates,
        "history": {"path": str(history.path), "format": history.format, "events": history.count,
                    "truncated": history.truncated},
        "run": {"seed": record.seed, "kafka_version": record.kafka_version, "workload": record.workload,
                "profile": effective_profile(record)["name"], "nemesis": sorted(record.nemesis or []),
                **({"upgrade_to": record.raw["upgrade_to"]} if record.raw.get("upgrade_to") else {})},
        "checked_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "timings": timings,
    }


def check_history(spark: SparkSession, run_dir: Path, config: RecordLike, prefer: str | None = None) -> dict[str, Any]:
    """The results dict for one run (nothing written). `config`: its record (read_record), or
    config.json's content, or None (the safe profile, the drain's status unknown)."""
    record = as_record(config)
    began, timings = time.perf_counter(), {}
    with _timed(timings, "load_s"):
        history = load_history(spark, run_dir, prefer=prefer)
    d = pairs = None
    try:
        with _timed(timings, "derive_s"):
            d, pairs = derive(history, record)
        findings = Findings(d, pairs)  # each entry's claimed finder, its frame built when first read
        with _timed(timings, "count_s"):
            counted = count(d, findings, record)
        with _timed(timings, "examples_s"):
            examples, dup_sends = gather_examples(d, findings, counted.counts)
        with _timed(timings, "lag_s"):
            lag = lag_of(d, history, record)
        with _timed(timings, "unavailability_s"):
            unavailable = unavailability_of(spark, history, record)
    finally:
        if pairs is not None:
            pairs.unpersist()
        if d is not None:
            d.unpersist()
        history.release()
    judged = judge(run_dir, record, history, counted, dup_sends)
    _client_evidence(examples, dup_sends)
    timings["total_s"] = round(time.perf_counter() - began, 3)
    results = results_of(record, history, counted, examples, lag, judged, timings)
    results["unavailability"] = unavailable
    return results


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
    record = read_record(run_dir)
    if output is not None:
        out.mkdir(parents=True, exist_ok=True)
    probe_writable(out)
    retire(run_dir, out)
    fingerprint = history_fingerprint(run_dir)
    if spark is None:
        from analysis.checking.spark import get_session

        spark = get_session()
    results = check_history(spark, run_dir, record, prefer=prefer)
    results["history"]["fingerprint"] = fingerprint
    from analysis.explain.explanations import attach  # each example's context: faults, leader, reads, logs, UTC

    attach(run_dir, results, record)
    try:
        write_results(results, out)
    except OSError as err:
        raise ResultsNotWritten(results, out, err) from err
    return results
