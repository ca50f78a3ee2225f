"""Unavailability: during each fault band, the longest stretch with no ok write and the longest with
no ok read. A measurement, not an anomaly: it never changes a verdict. An SRE's first question after
a rolling restart is "did clients notice?"; this answers it per band, in results.json
("unavailability"), beside each band in the report, and in the dashboard's trends. Definition in
docs/checker.md ("Unavailability"); the reference is analysis/reference/unavailability.py.

On Spark: the ok completions are counted in 100 ms buckets per kind (write, read), keeping each
bucket's first and last completion time: one small aggregate (ten rows a second of run), collected.
A gap between two buckets is then exact (the later bucket's first completion minus the earlier's
last); a gap inside one bucket is at most 100 ms, and a band's edge that falls inside a bucket is
placed to within 100 ms. The bands come from the nemesis events, paired as the report pairs them
(analysis/explain/timeline.py faults_from), read once from the history file: a handful of rows.
"""

from __future__ import annotations

import bisect
import json
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis.explain.timeline import faults_from
from harness.history.faults import BY_START, OPERATIONS

NS = 1_000_000_000
BUCKET_NS = 100_000_000
OPERATION_STARTS = {k.start for k in OPERATIONS}


def buckets(events: DataFrame, until_index: int | None) -> dict[str, list[tuple[int, int, int]]]:
    """kind ("write", "read") -> [(bucket, first time, last time)] of ok completions, in bucket order.
    The drain's reads (from `until_index` on) are left out."""
    ok = events.filter((F.col("type") == "ok") & F.col("pid").isNotNull())
    f, v = F.col("f"), F.col("value")
    write = (f == "send") | ((f == "txn") & (F.size(v["sends"]) > 0))
    read = (f == "poll") | ((f == "txn") & (F.size(v["records"]) > 0))
    if until_index is not None:
        read = read & (F.col("index") < F.lit(until_index))
    kinds = F.explode(F.array(F.when(write, F.lit("write")), F.when(read, F.lit("read"))))
    rows = (ok.filter(write | read).select(kinds.alias("kind"), "time").filter(F.col("kind").isNotNull())
            .groupBy("kind", F.floor(F.col("time") / BUCKET_NS).alias("b"))
            .agg(F.min("time").alias("lo"), F.max("time").alias("hi")).collect())
    out: dict[str, list[tuple[int, int, int]]] = {"write": [], "read": []}
    for r in rows:
        out[r["kind"]].append((int(r["b"]), int(r["lo"]), int(r["hi"])))
    return {k: sorted(v) for k, v in out.items()}


def longest_gap(bs: list[tuple[int, int, int]], start: int, end: int) -> int:
    """The longest stretch of [start, end] (ns) with no completion, from the buckets (see above)."""
    keys = [b for b, _, _ in bs]
    inside = bs[bisect.bisect_left(keys, start // BUCKET_NS):bisect.bisect_right(keys, end // BUCKET_NS)]
    points: list[int] = [start]
    for _, lo, hi in inside:
        points += [min(max(lo, start), end), min(max(hi, start), end)]
    points.append(end)
    return max(b - a for a, b in zip(points, points[1:]))


def nemesis_events(spark: SparkSession, path: str, fmt: str) -> list[dict[str, Any]]:
    """The history's nemesis events as the report reads them: t (s), f, value (parsed)."""
    from analysis.checking.history_load import RAW_JSONL

    raw = spark.read.parquet(path) if fmt == "parquet" else spark.read.schema(RAW_JSONL).json(path)
    rows = raw.filter(F.col("process") == "nemesis").select("time", "f", F.col("value").cast("string").alias("v")).collect()
    out = []
    for r in rows:
        try:
            value = json.loads(r["v"]) if r["v"] else {}
        except ValueError:
            value = {}
        out.append({"t": r["time"] / NS, "f": r["f"], "value": value if isinstance(value, dict) else {}})
    return out


def measure(spark: SparkSession, events: DataFrame, path: str, fmt: str, until_index: int | None,
            reads_at_all: bool) -> dict[str, Any] | None:
    """results.json's "unavailability": per band and, per kind of fault, the longest of each. None
    when the history holds no fault band."""
    nemesis = nemesis_events(spark, path, fmt)
    if not nemesis:
        return None
    if not any(e["f"] in BY_START for e in nemesis):
        return None
    bs = buckets(events, until_index)
    # A band never ended runs to the history's last event (of the nemesis or of a client).
    last = max([int(round(e["t"] * NS)) for e in nemesis] + [hi for k in bs.values() for _, _, hi in k])
    faults, _ = faults_from(nemesis, last / NS)
    bands = []
    for x in faults:
        start, end = int(round(x.start_s * NS)), int(round(x.end_s * NS))
        bands.append({"f": x.f, "label": x.label, "operation": x.f in OPERATION_STARTS,
                      "start_s": round(x.start_s, 3), "end_s": round(end / NS, 3), "targets": x.targets,
                      "no_write_s": round(longest_gap(bs["write"], start, end) / NS, 3),
                      "no_read_s": round(longest_gap(bs["read"], start, end) / NS, 3) if reads_at_all else None})
    return {"resolution_s": BUCKET_NS / NS, "bands": bands, "by_fault": by_fault(bands)}


def by_fault(bands: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per band kind (its start f): how many bands, and the longest no-write and no-read stretch."""
    out: dict[str, dict[str, Any]] = {}
    for b in bands:
        s = out.setdefault(b["f"], {"bands": 0, "operation": b["operation"], "max_no_write_s": 0.0, "max_no_read_s": None})
        s["bands"] += 1
        s["max_no_write_s"] = max(s["max_no_write_s"], b["no_write_s"])
        if b["no_read_s"] is not None:
            s["max_no_read_s"] = max(s["max_no_read_s"] or 0.0, b["no_read_s"])
    return out
