"""The order of each process's reads: nonmonotonic-poll and poll-skip, over the pairs of
successive reads of one key by one process (read_pairs, computed and persisted once by the checker,
since both finders read it). Definitions are in analysis/rules/registry.py and docs/checker.md
("What consumers saw, even in a transaction that failed").

Which reads are paired follows Jepsen's poll-skip+nonmonotonic-cases-per-process
(jepsen/tests/kafka.clj): an `ok` poll or txn's records are compared and move the sequence on; the
first record of each key of a `fail` or `info` txn is compared with the last `ok` read and moves
nothing (a consumer that does not rewind after an abort shows as a skip, KAFKA-17582); an assign or
subscribe keeps every key it still covers. Unlike Jepsen, which permits every poll-skip and
nonmonotonic-poll of a subscribing run, each pair says whether a group rebalance lies between its
reads (`across_rebalance`), so only those are permitted (analysis/rules/permissions.py).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis.checking.anomalies import Derived
from analysis.checking.claims import finds
from harness.history.format import RESET_FS


def read_pairs(d: Derived) -> DataFrame:
    """Adjacent reads of one key by one process with no assign/subscribe of that process between
    them that resets the key (including reads inside one poll, in the order returned), only where
    they are not consecutive in offset (so the result is small), each with `across_rebalance`: a
    group rebalance of the process lies between them (_resets). A fail/info txn's first record of
    a key (d.probes) is paired with the process's last ok read before it and moves nothing on: a
    later read is paired with that ok read too. The ops are carried as history indexes (the
    examples step looks them up): narrow rows to sort."""
    # Successive reads per (key, process) first, then drop the few candidate pairs with a reset of
    # the process between them. Numbering "assignment epochs" before the explode instead would
    # shuffle every poll's records by process and sort them: a third of the whole check's work.
    cols = ["key", "process", "offset", "value", "index", "pos"]
    if d.probes is None:
        w = Window.partitionBy("key", "process").orderBy("index", "pos")
        prev = lambda c: F.lag(c).over(w)  # noqa: E731
        paired = d.reads.select(*cols, prev("offset").alias("prev_offset"), prev("value").alias("prev_value"),
                                prev("index").alias("prev_index"))
    else:
        # The last ok read before each row, skipping the probes: a running frame, not a lag (a lag
        # would pair a read with a probe before it). Only histories with fail/info txns pay it.
        rows = d.reads.select(*cols, F.lit(False).alias("probe")).unionByName(
            d.probes.select(*cols, F.lit(True).alias("probe")))
        w = (Window.partitionBy("key", "process").orderBy("index", "pos")
             .rowsBetween(Window.unboundedPreceding, -1))
        last_ok = F.last(F.when(~F.col("probe"), F.struct("offset", "value", "index")), ignorenulls=True).over(w)
        paired = rows.select(*cols, last_ok.alias("p")).select(
            *cols, F.col("p.offset").alias("prev_offset"), F.col("p.value").alias("prev_value"),
            F.col("p.index").alias("prev_index"))
    candidates = paired.filter(F.col("prev_offset").isNotNull() & (F.col("offset") != F.col("prev_offset") + 1))
    resets = _resets(d)
    # A reset ends the key's sequence when it no longer covers the key or seeks the beginning; one
    # that still covers it (seek null or committed) keeps it, as Jepsen keeps it (select-keys).
    ends_key = (F.coalesce(F.col("reset_seek") == "beginning", F.lit(False))
                | ~F.coalesce(F.array_contains("reset_keys", F.col("key")), F.lit(False)))
    between = ((F.col("reset_process") == F.col("process"))
               & (F.col("reset_index") > F.col("prev_index")) & (F.col("reset_index") < F.col("index")))
    kept = candidates.join(resets, between & ends_key, "left_anti")
    # Every reset left between the two reads keeps the key; a rebalance among them marks the pair.
    # One outer join, then the few pairs grouped again (a row is one read: index, key, pos), so the
    # window over every read runs once. Written as a semi join unioned with an anti join, the
    # two branches' plans differed by an inferred filter, Spark did not reuse the exchange, and
    # every read was shuffled and windowed twice: 4.5 of the count job's 20.4 s of task time on
    # the bench's 10M history (2026-11-29, docs/benchmarks.md).
    rebalances = resets.filter("rebalance").select("reset_process", "reset_index")
    return (kept.join(F.broadcast(rebalances), between, "left")
            .groupBy(*kept.columns).agg(F.max(F.col("reset_index").isNotNull()).alias("across_rebalance"))
            .drop("pos"))


def _resets(d: Derived) -> DataFrame:
    """The ok/info assigns and subscribes (few), each with `rebalance`: a subscribe, or an assign
    of a process that subscribed before it (librdkafka's group rebalance, recorded as an assign
    seeking the committed offsets: docs/history.md). Only these restart a consumer at the group's
    committed offset on their own; an assign-mode client's rewind (the eos worker after an abort)
    is no rebalance, so what follows it is held to the sequence."""
    resets = d.events.filter(F.col("type").isin("ok", "info") & F.col("f").isin(*RESET_FS)).select(
        F.col("process").alias("reset_process"), F.col("index").alias("reset_index"), F.col("f").alias("reset_f"),
        F.col("value.keys").alias("reset_keys"), F.col("value.seek").alias("reset_seek"))
    so_far = Window.partitionBy("reset_process").orderBy("reset_index").rowsBetween(Window.unboundedPreceding, 0)
    return resets.withColumn("rebalance", F.max(F.col("reset_f") == "subscribe").over(so_far)).drop("reset_f")


def _pair_columns() -> list[F.Column]:
    return ["key", "process", F.array("prev_offset", "offset").alias("offsets"),
            F.array("prev_value", "value").alias("values"), F.array("prev_index", "index").alias("op_indexes"),
            "across_rebalance"]


@finds("nonmonotonic-poll", pairs=True)
def nonmonotonic_poll(d: Derived, pairs: DataFrame | None = None) -> DataFrame:
    """nonmonotonic-poll (analysis/rules/registry.py): one row per adjacent pair of reads. `pairs` is
    read_pairs(d), when the caller has it already (poll-skip reads it too)."""
    pairs = read_pairs(d) if pairs is None else pairs
    return pairs.filter(F.col("offset") <= F.col("prev_offset")).select(*_pair_columns())


@finds("poll-skip", pairs=True)
def poll_skip(d: Derived, pairs: DataFrame | None = None) -> DataFrame:
    """poll-skip (analysis/rules/registry.py): one row per adjacent pair of reads, with the first
    observed offset it jumped over. The next offset comes from `offsets`, the observed ones only:
    gaps nobody observed (transaction markers, compaction) are not skips."""
    pairs = read_pairs(d) if pairs is None else pairs
    nxt = d.offsets.select("key", F.col("offset").alias("prev_offset"), F.col("next_offset").alias("skipped_offset"))
    return (
        pairs.filter(F.col("offset") > F.col("prev_offset") + 1)
        .join(nxt, ["key", "prev_offset"], "inner")
        .filter(F.col("skipped_offset") < F.col("offset"))
        .select(*_pair_columns(), "skipped_offset")
    )
