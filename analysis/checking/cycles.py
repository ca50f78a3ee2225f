"""Dependency cycles between ops (G0, G1c), on Spark. Definitions in analysis/rules/registry.py.

The graph (as Elle builds it for Kafka in Jepsen's kafka.clj, our own code): nodes are the
completions of `ok` and `info` sends and txns (writers) and of `ok` polls and txns (readers), named
by history index (a poll writes nothing, so no edge leaves it: polls are left out of the search). A value's writer is the op that sent it. ww: on each key, the values that have
a writer, in observed order (each at its lowest observed offset), link the writer of one to the
writer of the next. wr: a value's writer links to every op that read it. Self-edges are dropped.
rw edges (a reader to the writer of the next version) are not built: a Kafka poll is no snapshot
read, so the cycles they would close (G-single, G2) are permitted, and Jepsen leaves them out too.

Finding the strongly connected components without iterating to the graph's diameter (a ww chain
runs the length of a partition: label propagation would need a round per record). Number the
nodes by history index and call an edge u -> v *backward* when v < u. Walking any cycle from its
lowest node to its highest and back, every point between them is crossed downwards by one of the
cycle's backward edges, so the cycle lies inside one *segment*: a maximal run of indexes covered
by the intervals [v, u] of backward edges. One sort of the backward edges' ends and the nodes,
with a running sum, numbers the segments; an edge whose ends are not in the same segment is on
no cycle. What remains is split by segment and each segment's components are found by Tarjan's
algorithm in a pandas function (one call per partition). In a history without anomalies a backward edge joins
ops that ran concurrently, so segments are short; the whole is one sort and a few joins.
"""

from __future__ import annotations

import warnings

from collections import defaultdict

import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analysis.checking.anomalies import DERIVED_STORAGE, Derived
from analysis.checking.txn_anomalies import observed_values
from analysis.checking.claims import finds

EDGE_TYPES = ("ww", "wr")
SCC_SCHEMA = ("kind string, size int, nodes array<long>, cycle array<long>, "
              "edges array<struct<src:long,dst:long,type:string,key:long,value:long,next_value:long>>, "
              "wr_only boolean")


def writers(d: Derived) -> DataFrame:
    """value, key, writer (index) of every ok/info send and txn send."""
    ops = d.events.filter(F.col("type").isin("ok", "info"))
    sends = ops.filter(F.col("f") == "send").select(
        F.col("value.value").alias("value"), F.col("index").alias("writer"))
    txn = ops.filter(F.col("f") == "txn").select("index", F.explode("value.sends").alias("s")).select(
        F.col("s.value").alias("value"), F.col("index").alias("writer"))
    return sends.unionByName(txn)


def edges(d: Derived) -> DataFrame:
    """src, dst, type, key, value, next_value: the ww and wr edges (not deduplicated)."""
    w = writers(d)
    placed = (observed_values(d, reads_only=False).groupBy("key", "value").agg(F.min("offset").alias("offset"))
              .join(w, "value"))
    order = Window.partitionBy("key").orderBy("offset", "value")
    ww = placed.select("key", "value", "writer", F.lead("value").over(order).alias("next_value"),
                       F.lead("writer").over(order).alias("next_writer")).filter(
        F.col("next_writer").isNotNull() & (F.col("next_writer") != F.col("writer"))).select(
        F.col("writer").alias("src"), F.col("next_writer").alias("dst"), F.lit("ww").alias("type"),
        "key", "value", "next_value")
    # Readers that are not txns write nothing, so no edge leaves them and they are on no cycle:
    # only reads inside ok txns make wr edges here (the reference keeps them all; same cycles).
    readers = d.events.filter((F.col("f") == "txn") & (F.col("type") == "ok")).select(
        "index", F.explode("value.records").alias("r")).select(
        F.col("r.key").alias("key"), F.col("r.value").alias("value"), F.col("index").alias("dst"))
    wr = readers.join(w, "value").filter(
        F.col("writer") != F.col("dst")).select(
        F.col("writer").alias("src"), "dst", F.lit("wr").alias("type"), "key", "value",
        F.lit(None).cast("long").alias("next_value"))
    return ww.unionByName(wr)


# The sweep below is one window over a narrow frame on purpose; Spark Connect's client warns about any
# window without a partition, and its warning reached the terminal between a txn run's summary and its
# verdict (issue 34: third-party noise). This one, only, is expected.
warnings.filterwarnings("ignore", message=".*No Partition Defined for Window operation.*", category=UserWarning)


def segments(e: DataFrame) -> DataFrame:
    """The edges that may lie on a cycle, with the segment they lie in (see the module's doc)."""
    back = e.filter(F.col("dst") < F.col("src"))
    # Sweep rows: (at, kind, delta); at one index, starts (0) before nodes (1) before ends (2), so
    # intervals that touch merge and a node at an end is still covered.
    sweep = (back.select(F.col("dst").alias("at"), F.lit(0).alias("kind"), F.lit(1).alias("delta"))
             .unionByName(back.select(F.col("src").alias("at"), F.lit(2).alias("kind"), F.lit(-1).alias("delta")))
             .unionByName(e.select(F.col("src").alias("at")).unionByName(e.select(F.col("dst").alias("at")))
                          .distinct().select("at", F.lit(1).alias("kind"), F.lit(0).alias("delta"))))
    # One window over the whole (narrow) sweep: the running depth and the segment number.
    w = Window.orderBy("at", "kind").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    depth = F.sum("delta").over(w)
    swept = sweep.select("at", "kind", depth.alias("depth"), "delta")
    opened = F.when((F.col("kind") == 0) & (F.col("depth") == 1), 1).otherwise(0)
    numbered = swept.select("at", "kind", "depth", F.sum(opened).over(w).alias("segment"))
    node_seg = numbered.filter((F.col("kind") == 1) & (F.col("depth") > 0)).select("at", "segment")
    src = node_seg.select(F.col("at").alias("src"), F.col("segment"))
    dst = node_seg.select(F.col("at").alias("dst"), F.col("segment").alias("dst_segment"))
    return (e.join(src, "src").join(dst, "dst").filter(F.col("segment") == F.col("dst_segment"))
            .drop("dst_segment"))


def _tarjan(adj: dict[int, list[int]]) -> list[list[int]]:
    """Strongly connected components of two or more nodes (iterative Tarjan)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on: set[int] = set()
    stack: list[int] = []
    out = []
    for root in sorted(adj):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on.add(v)
            succ = adj.get(v, [])
            if i < len(succ):
                work.append((v, i + 1))
                w = succ[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _path(adj: dict[int, list[int]], start: int, goal: int, inside: set[int]) -> list[int]:
    """A shortest path start ->* goal inside a component (breadth first)."""
    prev = {start: start}
    todo = [start]
    for u in todo:
        if u == goal:
            break
        for w in adj.get(u, []):
            if w in inside and w not in prev:
                prev[w] = u
                todo.append(w)
    path = [goal]
    while path[-1] != start:
        path.append(prev[path[-1]])
    return path[::-1]


COLUMNS = ["src", "dst", "type", "key", "value", "next_value"]
OUT = ["kind", "size", "nodes", "cycle", "edges", "wr_only"]


def _components(pdf: pd.DataFrame) -> pd.DataFrame:
    """One segment's edges -> one row per G0 and G1c component, with one cycle as its example."""
    return pd.DataFrame(_component_rows(list(pdf[COLUMNS].itertuples(index=False, name=None))), columns=OUT)


def _component_rows(rows: list[tuple]) -> list[dict]:
    """_components on plain tuples (src, dst, type, key, value, next_value)."""
    explain: dict[tuple[int, int, str], tuple] = {}
    for r in sorted(rows, key=lambda r: (r[0], r[1], r[2], r[3], r[4])):
        explain.setdefault((int(r[0]), int(r[1]), r[2]), r)

    def adjacency(types: tuple[str, ...]) -> dict[int, list[int]]:
        a: dict[int, set[int]] = defaultdict(set)
        for u, v, t in explain:
            if t in types:
                a[u].add(v)
        return {u: sorted(vs) for u, vs in a.items()}

    wr_only = {n for comp in _tarjan(adjacency(("wr",))) for n in comp}
    out = []
    for kind, types in (("G0", ("ww",)), ("G1c", EDGE_TYPES)):
        adj = adjacency(types)
        for comp in _tarjan(adj):
            inside = set(comp)
            internal = sorted(k for k in explain if k[2] in types and k[0] in inside and k[1] in inside)
            first = next((k for k in internal if k[2] == "wr"), None) if kind == "G1c" else internal[0]
            if first is None:
                continue  # a ww-only component: reported as G0
            cycle = [first[0], *_path(adj, first[1], first[0], inside)]
            steps = []
            for u, v in zip(cycle, cycle[1:]):
                # The chosen wr edge where it is the step; else ww when that explains it.
                t = "wr" if (kind == "G1c" and (u, v) == first[:2]) or (u, v, "ww") not in explain else "ww"
                r = explain[(u, v, t)]
                steps.append({"src": u, "dst": v, "type": t, "key": _int(r[3]), "value": _int(r[4]), "next_value": _int(r[5])})
            out.append({"kind": kind, "size": len(comp), "nodes": comp, "cycle": cycle, "edges": steps,
                        "wr_only": bool(inside & wr_only)})
    return out


def _partition_components(batches):
    """mapInPandas: every segment of one partition (its batches joined first: a segment may span
    two), each through _components."""
    frames = list(batches)
    if not frames:
        return
    pdf = pd.concat(frames, ignore_index=True)
    by_segment: dict[int, list[tuple]] = defaultdict(list)
    for seg, *row in pdf[["segment", *COLUMNS]].itertuples(index=False, name=None):
        by_segment[seg].append(tuple(row))
    out = [r for rows in by_segment.values() for r in _component_rows(rows)]
    if out:
        yield pd.DataFrame(out, columns=OUT)


def _int(x) -> int | None:
    return None if x is None or pd.isna(x) else int(x)


def possible(d: Derived) -> bool:
    """Whether the ww edges can close a cycle. With txns they can. Without, every writer wrote one
    value to one key, so each key's ww edges make one path and no wr edge is built; a cycle then
    needs a value observed on two keys, a duplicate, which the count job finds first
    (flags["duplicates"]). Hypothesis found such a history: one value at offset 0 of key 0 and
    offset 1 of key 1, another at offset 0 of both, so the two keys' paths ran opposite ways."""
    return d.has_txns() or d.flags.get("duplicates", False)


def components(d: Derived) -> DataFrame:
    """Every G0 and G1c component (kind, size, nodes, cycle, edges, wr_only), computed once per
    Derived and kept on local disk: G0, G1c and their examples read it."""
    cached = d.cache.get("cycles")
    if cached is None and not possible(d):
        return d.events.sparkSession.createDataFrame([], SCC_SCHEMA)
    if cached is None:
        # Many small segments: one pandas call per partition, not per segment (applyInPandas
        # cost ~10 ms a group: 5,038 segments of 20k txns took 50 s; this way a few seconds).
        # The edges are read four times by segments(): kept on local disk, not recomputed.
        e = d.cache["cycle_edges"] = edges(d).persist(DERIVED_STORAGE)
        cached = (segments(e).repartition("segment").mapInPandas(_partition_components, SCC_SCHEMA)
                  .persist(DERIVED_STORAGE))
        d.cache["cycles"] = cached
    return cached


def _found(d: Derived, kind: str) -> DataFrame:
    return components(d).filter(F.col("kind") == kind).select(
        "size", "nodes", "edges", "wr_only", F.col("cycle").alias("op_indexes"))


@finds("G0")
def g0(d: Derived) -> DataFrame:
    """G0 (analysis/rules/registry.py): one row per strongly connected component of the ww edges."""
    return _found(d, "G0")


@finds("G1c")
def g1c(d: Derived) -> DataFrame:
    """G1c (analysis/rules/registry.py): one row per strongly connected component of the ww and wr
    edges that holds a wr edge; wr_only says whether wr edges alone close a cycle in it."""
    return _found(d, "G1c")

