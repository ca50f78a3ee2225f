"""The exactly-once pipeline's anomalies (the `eos` workload), one function each, Spark SQL
functions only. Definitions are in analysis/rules/registry.py; docs/checker.md says more.

An eos history keeps the input topic at keys below 1000 and the output topic at keys 1000 + p,
and an output value V' names the input value it was made from, V' mod 1e9
(harness/history/eos.py). A *pipeline txn* is a txn that sent to an output key; only those are
read here, so a history of another workload (whose txns send to small keys) has no pipeline txn
and every finder is empty. Reads of the output are every `ok` read on an output key.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis.checking.anomalies import Derived
from analysis.checking.cycles import SCC_SCHEMA, _partition_components, edges as cycle_edges, segments
from analysis.checking.anomalies import DERIVED_STORAGE
from analysis.checking.txn_anomalies import observed_values
from harness.history.eos import OUTPUT_KEY_BASE, VALUE_STRIDE
from analysis.checking.claims import finds

# The finders' rows, for a history without a pipeline (the tests hold them to the finders' own).
LOST_SCHEMA = "key long, offset long, value long, committed_past long, op_indexes array<long>"
DUPLICATE_SCHEMA = ("value long, key long, offset long, positions array<struct<key: long, offset: long>>, "
                    "values array<long>, op_indexes array<long>")


def _pipeline_txns(d: Derived, types: tuple[str, ...]) -> DataFrame:
    """The pipeline txns' completions of these types. array_max over the sends' keys, not a
    lambda (`exists` is interpreted row by row); a history without txns filters to nothing."""
    return d.events.filter((F.col("f") == "txn") & F.col("type").isin(*types) & F.lit(d.has_txns())
                           & (F.array_max(F.col("value.sends.key")) >= OUTPUT_KEY_BASE))


def _has_pipeline(d: Derived) -> bool:
    """Whether the history has a pipeline txn at all, asked once per Derived (one small job).
    Every other history skips the eos finders: eos-G1c alone cost 3.7 s of planning and jobs on a
    30-event history of another workload, and the three added to every count job's plan."""
    if "has_pipeline" not in d.flags:
        d.flags["has_pipeline"] = d.has_txns() and _pipeline_txns(d, ("ok", "info")).limit(1).count() > 0
    return d.flags["has_pipeline"]


def _input_reads(d: Derived, types: tuple[str, ...]) -> DataFrame:
    """index, type, key, offset, value of every input record a pipeline txn of these types read."""
    return _pipeline_txns(d, types).select("index", "type", F.explode("value.records").alias("r")).select(
        "index", "type", F.col("r.key").alias("key"), F.col("r.offset").alias("offset"),
        F.col("r.value").alias("value")).filter(F.col("key") < OUTPUT_KEY_BASE)


def _output_reads(d: Derived) -> DataFrame:
    """Every ok read on an output key, with the input value its value was made from."""
    return d.reads.filter((F.col("key") >= OUTPUT_KEY_BASE) & F.lit(d.has_txns())).select(
        "index", "key", "offset", "value", (F.col("value") % VALUE_STRIDE).alias("source"))


@finds("eos-lost")
def eos_lost(d: Derived) -> DataFrame:
    """eos-lost (analysis/rules/registry.py): one row per input value."""
    if not _has_pipeline(d):
        return d.events.sparkSession.createDataFrame([], LOST_SCHEMA)
    # How far the pipeline committed on each input key: the highest offset an ok pipeline txn read.
    frontier = _input_reads(d, ("ok",)).groupBy("key").agg(
        F.max("offset").alias("committed_past"), F.max_by("index", "offset").alias("by"))
    placed = observed_values(d, reads_only=False).filter(F.col("key") < OUTPUT_KEY_BASE).groupBy("value").agg(
        F.min(F.struct("key", "offset")).alias("at")).select("value", "at.key", "at.offset")
    consumed = placed.join(F.broadcast(frontier), "key").filter(F.col("offset") <= F.col("committed_past"))
    made = _output_reads(d).select(F.col("source").alias("value")).distinct()
    return consumed.join(made, "value", "left_anti").select(
        "key", "offset", "value", "committed_past", F.array("by").alias("op_indexes"))


@finds("eos-duplicate")
def eos_duplicate(d: Derived) -> DataFrame:
    """eos-duplicate (analysis/rules/registry.py): one row per input value."""
    if not _has_pipeline(d):
        return d.events.sparkSession.createDataFrame([], DUPLICATE_SCHEMA)
    out = _output_reads(d)
    return out.groupBy("source").agg(
        F.count_distinct("key", "offset").alias("n"),
        F.array_sort(F.collect_set(F.struct("key", "offset"))).alias("positions"),
        F.array_sort(F.collect_set("value")).alias("values"),
        F.slice(F.array_sort(F.collect_set("index")), 1, 10).alias("op_indexes")).filter(F.col("n") >= 2).select(
        F.col("source").alias("value"), F.col("positions")[0]["key"].alias("key"),
        F.col("positions")[0]["offset"].alias("offset"), "positions", "values", "op_indexes")


def position_edges(d: Derived) -> DataFrame:
    """src, dst, type, key, value, next_value: T -> T' when T' (ok or info) began reading an input
    key at the observed offset right after the last one the ok pipeline txn T read there: T' read
    the input offset T committed. Typed "wr" (it orders T's commit before T''s reads)."""
    runs = _input_reads(d, ("ok", "info")).groupBy("index", "type", "key").agg(
        F.min("offset").alias("first"), F.max("offset").alias("last"), F.min_by("value", "offset").alias("first_value"))
    ends = runs.filter(F.col("type") == "ok").join(
        d.offsets.select("key", F.col("offset").alias("last"), "next_offset"), ["key", "last"]).select(
        F.col("index").alias("src"), "key", F.col("next_offset").alias("first"))
    starts = runs.select(F.col("index").alias("dst"), "key", "first", F.col("first_value").alias("value"))
    return ends.join(starts, ["key", "first"]).filter(F.col("src") != F.col("dst")).select(
        "src", "dst", F.lit("wr").alias("type"), "key", "value", F.lit(None).cast("long").alias("next_value"))


@finds("eos-G1c")
def eos_g1c(d: Derived) -> DataFrame:
    """eos-G1c (analysis/rules/registry.py): one row per strongly connected component of the position
    edges and the wr edges between pipeline txns; found as analysis/checking/cycles.py finds G1c."""
    cached = d.cache.get("eos_cycles")
    if cached is None and not _has_pipeline(d):
        cached = d.events.sparkSession.createDataFrame([], SCC_SCHEMA)
    elif cached is None:
        pipeline = _pipeline_txns(d, ("ok", "info")).select("index")
        wr = (d.cache.get("cycle_edges") or cycle_edges(d)).filter(F.col("type") == "wr")
        wr = wr.join(pipeline.withColumnRenamed("index", "src"), "src", "left_semi").join(
            pipeline.withColumnRenamed("index", "dst"), "dst", "left_semi")
        e = d.cache["eos_edges"] = position_edges(d).unionByName(wr.select(*position_edges(d).columns)).persist(DERIVED_STORAGE)
        cached = (segments(e).repartition("segment").mapInPandas(_partition_components, SCC_SCHEMA)
                  .filter(F.col("kind") == "G1c").persist(DERIVED_STORAGE))
        d.cache["eos_cycles"] = cached
    return cached.select("size", "nodes", "edges", "wr_only", F.col("cycle").alias("op_indexes"))
