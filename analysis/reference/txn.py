"""Reference checker, transactional part: the int- anomalies, precommitted-read and the dependency
cycles (G0, G1c), in plain Python straight from their definitions in docs/checker.md. It is the
oracle for analysis/checking/txn_anomalies.py and analysis/checking/cycles.py and shares no code with them: the
cycles here are found by Kosaraju's algorithm over the whole graph, not per segment as Spark does.
Small histories only.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

TXN_KINDS = ("int-nonmonotonic-send", "int-send-skip", "int-nonmonotonic-poll", "int-poll-skip",
             "precommitted-read", "G0", "G1c")


def _offset(o: Any) -> int | None:
    return o if isinstance(o, int) and o >= 0 else None


def _between(observed: list[int], lo: int, hi: int) -> bool:
    """Some observed offset lies strictly between lo and hi."""
    return bisect.bisect_left(observed, hi) - bisect.bisect_right(observed, lo) > 0


def _pairs(items: list[tuple[int, int | None, int]]) -> dict[int, list[tuple[int | None, int]]]:
    """(key, position, value) in op order -> key -> [(position, value)] in op order."""
    by_key: dict[int, list[tuple[int | None, int]]] = defaultdict(list)
    for k, p, v in items:
        by_key[k].append((p, v))
    return by_key


def internal(events: list[dict], positions: set[tuple[int, int, int]]) -> dict[str, set]:
    """int-nonmonotonic-send, int-send-skip, int-nonmonotonic-poll, int-poll-skip and
    precommitted-read, given the observed positions (key, offset, value)."""
    out: dict[str, set] = {k: set() for k in TXN_KINDS[:5]}
    observed: dict[int, list[int]] = defaultdict(list)
    for k, o in {(k, o) for k, o, _ in positions}:
        observed[k].append(o)
    for offs in observed.values():
        offs.sort()
    read_at: dict[tuple[int, int], int] = {}  # (key, value) -> lowest offset an ok read returned it at
    for e in events:
        if e["f"] in ("poll", "txn") and e["type"] == "ok":
            for r in (e.get("value") or {}).get("records") or []:
                kv = (r["key"], r["value"])
                read_at[kv] = min(read_at.get(kv, r["offset"]), r["offset"])
    for e in events:
        if e["f"] != "txn" or e["type"] not in ("ok", "info", "fail"):
            continue
        i, v = e["index"], e.get("value") or {}
        sends = v.get("sends") or []
        sent = [(s["key"], _offset(s.get("offset")), s["value"]) for s in sends]
        sent = [(k, o if o is not None else read_at.get((k, val)), val) for k, o, val in sent]
        for k, seq in _pairs(sent).items():
            for (p1, v1), (p2, v2) in zip(seq, seq[1:]):
                if p1 is None or p2 is None:
                    continue
                if p2 <= p1:
                    out["int-nonmonotonic-send"].add((i, k, v1, v2))
                elif _between(observed[k], p1, p2):
                    out["int-send-skip"].add((i, k, v1, v2))
        records = v.get("records") or []
        for k, seq in _pairs([(r["key"], r["offset"], r["value"]) for r in records]).items():
            for n, ((o1, v1), (o2, v2)) in enumerate(zip(seq, seq[1:])):
                if o2 <= o1:
                    out["int-nonmonotonic-poll"].add((i, k, n))
                elif _between(observed[k], o1, o2):
                    out["int-poll-skip"].add((i, k, n))
        own = {(s["key"], s["value"]) for s in sends}
        for r in records:
            if (r["key"], r["value"]) in own:
                out["precommitted-read"].add((i, r["key"], r["value"]))
    return out


def edges(events: list[dict], positions: set[tuple[int, int, int]]) -> list[tuple[int, int, str, int, int, int | None]]:
    """The dependency edges (from, to, type, key, value, value'), between the completions of ops.
    A value's writer is the `ok` or `info` send or txn that sent it. ww: on each key, values with
    a writer taken in observed order (each at its lowest observed offset), the writer of one to
    the writer of the next. wr: the writer of a value to each `ok` poll or txn that read it."""
    writer: dict[int, int] = {}
    for e in events:
        if e["type"] not in ("ok", "info") or e["process"] == "nemesis":
            continue
        v = e.get("value") or {}
        if e["f"] == "send":
            writer[v["value"]] = e["index"]
        elif e["f"] == "txn":
            for s in v.get("sends") or []:
                writer[s["value"]] = e["index"]
    first: dict[tuple[int, int], int] = {}
    for k, o, val in positions:
        first[(k, val)] = min(first.get((k, val), o), o)
    order: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for (k, val), o in first.items():
        if val in writer:
            order[k].append((o, val))
    out = []
    for k, seq in order.items():
        seq.sort()
        for (_, v1), (_, v2) in zip(seq, seq[1:]):
            if writer[v1] != writer[v2]:
                out.append((writer[v1], writer[v2], "ww", k, v1, v2))
    for e in events:
        if e["f"] in ("poll", "txn") and e["type"] == "ok":
            for r in (e.get("value") or {}).get("records") or []:
                w = writer.get(r["value"])
                if w is not None and w != e["index"]:
                    out.append((w, e["index"], "wr", r["key"], r["value"], None))
    return out


def sccs(adj: dict[int, set[int]]) -> list[frozenset[int]]:
    """Strongly connected components of two or more nodes (Kosaraju, iterative)."""
    nodes = set(adj) | {w for ws in adj.values() for w in ws}
    seen: set[int] = set()
    finish: list[int] = []
    for s in sorted(nodes):
        if s in seen:
            continue
        seen.add(s)
        stack = [(s, iter(sorted(adj.get(s, ()))))]
        while stack:
            node, it = stack[-1]
            nxt = next((w for w in it if w not in seen), None)
            if nxt is None:
                stack.pop()
                finish.append(node)
            else:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(adj.get(nxt, ())))))
    radj: dict[int, set[int]] = defaultdict(set)
    for u, ws in adj.items():
        for w in ws:
            radj[w].add(u)
    done: set[int] = set()
    out = []
    for s in reversed(finish):
        if s in done:
            continue
        comp, todo = set(), [s]
        done.add(s)
        while todo:
            u = todo.pop()
            comp.add(u)
            for w in radj.get(u, ()):
                if w not in done:
                    done.add(w)
                    todo.append(w)
        if len(comp) > 1:
            out.append(frozenset(comp))
    return out


def cycles(es: list[tuple]) -> dict[str, set]:
    """G0: each strongly connected component (of two or more ops) of the ww edges. G1c: each such
    component of the ww and wr edges that holds a wr edge between two of its ops. Both as sets of
    frozensets of op indexes."""
    def adj(types: tuple[str, ...]) -> dict[int, set[int]]:
        a: dict[int, set[int]] = defaultdict(set)
        for u, v, t, *_ in es:
            if t in types:
                a[u].add(v)
        return a

    g1c = set()
    for comp in sccs(adj(("ww", "wr"))):
        if any(t == "wr" and u in comp and v in comp for u, v, t, *_ in es):
            g1c.add(comp)
    return {"G0": set(sccs(adj(("ww",)))), "G1c": g1c, "G1c-wr-only": set(sccs(adj(("wr",))))}


def findings(events: list[dict], positions: set[tuple[int, int, int]]) -> dict[str, set]:
    """Every transactional anomaly's findings (len() is its count); the pipeline's are reference/eos.py's."""
    events = [e for e in events if e["process"] != "nemesis"]
    out = internal(events, positions)
    c = cycles(edges(events, positions))
    out["G0"], out["G1c"] = c["G0"], c["G1c"]
    return out
