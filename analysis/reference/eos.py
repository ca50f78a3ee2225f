"""Reference checker for the exactly-once pipeline's anomalies (eos-lost, eos-duplicate, eos-G1c):
plain Python, written from their definitions in analysis/rules/registry.py, sharing no code with
analysis/checking/eos_anomalies.py. Small histories only.
"""

from __future__ import annotations

import bisect
from collections import defaultdict

from analysis.reference import txn as reference_txn
from harness.history.eos import OUTPUT_KEY_BASE, VALUE_STRIDE

EOS_KINDS = ("eos-lost", "eos-duplicate", "eos-G1c")


def _pipeline(events: list[dict], types: tuple[str, ...]) -> list[dict]:
    """The pipeline txns (a txn that sent to an output key) whose completion is of these types."""
    return [e for e in events if e["f"] == "txn" and e["type"] in types
            and any(s["key"] >= OUTPUT_KEY_BASE for s in (e.get("value") or {}).get("sends") or [])]


def _input_records(e: dict) -> list[dict]:
    return [r for r in (e.get("value") or {}).get("records") or [] if r["key"] < OUTPUT_KEY_BASE]


def lost(events: list[dict], positions: set[tuple[int, int, int]], made: set[int]) -> set[int]:
    """Input values observed at or below the highest input offset an ok pipeline txn read on their
    key, with no output read made from them."""
    past: dict[int, int] = {}
    for e in _pipeline(events, ("ok",)):
        for r in _input_records(e):
            past[r["key"]] = max(past.get(r["key"], -1), r["offset"])
    at: dict[int, tuple[int, int]] = {}
    for k, o, v in positions:
        if k < OUTPUT_KEY_BASE:
            at[v] = min(at.get(v, (k, o)), (k, o))
    return {v for v, (k, o) in at.items() if k in past and o <= past[k] and v not in made}


def position_edges(events: list[dict], positions: set[tuple[int, int, int]]) -> list[tuple]:
    """(T, T', "wr", key, value, None): T ok, T' ok or info, T' read the input key first at the
    observed offset right after T's last read there."""
    observed: dict[int, list[int]] = defaultdict(list)
    for k, o in {(k, o) for k, o, _ in positions}:
        observed[k].append(o)
    for k in observed:
        observed[k].sort()
    runs: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)  # (txn, key) -> (offset, value)
    outcome = {}
    for e in _pipeline(events, ("ok", "info")):
        outcome[e["index"]] = e["type"]
        for r in _input_records(e):
            runs[(e["index"], r["key"])].append((r["offset"], r["value"]))
    starts: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)  # (key, first offset) -> (txn, value)
    for (t, k), rs in runs.items():
        starts[(k, min(rs)[0])].append((t, min(rs)[1]))
    out = []
    for (t, k), rs in runs.items():
        if outcome[t] != "ok":
            continue
        offs, last = observed[k], max(rs)[0]
        i = bisect.bisect_right(offs, last)
        if i < len(offs):
            for t2, v in starts.get((k, offs[i]), []):
                if t2 != t:
                    out.append((t, t2, "wr", k, v, None))
    return out


def findings(events: list[dict], positions: set[tuple[int, int, int]]) -> dict[str, set]:
    """Each eos anomaly's findings (len() is its count). `positions`: every observed (key, offset,
    value), as analysis/reference/checker.py gathers them."""
    events = [e for e in events if e["process"] != "nemesis"]
    where: dict[int, set[tuple[int, int]]] = defaultdict(set)  # input value -> output positions read
    for e in events:
        if e["f"] in ("poll", "txn") and e["type"] == "ok":
            for r in (e.get("value") or {}).get("records") or []:
                if r["key"] >= OUTPUT_KEY_BASE:
                    where[r["value"] % VALUE_STRIDE].add((r["key"], r["offset"]))
    out: dict[str, set] = {k: set() for k in EOS_KINDS}
    out["eos-lost"] = lost(events, positions, set(where))
    out["eos-duplicate"] = {v for v, ps in where.items() if len(ps) > 1}
    pipeline = {e["index"] for e in _pipeline(events, ("ok", "info"))}
    es = position_edges(events, positions) + [
        x for x in reference_txn.edges(events, positions) if x[2] == "wr" and x[0] in pipeline and x[1] in pipeline]
    adj: dict[int, set[int]] = defaultdict(set)
    for u, v, *_ in es:
        adj[u].add(v)
    out["eos-G1c"] = set(reference_txn.sccs(adj))
    return out
