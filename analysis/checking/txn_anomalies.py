"""The anomalies inside one transaction (Jepsen's int- anomalies, and precommitted-read), one
function each, Spark SQL functions only. Definitions are in analysis/rules/registry.py.

They read only `txn` completions (ok, info and fail: a poller must return safe data whatever its
transaction's fate, and an aborted transaction's records still sit in the log at the offsets its
sends were given), which are few next to the polls and sends, and the persisted `offsets` of
derive() for the observed order. A skip is a pair of positions with an observed offset strictly
between them: the pairs that could skip are few (a transaction's reads and sends are usually
consecutive, and the txn workload sends to distinct partitions), so they are broadcast against
the observed offsets, one scan of that table, rather than shuffling it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis.checking.anomalies import Derived, _offset
from analysis.checking.claims import finds

TXN_OUTCOMES = ("ok", "info", "fail")


def _txns(d: Derived) -> DataFrame:
    """The txn completions; in a history without any, a constant false filter that the optimizer
    turns into an empty relation, so these finders add no work to the count job."""
    return d.events.filter((F.col("f") == "txn") & F.col("type").isin(*TXN_OUTCOMES) & F.lit(d.has_txns()))


def _observed(d: Derived) -> DataFrame:
    """(key, offset) of every observed position."""
    return d.offsets.select("key", "offset")


def observed_values(d: Derived, reads_only: bool) -> DataFrame:
    """(key, offset, value) of every value observed at a position (reads_only: returned by an ok
    read). From the persisted offsets where one value was seen; where values disagree the offsets
    keep only the least and greatest, so those few positions are taken from the ops themselves."""
    single = d.offsets.filter(F.col("value").isNotNull() & (F.col("read") if reads_only else F.lit(True)))
    disputed = d.offsets.filter(F.col("values").isNotNull()).select("key", "offset")
    source = d.reads if reads_only else d.positions
    multi = source.join(F.broadcast(disputed), ["key", "offset"], "left_semi")
    return single.select("key", "offset", "value").unionByName(multi.select("key", "offset", "value"))


def _pairs(rows: DataFrame, position: str) -> DataFrame:
    """Successive rows of one txn (index) on one key, in the txn's own order (pos), with the
    previous row's position and value; only pairs where both positions are known."""
    w = Window.partitionBy("index", "key").orderBy("pos")
    return rows.select("index", "process", "key", "pos", F.col(position).alias("position"), "value",
                       F.lag(position).over(w).alias("prev_position"), F.lag("value").over(w).alias("prev_value")
                       ).filter(F.col("position").isNotNull() & F.col("prev_position").isNotNull())


def _columns() -> list:
    return ["key", "process", F.array("prev_position", "position").alias("offsets"),
            F.array("prev_value", "value").alias("values"), F.array("index").alias("op_indexes")]


def _backwards(pairs: DataFrame) -> DataFrame:
    return pairs.filter(F.col("position") <= F.col("prev_position")).select(*_columns())


def _skips(d: Derived, pairs: DataFrame) -> DataFrame:
    """The pairs with an observed offset strictly between their positions, with the first one."""
    jumps = pairs.filter(F.col("position") > F.col("prev_position") + 1)
    between = ((F.col("o.key") == F.col("p.key")) & (F.col("o.offset") > F.col("p.prev_position"))
               & (F.col("o.offset") < F.col("p.position")))
    return (_observed(d).alias("o").join(F.broadcast(jumps.alias("p")), between)
            .groupBy("p.index", "p.process", "p.key", "p.pos", "p.prev_position", "p.position", "p.prev_value", "p.value")
            .agg(F.min("o.offset").alias("skipped_offset"))
            .select(*_columns(), "skipped_offset"))


def _send_pairs(d: Derived) -> DataFrame:
    """Successive sends of one txn to one key. A send without an acknowledged offset takes the
    lowest offset an ok read returned its value at (found by broadcasting those few sends
    against the observed positions)."""
    sends = _txns(d).select("index", "process", F.posexplode("value.sends").alias("pos", "s")).select(
        "index", "process", "pos", F.col("s.key").alias("key"), F.col("s.value").alias("value"),
        _offset(F.col("s.offset")).alias("own"))
    missing = sends.filter(F.col("own").isNull()).select("key", "value").distinct()
    read_at = (observed_values(d, reads_only=True)
               .join(F.broadcast(missing), ["key", "value"], "left_semi")
               .groupBy("key", "value").agg(F.min("offset").alias("read_offset")))
    placed = sends.join(F.broadcast(read_at), ["key", "value"], "left").select(
        "index", "process", "pos", "key", "value", F.coalesce("own", "read_offset").alias("position"))
    return _pairs(placed, "position")


def _read_pairs(d: Derived) -> DataFrame:
    """Successive records of one key inside one txn, in the order returned."""
    reads = _txns(d).select("index", "process", F.posexplode("value.records").alias("pos", "r")).select(
        "index", "process", "pos", F.col("r.key").alias("key"), F.col("r.offset").alias("offset"),
        F.col("r.value").alias("value"))
    return _pairs(reads, "offset")


@finds("int-nonmonotonic-send")
def int_nonmonotonic_send(d: Derived) -> DataFrame:
    """int-nonmonotonic-send (analysis/rules/registry.py): one row per adjacent pair of a txn's sends."""
    return _backwards(_send_pairs(d))


@finds("int-send-skip")
def int_send_skip(d: Derived) -> DataFrame:
    """int-send-skip (analysis/rules/registry.py): one row per adjacent pair of a txn's sends."""
    return _skips(d, _send_pairs(d))


@finds("int-nonmonotonic-poll")
def int_nonmonotonic_poll(d: Derived) -> DataFrame:
    """int-nonmonotonic-poll (analysis/rules/registry.py): one row per adjacent pair of a txn's reads."""
    return _backwards(_read_pairs(d))


@finds("int-poll-skip")
def int_poll_skip(d: Derived) -> DataFrame:
    """int-poll-skip (analysis/rules/registry.py): one row per adjacent pair of a txn's reads."""
    return _skips(d, _read_pairs(d))


@finds("precommitted-read")
def precommitted_read(d: Derived) -> DataFrame:
    """precommitted-read (analysis/rules/registry.py): one row per (txn, value) the txn both sent and read."""
    kv = lambda a: F.transform(a, lambda x: F.struct(x["key"].alias("key"), x["value"].alias("value")))  # noqa: E731
    both = F.array_intersect(kv(F.col("value.records")), kv(F.col("value.sends")))
    return (_txns(d).filter(F.size("value.records") > 0)
            .select("index", "process", F.explode(both).alias("r"))
            .select(F.col("r.key").alias("key"), F.col("r.value").alias("value"), "process",
                    F.array("index").alias("op_indexes")))
