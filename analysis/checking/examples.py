"""Examples of each anomaly found: the first MAX_EXAMPLES rows of its findings in the registry's
order for it, each with the ops behind it, and each duplicated value's send (for matching the
brokers' refused batches to it)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.checking import anomalies as A
from analysis.explain.producer_evidence import TIMED_OUT, attach_epoch_bumps, attach_message_timeouts, attach_producer_ids
from analysis.rules.registry import MAX_EXAMPLES, REGISTRY, Anomaly


def gather_examples(d: A.Derived, findings: dict[str, DataFrame], counts: dict[str, int]) -> tuple[dict[str, list], list | None]:
    """Examples of each anomaly found (none where nothing was), and each duplicated value's send."""
    if any(counts[name] for name in A.VALUE_LEVEL):
        d.values.persist(A.DERIVED_STORAGE)  # each anomaly found reads it again for examples
    examples = {a.name: _examples(a, findings[a.name], d) if counts[a.name] else [] for a in REGISTRY}
    dup_sends = _duplicate_sends(d, findings["duplicate"]) if counts.get("duplicate") else None
    return examples, dup_sends


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


# Every duplicated value's send up to this many, so that a known client cause can be shown for each
# (10,000 before 2026-11-27; the campaign's seed 19 had 27,727). Spark's isin becomes a hash set.
MAX_DUPLICATE_SENDS = 50_000
MAX_TIMEOUTS = 100_000  # the duplicates' producers' local message timeouts (seed 19: 1,839)


def _duplicate_sends(d: A.Derived, duplicates: DataFrame) -> list[dict[str, Any]]:
    """Each duplicated value's send: its key, when it was invoked and completed (seconds on the
    history's clock). For matching the brokers' OutOfOrderSequenceExceptions to them
    (producer_evidence.match_duplicates) and their producers' message timeouts to them
    (attach_message_timeouts); a value sent in a transaction has no invoke of its own."""
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
    reported = d.events.filter(
        (F.col("f") == "producer") & F.col("process").isin(list(processes)) & F.col("value.producer_id").isNotNull()).select(
        "process", "time", F.col("value.producer_id").alias("id"), F.col("value.producer_epoch").alias("epoch")).collect() if processes else []
    ids = [(r["process"], r["time"] / 1e9, r["id"]) for r in reported]
    epochs = [(r["process"], r["time"] / 1e9, r["id"], r["epoch"]) for r in reported if r["epoch"] is not None]
    timeouts = [(r["process"], r["time"] / 1e9) for r in d.events.filter(
        (F.col("f") == "send") & (F.col("type") != "invoke") & F.col("error").startswith(TIMED_OUT)
        & F.col("process").isin(list(processes))).select("process", "time").limit(MAX_TIMEOUTS).collect()] if processes else []
    return attach_epoch_bumps(attach_message_timeouts(attach_producer_ids(list(sends.values()), ids), timeouts), epochs)


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
