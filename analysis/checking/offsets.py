"""The observed offsets of derive() (analysis/checking/anomalies.py): one row per observed
(key, offset) with the values seen there, whether a read saw it, when it was first known, and the
next observed offset on its key (a read that jumps past it skipped a known record).

The narrow rows are shuffled once, by key and a bucket of 2**BUCKET_BITS consecutive offsets, and
aggregated whole there; the next offset is a window within the bucket, which needs no second
shuffle, and only each bucket's last offset takes the first offset of the key's next non-empty
bucket, from a table of one row per bucket joined by broadcast. Before (to 2026-11-29) the rows
were shuffled by (key, offset) and then all of them again by key for the window: that window was
9.3 s of task time of a 54 s check of the bench's 10M history (docs/benchmarks.md, 2026-11-28).
Not by key alone: a whole key per task does not spread over cores and bounds its memory by the
key's size; a bucket does neither. A partial aggregate before the exchange merged little (a
position's reads and write sit far apart in the file) and cost a third of this table's time.
"""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

BUCKET_BITS = 12  # 4,096 offsets: ~1,200 buckets at 10M events on 8 keys, a few on a test's


def observed(rows: DataFrame, storage: StorageLevel) -> tuple[DataFrame, DataFrame]:
    """rows: key, offset, value, time, read (one per observation). Returns (offsets, base):
    offsets has key, offset, read, first_time, next_offset, value (where one value was seen),
    values (where two met: their min and max); base is the table under it, computed by the first
    job here (its unpersist() is harmless: a checkpoint's blocks go when the frame does).

    Checkpointed, not persisted: a checkpoint is a leaf in every later plan, so the planner no
    longer analyses and matches this table's whole lineage in each of the check's queries. On the
    local checker (Spark Connect, which re-analyses a plan on every request) four warm checks of a
    30 s run's 97,213 events took 6.6, 5.0, 4.5, 4.1 s against 6.9, 5.7, 5.1, 5.8 s persisted
    (2026-11-29, one after the other, a fresh process each). Not eager: the job below computes it,
    as it computed the persisted table, in one pass."""
    bucket = F.shiftright(F.col("offset"), BUCKET_BITS).cast("long").alias("bucket")
    within = Window.partitionBy("key", "bucket").orderBy("offset")
    base = (
        rows.select("*", bucket)
        .repartition("key", "bucket")
        .groupBy("key", "bucket", "offset")
        .agg(F.min("value").alias("min_value"), F.max("value").alias("max_value"), F.max("read").alias("read"),
             F.min("time").alias("first_time"))
        .select("key", "bucket", "offset", "read", "first_time",
                F.lead("offset").over(within).alias("next_in_bucket"),
                F.when(F.col("min_value") == F.col("max_value"), F.col("min_value")).alias("value"),
                # Only where two values met (null elsewhere: a narrow persisted table).
                F.when(F.col("min_value") != F.col("max_value"), F.array("min_value", "max_value")).alias("values"))
        .localCheckpoint(eager=False, storageLevel=storage)
    )
    try:
        firsts = base.groupBy("key", "bucket").agg(F.min("offset").alias("first")).collect()
    except BaseException:
        base.unpersist()
        raise
    by_key: dict = {}
    for r in firsts:
        if r["bucket"] is not None:  # no offset: no next one either (the loader refuses such records)
            by_key.setdefault(r["key"], []).append((r["bucket"], r["first"]))
    follow = []  # (key, bucket, the first offset of the key's next non-empty bucket)
    for k, bs in by_key.items():
        bs.sort()
        follow += [(k, b, first) for (b, _), (_, first) in zip(bs, bs[1:])]
    schema = StructType([StructField("key", base.schema["key"].dataType), StructField("bucket", LongType()),
                         StructField("next_bucket_first", base.schema["offset"].dataType)])
    nexts = base.sparkSession.createDataFrame(follow, schema)
    offsets = base.join(F.broadcast(nexts), ["key", "bucket"], "left").select(
        "key", "offset", "read", "first_time", F.coalesce("next_in_bucket", "next_bucket_first").alias("next_offset"),
        "value", "values")
    return offsets, base
