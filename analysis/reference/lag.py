"""Reference for the realtime-lag measurement (docs/checker.md, "Realtime lag"), in plain Python
straight from its definition: one walk over the events in index order. The oracle for
analysis/checking/lag.py, sharing no code with it. Small histories only.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from typing import Any, Iterable

from analysis.reference.checker import _offset, proven_info_writes


def _known_at(events: list[dict[str, Any]], read_committed: bool) -> dict[int, tuple[list[int], list[int]]]:
    """key -> (observed offsets ascending, the earliest completion time of an op that observed an
    offset at or above each): by that time the offset existed in the log."""
    proven = proven_info_writes(events, read_committed)
    first: dict[tuple[int, int], int] = {}

    def saw(k: int, o: int | None, t: int) -> None:
        if o is not None:
            first[(k, o)] = min(first.get((k, o), t), t)

    for e in events:
        f, t, v = e["f"], e["type"], e.get("value") or {}
        if (f in ("poll", "txn") and t == "ok") or (f == "txn" and t in ("fail", "info")):
            # A record returned inside a txn that aborted, or ended unknown, is in the log all the same.
            for r in v.get("records") or []:
                if all(isinstance(r.get(x), int) for x in ("key", "offset", "value")):
                    saw(r["key"], r["offset"], e["time"])
        if f == "send" and (t == "ok" or (t == "info" and (e["index"], v.get("value")) in proven)):
            saw(v["key"], _offset(v.get("offset")), e["time"])
        if f == "txn" and t in ("ok", "info"):
            for s in v.get("sends") or []:
                if t == "ok" or (e["index"], s["value"]) in proven:
                    saw(s["key"], _offset(s.get("offset")), e["time"])
    by_key: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for (k, o), t in first.items():
        by_key[k].append((o, t))
    out = {}
    for k, rows in by_key.items():
        rows.sort()
        suffix = [t for _, t in rows]
        for i in range(len(suffix) - 2, -1, -1):
            suffix[i] = min(suffix[i], suffix[i + 1])
        out[k] = ([o for o, _ in rows], suffix)
    return out


def entries(events: Iterable[dict[str, Any]], until_index: int | None = None,
            read_committed: bool = True) -> list[dict[str, int]]:
    """One entry per (ok poll or txn before until_index, key the process holds a position on):
    process, key, index, time (the op's invoke), position, lag_ns."""
    events = sorted((e for e in events if e["process"] != "nemesis"), key=lambda e: e["index"])
    known = _known_at(events, read_committed)
    pos: dict[Any, dict[int, int]] = defaultdict(dict)
    invoked: dict[Any, int] = {}
    out = []
    for e in events:
        f, t, p, v = e["f"], e["type"], e["process"], e.get("value") or {}
        if f in ("poll", "txn") and t == "invoke":
            invoked[p] = e["time"]
        elif f in ("assign", "subscribe") and t == "ok":
            keys = set(v.get("keys") or [])
            if f == "assign" and v.get("seek") is None:  # keeps the positions it still covers
                pos[p] = {k: o for k, o in pos[p].items() if k in keys}
            elif f == "assign" and v.get("seek") == "beginning":
                pos[p] = dict.fromkeys(keys, -1)
            else:  # committed offsets: unknown until a read
                pos[p] = {}
        elif f in ("poll", "txn") and t == "ok" and (until_index is None or e["index"] < until_index):
            for r in v.get("records") or []:
                pos[p][r["key"]] = max(pos[p].get(r["key"], -1), r["offset"])
            start = invoked.get(p, e["time"])
            for k, o in sorted(pos[p].items()):
                offs, at = known.get(k, ([], []))
                i = bisect.bisect_left(offs, o + 1)
                lag = max(0, start - at[i]) if i < len(offs) else 0
                out.append({"process": p, "key": k, "index": e["index"], "time": start, "position": o, "lag_ns": lag})
    return out


def _percentile(sorted_ms: list[int], p: float) -> float:
    """Linear interpolation between closest ranks, as Spark's exact `percentile`."""
    pos = (len(sorted_ms) - 1) * p
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi:
        return float(sorted_ms[lo])
    return (hi - pos) * sorted_ms[lo] + (pos - lo) * sorted_ms[hi]


def _stats(ms: list[int]) -> dict[str, Any]:
    s = sorted(ms)
    return {"entries": len(s), "max_ms": s[-1], "p50_ms": round(_percentile(s, 0.5), 3),
            "p99_ms": round(_percentile(s, 0.99), 3)}


def summary(es: list[dict[str, int]]) -> dict[str, Any] | None:
    """Max, p50 and p99 of the lags in whole milliseconds, overall and per key, and the worst
    entry (greatest lag; the earliest such op, then the lowest key). None without entries."""
    if not es:
        return None
    ms = [e["lag_ns"] // 1_000_000 for e in es]
    worst = min(es, key=lambda e: (-(e["lag_ns"] // 1_000_000), e["index"], e["key"]))
    by_key: dict[int, list[int]] = defaultdict(list)
    for e, m in zip(es, ms):
        by_key[e["key"]].append(m)
    return {**_stats(ms),
            "worst": {"process": worst["process"], "key": worst["key"], "index": worst["index"],
                      "time": worst["time"], "lag_ms": worst["lag_ns"] // 1_000_000},
            "keys": {str(k): _stats(v) for k, v in sorted(by_key.items())}}
