"""The anomalies, one function each, in Spark SQL functions only (no Python UDFs).

Each anomaly's definition, what one count is and the order of its examples are in
analysis/rules/registry.py; the function here that finds it claims it with @finds. Every such function takes
the derived tables of `derive()` and returns a DataFrame with one row per counted finding, so
`count()` is the anomaly's count and `limit(20)` its examples. Windows are partitioned by key
(and process); nothing here collects a history to the driver.

Vocabulary. A *read* is one record of an `ok` poll or an `ok` txn. An *ok write* is an `ok` send
completion, or a send inside an `ok` (committed) txn, or a send of an `info` op a read proved
(_proven_info_writes; docs/checker.md). The *observed positions* of key K are every
(offset, value) of reads on K, of records on K that a `fail` or `info` txn returned (a poller's
records are in the log whatever its transaction's fate: _dead_reads), and of ok writes on K with a
known offset (null or negative offsets, as with acks=0, say nothing about position). K's *observed
order* is its observed offsets sorted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis.checking.claims import finds
from analysis.checking.offsets import observed as observed_offsets
from harness.history.format import READ_FS


def _offset(col: F.Column) -> F.Column:
    return F.when(col >= 0, col)


@dataclass
class Derived:
    events: DataFrame
    reads: DataFrame  # process, pid, index, time, f, type, pos, key, offset, value
    positions: DataFrame  # key, offset, value, process, index, time, f, type
    offsets: DataFrame  # key, offset, read, first_time, next_offset, value, values (over cache["offsets"], persisted)
    values: DataFrame  # one row per value: what the value-level anomalies need (see _value_table)
    # The first record of each key in each `fail`/`info` txn (process, pid, index, time, f, type,
    # pos, key, offset, value): compared with the process's read sequence, never moving it on.
    # None when the history has no such txn (read_pairs then keeps its cheaper plan).
    probes: DataFrame | None = None
    cache: dict = field(default_factory=dict)  # tables other finder modules persist once (analysis/checking/cycles.py)
    flags: dict = field(default_factory=dict)  # facts other finder modules ask once (analysis/checking/eos_anomalies.py)
    # f -> {invoke, ok, fail, info} counts, when the loader gave them: the finders of
    # analysis/checking/txn_anomalies.py and analysis/checking/cycles.py skip a history without txns (None: run).
    op_stats: dict | None = None

    def has_txns(self) -> bool:
        if self.op_stats is None:
            return True
        t = self.op_stats.get("txn") or {}
        return any(t.get(k, 0) for k in ("ok", "info", "fail"))

    def unpersist(self) -> None:
        self.values.unpersist()
        for table in self.cache.values():
            table.unpersist()


# Where the derived tables are kept while the anomalies read them: on local disk (the page cache
# keeps them fast), off the heap. MEMORY_AND_DISK ran a 50M-event check out of a 2 GB heap: a
# block read back from disk is copied whole into a heap buffer to be cached again.
DERIVED_STORAGE = StorageLevel.DISK_ONLY

# What a value-fact row says about its value (see _by_value).
READ, OK_SEND, OK_TXN_SEND, FAILED_WRITE, SEND_INVOKE, SEEN = 0, 1, 2, 3, 4, 5


def _by_value(read_positions: DataFrame, events: DataFrame, proven: DataFrame | None = None,
              seen: DataFrame | None = None) -> DataFrame:
    """One row per value with everything the value-level anomalies need, from a single shuffle.

    Every position a value was read at (read_positions: value, key, offset), ok write, failed
    write and send invoke becomes a narrow fact row (value, kind, key, offset, index, pid);
    grouping those by value with plain aggregates (min/max, max_by) keeps Spark on its hash
    aggregate. This one exchange replaces a group-by for duplicates, an anti-join for
    unread writes, a join for aborted reads and a join of ok sends with their invokes. The ops
    behind an example are looked up by index afterwards."""
    read_facts = read_positions.select(
        "value", F.lit(READ).alias("kind"), "key", "offset",
        F.lit(None).cast("long").alias("index"), F.lit(None).cast("long").alias("pid"), F.lit(0).alias("pos"))
    def kind_of(ok: int) -> F.Column:  # what a send's or a txn's event says of its values
        return (F.when(F.col("type") == "invoke", F.lit(SEND_INVOKE))
                .when(F.col("type") == "ok", F.lit(ok))
                .when(F.col("type") == "fail", F.lit(FAILED_WRITE)))
    send_facts = events.filter(F.col("f") == "send").select(
        F.col("value.value").alias("value"), kind_of(OK_SEND).alias("kind"), F.col("value.key").alias("key"),
        _offset(F.col("value.offset")).alias("offset"), "index", "pid", F.lit(0).alias("pos")
    ).filter(F.col("kind").isNotNull())
    # A txn's invoke lists its sends: it orders them as a send's own invoke does (send_order).
    txn_facts = events.filter((F.col("f") == "txn") & F.col("type").isin("invoke", "ok", "fail")).select(
        kind_of(OK_TXN_SEND).alias("kind"), "index", "pid", F.posexplode(F.col("value.sends")).alias("pos", "s")).select(
        F.col("s.value").alias("value"), "kind", F.col("s.key").alias("key"),
        _offset(F.col("s.offset")).alias("offset"), "index", "pid", "pos")
    if seen is not None:  # a fail/info txn's records: positions, not reads (unread stays unread)
        txn_facts = txn_facts.unionByName(seen.select(
            "value", F.lit(SEEN).alias("kind"), "key", "offset", F.lit(None).cast("long").alias("index"),
            F.lit(None).cast("long").alias("pid"), F.lit(0).alias("pos")))
    if proven is not None:  # proven info writes count as ok ones (see _proven_info_writes)
        txn_facts = txn_facts.unionByName(proven.select(
            "value", F.when(F.col("f") == "send", F.lit(OK_SEND)).otherwise(F.lit(OK_TXN_SEND)).alias("kind"),
            "key", "offset", "index", "pid", "pos"))
    kind = F.col("kind")
    is_ok_write = kind.isin(OK_SEND, OK_TXN_SEND)
    at_position = kind.isin(READ, SEEN) | (is_ok_write & F.col("offset").isNotNull())
    ok_at = F.when(is_ok_write, F.col("index"))  # the last ok write of a value is the one that counts
    invoke_at = F.when(kind == SEND_INVOKE, F.col("index"))
    return (
        read_facts.unionByName(send_facts).unionByName(txn_facts)
        # Shuffle the narrow fact rows themselves, then aggregate whole groups: a partial
        # aggregate before the exchange saves little (most values have 3 or 4 facts, spread over
        # the file) and would shuffle its ~25 buffer columns instead of these 6.
        .repartition("value")
        .groupBy("value")
        .agg(
            F.max(kind == READ).alias("read"),
            F.min(F.when(at_position, F.col("key"))).alias("min_key"),
            F.max(F.when(at_position, F.col("key"))).alias("max_key"),
            F.min(F.when(at_position, F.col("offset"))).alias("min_offset"),
            F.max(F.when(at_position, F.col("offset"))).alias("max_offset"),
            F.max(ok_at).alias("ok_index"),
            F.max_by("key", ok_at).alias("ok_key"),
            F.max_by("offset", ok_at).alias("ok_offset"),
            F.max_by("pid", ok_at).alias("ok_pid"),
            F.max_by("pos", ok_at).alias("ok_pos"),
            F.max(invoke_at).alias("invoke_index"),
            F.max_by("pid", invoke_at).alias("invoke_pid"),
            F.min(F.when(kind == FAILED_WRITE, F.col("index"))).alias("failed_index"),
        )
        .select(*_by_value_columns())
    )


def _by_value_columns() -> list[F.Column]:
    """What the value-level anomalies read of a by_value row: the last ok write (key, offset,
    index, pid, its place in its op), the order of the op that sent it (null unless its offset
    and process are known), and flags and example columns of the rarer findings, null when absent (so the
    rows shuffled for the send window are narrow)."""
    c = F.col
    duplicated = (c("min_key") != c("max_key")) | (c("min_offset") != c("max_offset"))
    aborted = c("read") & c("failed_index").isNotNull()
    # The invoke of the same process (the send's own, or its txn's) orders the send; without
    # one, its completion does. All sends of one txn share their txn's order (ok_pos then).
    order = F.when(c("invoke_pid") == c("ok_pid"), c("invoke_index")).otherwise(c("ok_index"))
    return [
        "value", "ok_key", "ok_offset", "ok_index", "ok_pid", "ok_pos",
        F.when(c("ok_offset").isNotNull() & c("ok_pid").isNotNull(), order).alias("send_order"),
        F.when(c("ok_index").isNotNull() & ~c("read"), F.lit(True)).alias("unread"),
        F.when(duplicated, c("min_key")).alias("duplicate_key"),
        F.when(duplicated, c("min_offset")).alias("duplicate_offset"),
        F.when(aborted, c("failed_index")).alias("aborted_failed_index"),
    ]


def _value_table(by_value: DataFrame, max_read: DataFrame) -> DataFrame:
    """by_value, with the highest offset read on the value's key (max_read_offset) and, for an ok
    send (plain or in a txn), the previous ok send of the same process to the same key in invoke
    order, then in the order its txn lists them (prev_send_*).

    Every value-level anomaly is a predicate on one row of this table (VALUE_LEVEL), so one pass
    counts them all (value_findings) and nothing needs persisting: a persisted by_value cost more
    to write than its five readers saved. Rows that are not sends are ordered first in their
    window partition and never count as a previous send."""
    c = F.col
    # Values no op wrote ok have no key or process: spread them by value, not into one partition.
    w = (Window.partitionBy(F.coalesce(c("ok_key"), c("value")), c("ok_pid"))
         .orderBy(c("send_order").asc_nulls_first(), c("ok_pos")))
    prev = lambda col: F.lag(col).over(w)  # noqa: E731
    return by_value.join(F.broadcast(max_read.withColumnRenamed("key", "ok_key")), "ok_key", "left").select(
        "*", prev("send_order").alias("prev_send_order"), prev("ok_offset").alias("prev_send_offset"),
        prev("value").alias("prev_send_value"), prev("ok_index").alias("prev_send_index"))


def _behind_a_read() -> F.Column:
    """The value's ok write sits below the highest offset read on its key."""
    return F.coalesce(F.col("ok_offset") < F.col("max_read_offset"), F.lit(False))


# Each value-level anomaly as a predicate on a row of Derived.values (one row per value, so a
# value-level count is the number of rows it holds for). Their definitions are in
# analysis/rules/registry.py.
VALUE_LEVEL = {
    "duplicate": lambda: F.col("duplicate_key").isNotNull(),
    "lost-write": lambda: F.coalesce(F.col("unread"), F.lit(False)) & _behind_a_read(),
    "unseen": lambda: F.coalesce(F.col("unread"), F.lit(False)) & ~_behind_a_read(),
    # Two sends of one txn are int-nonmonotonic-send's to judge, not this one's.
    "nonmonotonic-send": lambda: (F.col("send_order").isNotNull() & F.col("prev_send_order").isNotNull()
                                  & (F.col("send_order") != F.col("prev_send_order"))
                                  & (F.col("ok_offset") <= F.col("prev_send_offset"))),
    "aborted-read": lambda: F.col("aborted_failed_index").isNotNull(),
}


def value_findings(d: Derived) -> DataFrame:
    """One row (anomaly) per value-level finding, every value-level anomaly in one pass."""
    tags = F.array(*[F.when(holds(), F.lit(name)) for name, holds in VALUE_LEVEL.items()])
    return d.values.select(F.explode(F.array_compact(tags)).alias("anomaly"))


def _has_info_writes(op_stats: dict | None) -> bool:
    if op_stats is None:
        return True
    return any((op_stats.get(f) or {}).get("info", 0) for f in ("send", "txn"))


def _proven_info_writes(events: DataFrame, reads: DataFrame, base: list[str], read_committed: bool) -> DataFrame:
    """The sends of `info` send and txn ops that a read proved happened (docs/checker.md, "info
    writes a read proved"): an ok read returned their (key, value); at read_committed, every send
    of an info txn one of whose sends an ok read returned (its reader saw only committed records,
    so the transaction committed). Info writes are few next to the reads (those of faults), so
    they are broadcast against the reads, one scan of them."""
    one = events.filter((F.col("f") == "send") & (F.col("type") == "info")).select(
        *base, F.col("value.key").alias("key"), _offset(F.col("value.offset")).alias("offset"),
        F.col("value.value").alias("value"), F.lit(0).alias("pos"))
    many = events.filter((F.col("f") == "txn") & (F.col("type") == "info")).select(
        *base, F.posexplode(F.col("value.sends")).alias("pos", "s")).select(
        *base, F.col("s.key").alias("key"), _offset(F.col("s.offset")).alias("offset"), F.col("s.value").alias("value"),
        "pos")
    info = one.unionByName(many)
    read = reads.select("key", "value").join(F.broadcast(info.select("key", "value")), ["key", "value"], "left_semi")
    hit = info.join(read.distinct(), ["key", "value"], "left_semi")
    if not read_committed:  # a read proves only the record it returned
        return hit
    return info.join(F.broadcast(hit.select("index").distinct()), "index", "left_semi")


def _has_dead_reads(op_stats: dict | None) -> bool:
    if op_stats is None:
        return True
    t = op_stats.get("txn") or {}
    return bool(t.get("fail", 0) or t.get("info", 0))


def _dead_reads(events: DataFrame) -> DataFrame:
    """The records that `fail` and `info` txns returned, as reads' columns (a poll that fails
    returned nothing, docs/history.md: only a txn's failed completion carries records). Jepsen's
    version orders take them (\"pollers ... are *always* supposed to emit safe data regardless of
    whether the transaction commits\"), so they are observed positions; they are no reads: a value
    only they returned stays unread, and they move no read sequence on (read_pairs). A fail/info
    completion's records are not validated, so a record without key, offset or value is left out."""
    base = ["process", "pid", "index", "time", "f", "type"]
    return (events.filter((F.col("f") == "txn") & F.col("type").isin("fail", "info"))
            .select(*base, F.posexplode(F.col("value.records")).alias("pos", "r"))
            .select(*base, "pos", F.col("r.key").alias("key"), F.col("r.offset").alias("offset"),
                    F.col("r.value").alias("value"))
            .filter(F.col("key").isNotNull() & F.col("offset").isNotNull() & F.col("value").isNotNull()))


def _probes(dead: DataFrame) -> DataFrame:
    """The first record of each key in each fail/info txn: the one Jepsen compares with the
    process's last ok read of the key (the rest are the int- anomalies' to judge)."""
    first = Window.partitionBy("index", "key").orderBy("pos")
    return dead.withColumn("_n", F.row_number().over(first)).filter(F.col("_n") == 1).drop("_n")


def derive(events: DataFrame, op_stats: dict | None = None, read_committed: bool = True) -> Derived:
    """The tables every anomaly is defined over. `offsets` is persisted and computed here: several
    anomalies read it, and so do `values` (the values read at each position, the highest offset
    read per key). `values` is not (see _value_table); persist it before reading it twice.
    op_stats (the loader's, when known) lets a history without info writes skip their proof;
    read_committed is the readers' isolation level (what a read of an info txn's send proves)."""
    ok_reads = events.filter((F.col("type") == "ok") & F.col("f").isin(*READ_FS))
    reads = ok_reads.select(
        "process", "pid", "index", "time", "f", "type",
        F.posexplode(F.col("value.records")).alias("pos", "r"),
    ).select("process", "pid", "index", "time", "f", "type", "pos",
             F.col("r.key").alias("key"), F.col("r.offset").alias("offset"), F.col("r.value").alias("value"))

    base = ["process", "pid", "index", "time", "f", "type"]
    sends = events.filter((F.col("f") == "send") & (F.col("type") == "ok")).select(
        *base, F.col("value.key").alias("key"), _offset(F.col("value.offset")).alias("offset"),
        F.col("value.value").alias("value"))
    txn_sends = events.filter((F.col("f") == "txn") & (F.col("type") == "ok")).select(
        *base, F.explode(F.col("value.sends")).alias("s")).select(
        *base, F.col("s.key").alias("key"), _offset(F.col("s.offset")).alias("offset"), F.col("s.value").alias("value"))
    ok_writes = sends.unionByName(txn_sends)
    proven = _proven_info_writes(events, reads, base, read_committed) if _has_info_writes(op_stats) else None
    if proven is not None:
        # Read twice (offsets, values). Checkpointed, not persisted, to cut its lineage (the
        # events, the reads, three joins) out of every finder's plan: persisted, planning the
        # count job of a 4-history test took over 6 min against 87 s without it, and the test's
        # 1 GB driver ran out of heap (machine load 40-50). Not yet measured checkpointed.
        proven = proven.localCheckpoint(eager=True)
        ok_writes = ok_writes.unionByName(proven.drop("pos"))

    cols = ["key", "offset", "value", "process", "index", "time", "f", "type"]
    known = ok_writes.filter(F.col("offset").isNotNull())
    positions = reads.select(*cols).unionByName(known.select(*cols))  # for examples
    dead = _dead_reads(events) if _has_dead_reads(op_stats) else None
    if dead is not None:  # what fail/info txns returned: positions (known to exist), never reads
        positions = positions.unionByName(dead.select(*cols))
        known = known.unionByName(dead.select(*known.columns))
    # One row per observed (key, offset) (analysis/checking/offsets.py); first_time: when the
    # earliest op that observed the position completed (analysis/checking/lag.py).
    base = None
    try:  # computed now (observed_offsets runs a job): nothing persisted is left behind if it fails
        offsets, base = observed_offsets(
            reads.select("key", "offset", "value", "time", F.lit(True).alias("read"))
            .unionByName(known.select("key", "offset", "value", "time", F.lit(False).alias("read"))), DERIVED_STORAGE)
        # The values read, one row per position rather than per read (half the rows when two
        # consumers read everything): from offsets where one value was seen, from the reads
        # themselves where values disagree (min/max cannot say which of three values were read).
        read_positions = offsets.filter(F.col("read") & F.col("value").isNotNull()).select("value", "key", "offset")
        disputed = offsets.filter(F.col("values").isNotNull()).select("key", "offset")
        any_disputed = disputed.limit(1).count() > 0
    except BaseException:
        if base is not None:
            base.unpersist()
        if proven is not None:
            proven.unpersist()
        raise
    if any_disputed:  # the reads are joined back in only then
        read_positions = read_positions.unionByName(
            reads.join(disputed, ["key", "offset"], "left_semi").select("value", "key", "offset"))
    # The highest offset read on each key, from the persisted offsets (no second pass over reads).
    max_read = offsets.filter("read").groupBy("key").agg(F.max("offset").alias("max_read_offset"))
    seen = dead.select("value", "key", "offset") if dead is not None else None
    return Derived(events, reads, positions, offsets, _value_table(_by_value(read_positions, events, proven, seen), max_read),
                   probes=_probes(dead) if dead is not None else None,
                   cache={"offsets": base, **({} if proven is None else {"proven": proven})}, op_stats=op_stats)


@finds("inconsistent-offsets")
def inconsistent_offsets(d: Derived) -> DataFrame:
    """inconsistent-offsets (analysis/rules/registry.py): one row per (key, offset) that two values met at."""
    return d.offsets.filter(F.col("values").isNotNull()).select("key", "offset", "values")


@finds("duplicate")
def duplicate(d: Derived) -> DataFrame:
    """duplicate (analysis/rules/registry.py): one row per value."""
    return d.values.filter(VALUE_LEVEL["duplicate"]()).select(
        "value", F.col("duplicate_key").alias("key"), F.col("duplicate_offset").alias("offset"))


def _unread_write(d: Derived, name: str) -> DataFrame:
    return d.values.filter(VALUE_LEVEL[name]()).select(
        F.col("ok_key").alias("key"), F.col("ok_offset").alias("offset"), "value", "max_read_offset",
        F.array("ok_index").alias("op_indexes"))


@finds("lost-write")
def lost_write(d: Derived) -> DataFrame:
    """lost-write (analysis/rules/registry.py): one row per value."""
    return _unread_write(d, "lost-write")


@finds("unseen")
def unseen(d: Derived) -> DataFrame:
    """unseen (analysis/rules/registry.py): one row per value."""
    return _unread_write(d, "unseen")


@finds("nonmonotonic-send")
def nonmonotonic_send(d: Derived) -> DataFrame:
    """nonmonotonic-send (analysis/rules/registry.py): one row per adjacent pair of sends of two ops, in
    the order the process invoked them (the sends of one txn in the order it lists them)."""
    return d.values.filter(VALUE_LEVEL["nonmonotonic-send"]()).select(
        F.col("ok_key").alias("key"), F.col("ok_pid").alias("process"),
        F.array("prev_send_offset", "ok_offset").alias("offsets"), F.array("prev_send_value", "value").alias("values"),
        F.array("prev_send_index", "ok_index").alias("op_indexes"))


@finds("aborted-read")
def aborted_read(d: Derived) -> DataFrame:
    """aborted-read (analysis/rules/registry.py): one row per value, with the first read of it."""
    aborted = d.values.filter(VALUE_LEVEL["aborted-read"]()).select("value", "aborted_failed_index")
    # The first read of each (only here, for the examples: the count needs no join).
    first = (d.reads.join(aborted.select("value"), "value", "left_semi").groupBy("value")
             .agg(F.min(F.struct("index", "key", "offset")).alias("r")))
    return aborted.join(first, "value").select(
        "value", F.col("r.key").alias("key"), F.col("r.offset").alias("offset"),
        F.array("r.index", "aborted_failed_index").alias("op_indexes"))
