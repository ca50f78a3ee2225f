"""realtime-lag: how far consumers trail the log, as Jepsen's kafka checker measures it (its
`realtime-lag`). A measurement, not an anomaly: it never changes a verdict. Definition in
docs/checker.md ("Realtime lag"); the reference is analysis/reference/lag.py.

For each `ok` poll or txn of a process and each key the process holds a position on, the lag is
the time from when the log was known to hold the offset after that position (the earliest
completion of an op that observed that offset or a higher one) to the op's invoke, or 0.

On Spark: the positions are the definition's walk written as windows per (process, key) over
narrow rows (the highest offset each op read there, the resets, one query row per reading op and
key held): see _positions. The time each offset was known is `first_time` of the persisted
offsets; a suffix minimum over offsets per key, in one window with the lag queries, gives each
query its time.
"""

from __future__ import annotations

from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis.checking.anomalies import Derived


def _moves(d: Derived) -> DataFrame:
    """One narrow row per op that moves a consumer and per (ok poll or txn, key it read): pid,
    index, time, kind, key, offset, keys, seek. kind: 'i' invoke of a poll/txn, 'r' its `ok`,
    'a' an `ok` assign (keys, seek), 's' an `ok` subscribe, 'k' the highest offset an ok poll/txn
    read on one key. That highest offset is a grouped max over the exploded records, not array
    lambdas per op (for each key, filter the records): those are interpreted row by row, and
    building the old rows alone took 13.6-16.4 s on a 2M-event history (load 12-30); the partial
    aggregate before the shuffle leaves ~8 rows a poll of 100 records. Read several times by
    _positions: summary persists it (~1M rows for 10M events) so that the history is scanned once."""
    f, t = F.col("f"), F.col("type")
    reading = f.isin("poll", "txn")
    kind = (F.when(reading & (t == "invoke"), F.lit("i")).when(reading & (t == "ok"), F.lit("r"))
            .when((f == "assign") & (t == "ok"), F.lit("a")).when((f == "subscribe") & (t == "ok"), F.lit("s")))
    none = F.lit(None).cast("long")
    ops = (d.events.filter(F.col("pid").isNotNull()).select("pid", "index", "time", "value", kind.alias("kind"))
           .filter(F.col("kind").isNotNull())
           .select(F.col("pid").cast("long").alias("pid"), "index", "time", "kind", none.alias("key"),
                   none.alias("offset"), F.col("value.keys").cast("array<bigint>").alias("keys"),
                   F.col("value.seek").alias("seek")))
    read = (d.events.filter(F.col("pid").isNotNull() & reading & (t == "ok"))
            .select(F.col("pid").cast("long").alias("pid"), "index", F.explode("value.records").alias("r"))
            .groupBy("pid", "index", F.col("r.key").cast("long").alias("key"))
            .agg(F.max(F.col("r.offset").cast("long")).alias("offset"))
            .select("pid", "index", none.alias("time"), F.lit("k").alias("kind"), "key", "offset",
                    F.lit(None).cast("array<bigint>").alias("keys"), F.lit(None).cast("string").alias("seek")))
    return ops.unionByName(read)


def _positions(moves: DataFrame, until_index: int | None) -> DataFrame:
    """(pid, index, time, key, position) per counted `ok` poll or txn and key its process holds a
    position on; time is the op's invoke. The walk of the definition (analysis/reference/lag.py), as
    windows: per (process, key), the rows that move the position (the highest offset an op read
    there; an assign or subscribe that drops it, or sets it to -1 with seek "beginning"), and one
    query row per reading op and key the process ever held. A reset starts a segment; the position
    at a query is the running maximum within its segment, none when the segment has nothing yet.

    Before (to 2026-11-26) the walk was a grouped pandas function per process: on the 10M-event
    bench history its Python took 0.9 s a process, but the stage that shipped ~1M rows through
    Arrow to Python and back ran 26.6 s of task time (13.8 s of wall time, load 12-29). The whole
    summary, old and new alternating in one JVM on that history (load 14-20, a soak beside it):
    33.3, 26.9, 26.5 s against 29.6, 18.2, 16.5 s, the same summary. Written first without
    persisting `moves`, it scanned the history twice and exploded the reads twice: no gain."""
    highest = moves.filter(F.col("kind") == "k")
    resets = moves.filter(F.col("kind").isin("a", "s"))
    # Every key a process can hold a position on: one it read, or one an assign set to -1.
    held = (highest.select("pid", "key")
            .unionByName(resets.filter(F.col("seek") == "beginning").select("pid", F.explode("keys").alias("key")))
            .distinct())
    # What each reset does to each such key: position -1 (seek "beginning" and the key assigned) or
    # none (dropped). An assign without seek that keeps the key does nothing to it.
    kept = F.array_contains(F.coalesce(F.col("keys"), F.array().cast("array<bigint>")), F.col("key"))
    effect = (resets.drop("key").join(held, "pid")
              .filter(~((F.col("kind") == "a") & F.col("seek").isNull() & kept))
              .select("pid", "key", "index",
                      F.when((F.col("kind") == "a") & (F.col("seek") == "beginning") & kept, F.lit(-1))
                      .cast("long").alias("offset"),
                      F.lit(0).alias("order"), F.lit(1).alias("reset"), F.lit(None).cast("long").alias("time")))
    reads = highest.select("pid", "key", "index", "offset", F.lit(1).alias("order"), F.lit(0).alias("reset"),
                           F.lit(None).cast("long").alias("time"))
    # The query rows: each counted ok poll or txn, at its invoke (the latest poll/txn invoke of its
    # process before it), for every key the process ever held.
    by_pid = Window.partitionBy("pid").orderBy("index").rowsBetween(Window.unboundedPreceding, 0)
    invoked = F.last(F.when(F.col("kind") == "i", F.col("time")), ignorenulls=True).over(by_pid)
    polls = (moves.filter(F.col("kind").isin("i", "r")).select("pid", "index", "kind", "time", invoked.alias("invoked"))
             .filter(F.col("kind") == "r"))
    if until_index is not None:
        polls = polls.filter(F.col("index") < F.lit(until_index))
    queries = polls.join(held, "pid").select(
        "pid", "key", "index", F.lit(None).cast("long").alias("offset"), F.lit(2).alias("order"),
        F.lit(0).alias("reset"), F.coalesce("invoked", "time").alias("time"))
    rows = effect.unionByName(reads).unionByName(queries)
    walk = Window.partitionBy("pid", "key").orderBy("index", "order")
    rows = rows.select("*", F.sum("reset").over(walk.rowsBetween(Window.unboundedPreceding, 0)).alias("segment"))
    within = (Window.partitionBy("pid", "key", "segment").orderBy("index", "order")
              .rowsBetween(Window.unboundedPreceding, 0))
    return (rows.select("*", F.max("offset").over(within).alias("position"))
            .filter((F.col("order") == 2) & F.col("position").isNotNull())
            .select("pid", "index", "time", "key", "position"))


def entries(d: Derived, until_index: int | None = None, moves: DataFrame | None = None) -> DataFrame:
    """One row per (reading op, key held): pid, key, index, time (invoke), position, lag_ns."""
    queries = _positions(_moves(d) if moves is None else moves, until_index)
    known = d.offsets.select(F.col("key").cast("long").alias("key"), F.col("offset").cast("long").alias("offset"),
                             F.col("first_time").alias("known"))
    rows = queries.select("key", (F.col("position") + 1).alias("offset"), F.lit(None).cast("long").alias("known"),
                          "pid", "index", "time", "position")
    rows = known.select("key", "offset", "known", *[F.lit(None).cast("long").alias(c)
                                                    for c in ("pid", "index", "time", "position")]).unionByName(rows)
    # Every offset at or above the query's (peers included): the earliest time one was observed.
    w = Window.partitionBy("key").orderBy(F.col("offset").desc()).rangeBetween(Window.unboundedPreceding, 0)
    at = rows.select("*", F.min("known").over(w).alias("expired")).filter(F.col("pid").isNotNull())
    lag = F.coalesce(F.greatest(F.col("time") - F.col("expired"), F.lit(0)), F.lit(0))
    return at.select("pid", "key", "index", "time", "position", lag.alias("lag_ns"))


def _stats(df: DataFrame) -> DataFrame:
    """Per key and overall (the row whose `total` is 1), in one aggregation (rollup) over entries
    that are not persisted: before, two jobs read persisted entries. Measured with the grouped-max
    _ops on a 2M-event history, the whole summary against the old one in the same JVM: 19.7 s
    against 22.4 s, then warm 9.55 s against 9.49 s (load 10-25): no gain above the noise there,
    but one job fewer and nothing left to unpersist; same results (tests/analysis/test_lag.py)."""
    ms = F.floor(F.col("lag_ns") / F.lit(1_000_000)).cast("long")
    return df.select("*", ms.alias("ms")).rollup("key").agg(
        F.grouping("key").alias("total"),
        F.count(F.lit(1)).alias("entries"), F.max("ms").alias("max_ms"),
        F.expr("percentile(ms, array(0.5, 0.99))").alias("p"),
        F.max(F.struct("ms", (-F.col("index")).alias("i"), (-F.col("key")).alias("k"), "pid", "time")).alias("worst"))


def summary(d: Derived, until_index: int | None = None) -> dict[str, Any] | None:
    """Max, p50 and p99 of the lags in whole milliseconds, overall and per key, and the worst entry.
    None when no reading op held a position."""
    moves = _moves(d).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows = _stats(entries(d, until_index, moves)).collect()
    finally:
        moves.unpersist()
    overall = [r for r in rows if r["total"]]
    per_key = [r for r in rows if not r["total"]]
    if not overall:
        return None

    def stats(r) -> dict[str, Any]:
        return {"entries": r["entries"], "max_ms": r["max_ms"], "p50_ms": round(r["p"][0], 3),
                "p99_ms": round(r["p"][1], 3)}

    o = overall[0]
    w = o["worst"]
    return {**stats(o), "worst": {"process": w["pid"], "key": -w["k"], "index": -w["i"], "time": w["time"],
                                  "lag_ms": w["ms"]},
            "keys": {str(r["key"]): stats(r) for r in sorted(per_key, key=lambda r: r["key"])}}
