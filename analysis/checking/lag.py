"""realtime-lag: how far consumers trail the log, as Jepsen's kafka checker measures it (its
`realtime-lag`). A measurement, not an anomaly: it never changes a verdict. Definition in
docs/checker.md ("Realtime lag"); the reference is analysis/reference/lag.py.

For each `ok` poll or txn of a process and each key the process holds a position on, the lag is
the time from when the log was known to hold the offset after that position (the earliest
completion of an op that observed that offset or a higher one) to the op's invoke, or 0.

On Spark: the positions are a walk over each reading process's ops in order (assigns and resets
change which keys it holds), one grouped pandas function per process over one narrow row per op
(the per-key highest offset of each op is a grouped max, one row per op and key read). The time each
offset was known is `first_time` of the persisted offsets; a suffix minimum over offsets per key,
in one window with the lag queries, gives each query its time.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from analysis.checking.anomalies import Derived

_OPS = T.StructType([
    T.StructField("pid", T.LongType()), T.StructField("index", T.LongType()), T.StructField("time", T.LongType()),
    T.StructField("key", T.LongType()), T.StructField("position", T.LongType())])


def _walk(pdf: pd.DataFrame) -> pd.DataFrame:
    """One process's ops in index order -> (pid, index, invoke time, key, position) per reading op
    and key held. kind: 'i' invoke of a poll/txn, 'k' the highest offset (`offset`) an ok poll/txn
    read on one key (one row per key it read), 'r' that ok poll/txn itself (after its 'k' rows),
    'a' assign, 's' subscribe."""
    pdf = pdf.sort_values(["index", "kind"])  # an op's 'k' rows before its 'r' row ('k' < 'r')
    pos: dict[int, int] = {}
    invoked = None
    out: list[tuple[int, int, int, int, int]] = []
    # Columns as lists, not itertuples: one row per key read makes ~8 rows per poll.
    cols = [pdf[c].tolist() for c in ("pid", "index", "time", "kind", "key", "offset", "keys", "seek", "counted")]
    for pid, index, time, kind, key, offset, keys, seek, counted in zip(*cols):
        if kind == "k":
            pos[key] = max(pos.get(key, -1), offset)
        elif kind == "i":
            invoked = time
        elif kind == "a" and seek is None:
            held = set(keys)
            pos = {k: o for k, o in pos.items() if k in held}
        elif kind == "a" and seek == "beginning":
            pos = dict.fromkeys(keys, -1)
        elif kind in ("a", "s"):
            pos = {}
        elif kind == "r" and counted:  # not after the drain began
            start = time if invoked is None else invoked
            out.extend((pid, index, start, k, o) for k, o in pos.items())
    return pd.DataFrame(out, columns=["pid", "index", "time", "key", "position"])


def _ops(d: Derived, until_index: int | None) -> DataFrame:
    """Narrow rows for the walk: one per op that moves a consumer (invokes and `ok` completions of
    polls and txns, `ok` assigns and subscribes) and one per (ok poll or txn, key it read) with
    the highest offset read there. That highest offset is a grouped max over the exploded records,
    not array lambdas per op (for each key, filter the records): those are interpreted row by
    row, and building the old rows alone took 13.6-16.4 s on a 2M-event history (load 12-30); the
    partial aggregate before the shuffle leaves ~8 rows a poll of 100 records."""
    f, t = F.col("f"), F.col("type")
    reading = f.isin("poll", "txn")
    kind = (F.when(reading & (t == "invoke"), F.lit("i")).when(reading & (t == "ok"), F.lit("r"))
            .when((f == "assign") & (t == "ok"), F.lit("a")).when((f == "subscribe") & (t == "ok"), F.lit("s")))
    counted = F.lit(True) if until_index is None else F.col("index") < F.lit(until_index)
    zero = F.lit(0).cast("long")
    ops = (d.events.filter(F.col("pid").isNotNull()).select("pid", "index", "time", "value", kind.alias("kind"))
           .filter(F.col("kind").isNotNull())
           .select(F.col("pid").cast("long").alias("pid"), "index", "time", "kind", zero.alias("key"),
                   zero.alias("offset"), F.coalesce(F.col("value.keys"), F.array()).cast("array<bigint>").alias("keys"),
                   F.col("value.seek").alias("seek"), counted.alias("counted")))
    read = (d.events.filter(F.col("pid").isNotNull() & reading & (t == "ok"))
            .select(F.col("pid").cast("long").alias("pid"), "index", "time", F.explode("value.records").alias("r"))
            .groupBy("pid", "index", "time", F.col("r.key").cast("long").alias("key"))
            .agg(F.max(F.col("r.offset").cast("long")).alias("offset"))
            .select("pid", "index", "time", F.lit("k").alias("kind"), "key", "offset",
                    F.lit(None).cast("array<bigint>").alias("keys"), F.lit(None).cast("string").alias("seek"),
                    F.lit(True).alias("counted")))
    return ops.unionByName(read)


def entries(d: Derived, until_index: int | None = None) -> DataFrame:
    """One row per (reading op, key held): pid, key, index, time (invoke), position, lag_ns."""
    queries = _ops(d, until_index).groupBy("pid").applyInPandas(_walk, _OPS)
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
    rows = _stats(entries(d, until_index)).collect()
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
