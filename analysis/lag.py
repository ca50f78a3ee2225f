"""realtime-lag: how far consumers trail the log, as Jepsen's kafka checker measures it (its
`realtime-lag`). A measurement, not an anomaly: it never changes a verdict. Definition in
docs/checker.md ("Realtime lag"); the reference is analysis/reference_lag.py.

For each `ok` poll or txn of a process and each key the process holds a position on, the lag is
the time from when the log was known to hold the offset after that position (the earliest
completion of an op that observed that offset or a higher one) to the op's invoke, or 0.

On Spark: the positions are a walk over each reading process's ops in order (assigns and resets
change which keys it holds), one grouped pandas function per process over one narrow row per op
(the per-key highest offset of each op is taken inside the row, without a shuffle). The time each
offset was known is `first_time` of the persisted offsets; a suffix minimum over offsets per key,
in one window with the lag queries, gives each query its time.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from analysis.anomalies import Derived

_OPS = T.StructType([
    T.StructField("pid", T.LongType()), T.StructField("index", T.LongType()), T.StructField("time", T.LongType()),
    T.StructField("key", T.LongType()), T.StructField("position", T.LongType())])


def _walk(pdf: pd.DataFrame) -> pd.DataFrame:
    """One process's ops in index order -> (pid, index, invoke time, key, position) per reading op
    and key held. kind: 'i' invoke of a poll/txn, 'r' ok poll/txn, 'a' assign, 's' subscribe."""
    pdf = pdf.sort_values("index")
    pos: dict[int, int] = {}
    invoked = None
    out: list[tuple[int, int, int, int, int]] = []
    for row in pdf.itertuples(index=False):
        if row.kind == "i":
            invoked = row.time
        elif row.kind == "a" and row.seek is None:
            held = set(row.keys)
            pos = {k: o for k, o in pos.items() if k in held}
        elif row.kind == "a" and row.seek == "beginning":
            pos = dict.fromkeys(row.keys, -1)
        elif row.kind in ("a", "s"):
            pos = {}
        elif row.kind == "r":
            for k, o in zip(row.keys, row.offsets):
                pos[k] = max(pos.get(k, -1), o)
            if row.counted:  # not after the drain began
                start = row.time if invoked is None else invoked
                out.extend((row.pid, row.index, start, k, o) for k, o in pos.items())
    return pd.DataFrame(out, columns=["pid", "index", "time", "key", "position"])


def _ops(d: Derived, until_index: int | None) -> DataFrame:
    """One narrow row per op that moves a consumer: invokes and `ok` completions of polls and
    txns, `ok` assigns and subscribes."""
    f, t = F.col("f"), F.col("type")
    reading = f.isin("poll", "txn")
    kind = (F.when(reading & (t == "invoke"), F.lit("i")).when(reading & (t == "ok"), F.lit("r"))
            .when((f == "assign") & (t == "ok"), F.lit("a")).when((f == "subscribe") & (t == "ok"), F.lit("s")))
    records = F.coalesce(F.col("value.records"), F.array())
    read_keys = F.array_distinct(F.transform(records, lambda r: r["key"].cast("long")))
    highest = F.transform(read_keys, lambda k: F.array_max(F.transform(
        F.filter(records, lambda r: r["key"].cast("long") == k), lambda r: r["offset"].cast("long"))))
    is_read = F.col("kind") == "r"
    counted = F.lit(True) if until_index is None else F.col("index") < F.lit(until_index)
    return (d.events.filter(F.col("pid").isNotNull()).select("pid", "index", "time", "value", kind.alias("kind"))
            .filter(F.col("kind").isNotNull())
            .select(F.col("pid").cast("long").alias("pid"), "index", "time", "kind",
                    F.when(is_read, read_keys).otherwise(
                        F.transform(F.coalesce(F.col("value.keys"), F.array()), lambda k: k.cast("long"))).alias("keys"),
                    F.when(is_read, highest).alias("offsets"), F.col("value.seek").alias("seek"),
                    counted.alias("counted")))


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


def _stats(df: DataFrame, by: list[str]) -> DataFrame:
    ms = F.floor(F.col("lag_ns") / F.lit(1_000_000)).cast("long")
    return df.select("*", ms.alias("ms")).groupBy(*by).agg(
        F.count(F.lit(1)).alias("entries"), F.max("ms").alias("max_ms"),
        F.expr("percentile(ms, array(0.5, 0.99))").alias("p"),
        F.max(F.struct("ms", (-F.col("index")).alias("i"), (-F.col("key")).alias("k"), "pid", "time")).alias("worst"))


def summary(d: Derived, until_index: int | None = None) -> dict[str, Any] | None:
    """Max, p50 and p99 of the lags in whole milliseconds, overall and per key, and the worst entry.
    None when no reading op held a position."""
    es = entries(d, until_index).persist()
    try:
        overall = _stats(es.withColumn("all", F.lit(0)), ["all"]).collect()
        if not overall:
            return None
        per_key = _stats(es, ["key"]).collect()
    finally:
        es.unpersist()

    def stats(r) -> dict[str, Any]:
        return {"entries": r["entries"], "max_ms": r["max_ms"], "p50_ms": round(r["p"][0], 3),
                "p99_ms": round(r["p"][1], 3)}

    o = overall[0]
    w = o["worst"]
    return {**stats(o), "worst": {"process": w["pid"], "key": -w["k"], "index": -w["i"], "time": w["time"],
                                  "lag_ms": w["ms"]},
            "keys": {str(r["key"]): stats(r) for r in sorted(per_key, key=lambda r: r["key"])}}
