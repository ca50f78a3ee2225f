"""Reference checker: plain Python, written straight from the anomaly definitions in
docs/checker.md, one pass over the events in index order. It is the oracle the Spark checker is
tested against, so it deliberately shares no code with analysis/checking/anomalies.py. Small histories only.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from analysis.reference import eos as reference_eos
from analysis.reference import txn as reference_txn
from analysis.rules.registry import ANOMALIES


READ, PROBE, RESET = "read", "probe", "reset"  # the kinds of read_seq's entries
REBALANCE_KINDS = ("poll-skip", "nonmonotonic-poll")


def _offset(o: Any) -> int | None:
    # Offsets that are null or negative (acks=0 reports -1) say nothing about a position.
    return o if isinstance(o, int) and o >= 0 else None


def proven_info_writes(events: list[dict[str, Any]], read_committed: bool = True) -> set[tuple[int, int]]:
    """(op index, value) of every send of an `info` send or txn that a read proved happened: an ok
    read returned its (key, value); at read_committed also every other send of an info txn one of
    whose sends an ok read returned (such a reader sees only committed transactions' records)."""
    read_kv = {(r["key"], r["value"]) for e in events if e["f"] in ("poll", "txn") and e["type"] == "ok"
               for r in (e.get("value") or {}).get("records") or []}
    out: set[tuple[int, int]] = set()
    for e in events:
        if e["type"] != "info" or e["f"] not in ("send", "txn") or e["process"] == "nemesis":
            continue
        v = e.get("value") or {}
        sends = [v] if e["f"] == "send" else v.get("sends") or []
        hit = {s["value"] for s in sends if (s["key"], s["value"]) in read_kv}
        if hit and e["f"] == "txn" and read_committed:
            hit = {s["value"] for s in sends}
        out |= {(e["index"], val) for val in hit}
    return out


def findings(events: Iterable[dict[str, Any]], read_committed: bool = True) -> dict[str, set]:
    """Each anomaly's findings as a set of identifying tuples; len() of each set is its count.
    read_committed: the readers' isolation level (whether a read of one send of an info txn
    proves all of its sends)."""
    events = sorted(events, key=lambda e: e["index"])
    proven = proven_info_writes(events, read_committed)
    positions: set[tuple[int, int, int]] = set()  # (key, offset, value)
    read_values: set[int] = set()
    max_read: dict[int, int] = {}
    ok_writes: dict[int, tuple[int | None, int | None]] = {}  # value -> (key, offset)
    failed: set[int] = set()
    invoke_at: dict[tuple[Any, int], int] = {}
    # (process, key) -> (op order, place in the op, offset, value): a send's op is ordered by its
    # invoke (its own, or its txn's), or by its completion when the process has no invoke of it.
    sends_by_proc: dict[tuple[Any, int], list[tuple[int, int, int, int]]] = defaultdict(list)
    # (READ or PROBE, process, key, offset, value), or (RESET, process, keys kept, rebalance, None)
    read_seq: list[tuple[str, Any, Any, Any, Any]] = []
    subscribed: set[Any] = set()  # processes with an ok/info subscribe: their later assigns are rebalances
    for e in events:
        f, t, v, p = e["f"], e["type"], e.get("value"), e["process"]
        if p == "nemesis":
            continue
        if f == "send":
            if t == "invoke":
                invoke_at[(p, v["value"])] = e["index"]
            elif t == "ok" or (e["index"], v["value"]) in proven:  # an ok write, or a proven info one
                o = _offset(v.get("offset"))
                ok_writes[v["value"]] = (v["key"], o)
                if o is not None:
                    positions.add((v["key"], o, v["value"]))
                    order = invoke_at.get((p, v["value"]), e["index"])
                    sends_by_proc[(p, v["key"])].append((order, 0, o, v["value"]))
            elif t == "fail":
                failed.add(v["value"])
        elif f == "txn" and t == "invoke":
            for s in (v or {}).get("sends") or []:
                invoke_at[(p, s["value"])] = e["index"]
        elif f == "txn" and t in ("ok", "fail", "info"):
            for pos, s in enumerate(v.get("sends") or []):
                if t == "fail":
                    failed.add(s["value"])
                elif t == "info" and (e["index"], s["value"]) not in proven:
                    continue  # unknown: neither failure nor acknowledgement
                else:
                    o = _offset(s.get("offset"))
                    ok_writes[s["value"]] = (s["key"], o)
                    if o is not None:
                        positions.add((s["key"], o, s["value"]))
                        order = invoke_at.get((p, s["value"]), e["index"])
                        sends_by_proc[(p, s["key"])].append((order, pos, o, s["value"]))
        if f in ("poll", "txn") and t == "ok":
            for r in v.get("records") or []:
                positions.add((r["key"], r["offset"], r["value"]))
                read_values.add(r["value"])
                max_read[r["key"]] = max(max_read.get(r["key"], -1), r["offset"])
                read_seq.append((READ, p, r["key"], r["offset"], r["value"]))
        elif f == "txn" and t in ("fail", "info"):
            # (A poll that fails returned nothing: docs/history.md. Only a txn's carries records.)
            # What a poller returned inside a transaction that aborted or whose fate is unknown: the
            # records are in the log (observed positions), and the first of each key must follow
            # the process's last ok read of it (a probe: it never moves that read on).
            probed: set[int] = set()
            for r in (v or {}).get("records") or []:
                if not all(isinstance(r.get(x), int) for x in ("key", "offset", "value")):
                    continue  # a fail/info completion's records are not validated: skip what is not one
                positions.add((r["key"], r["offset"], r["value"]))
                if r["key"] not in probed:
                    probed.add(r["key"])
                    read_seq.append((PROBE, p, r["key"], r["offset"], r["value"]))
        elif f in ("assign", "subscribe") and t in ("ok", "info"):
            # The read order goes on for every key it still covers, unless it seeks the beginning
            # (the client asked to read again from the start). A subscribe, and an assign of a
            # process that subscribed (a group rebalance), marks the kept keys: what they read next
            # may legitimately restart at the group's committed offset.
            if f == "subscribe":
                subscribed.add(p)
            kept = frozenset((v or {}).get("keys") or []) if (v or {}).get("seek") != "beginning" else frozenset()
            read_seq.append((RESET, p, kept, p in subscribed, None))

    out: dict[str, set] = {a: set() for a in ANOMALIES}

    values_at: dict[tuple[int, int], set[int]] = defaultdict(set)
    where: dict[int, set[tuple[int, int]]] = defaultdict(set)
    for k, o, val in positions:
        values_at[(k, o)].add(val)
        where[val].add((k, o))
    out["inconsistent-offsets"] = {ko for ko, vals in values_at.items() if len(vals) > 1}
    out["duplicate"] = {val for val, ps in where.items() if len(ps) > 1}

    for val, (k, o) in ok_writes.items():
        if val in read_values:
            continue
        if o is not None and k in max_read and max_read[k] > o:
            out["lost-write"].add(val)
        else:
            out["unseen"].add(val)

    for (p, k), sends in sends_by_proc.items():
        sends.sort()
        for a, b in zip(sends, sends[1:]):  # two sends of one txn are int-nonmonotonic-send's
            if a[0] != b[0] and b[2] <= a[2]:
                out["nonmonotonic-send"].add((p, k, a[3], b[3]))

    observed: dict[int, list[int]] = defaultdict(list)
    for k, o in values_at:
        observed[k].append(o)
    for k in observed:
        observed[k].sort()
    last: dict[Any, dict[int, tuple[int, int]]] = defaultdict(dict)
    crossed: dict[Any, set[int]] = defaultdict(set)  # keys a rebalance passed since their last ok read
    for n, (what, p, k, o, val) in enumerate(read_seq):
        if what == RESET:
            kept, rebalance = k, o
            last[p] = {key: at for key, at in last[p].items() if key in kept}
            crossed[p] = {key for key in crossed[p] if key in kept} | (set(last[p]) if rebalance else set())
            continue
        if k in last[p]:
            po, pv = last[p][k]
            across = k in crossed[p]
            if o <= po:
                out["nonmonotonic-poll"].add((n, p, k, po, o, across))
            else:
                offs = observed[k]
                # Observed offsets strictly between the previous and this read were skipped.
                if bisect.bisect_left(offs, o) - bisect.bisect_right(offs, po) > 0:
                    out["poll-skip"].add((n, p, k, po, o, across))
        if what == READ:
            last[p][k] = (o, val)
            crossed[p].discard(k)

    out["aborted-read"] = read_values & failed
    out.update(reference_txn.findings(events, positions))
    out.update(reference_eos.findings([e for e in events if e["process"] != "nemesis"], positions))
    return out


def across_rebalance(found: dict[str, set]) -> dict[str, int]:
    """How many of findings()' poll-skip and nonmonotonic-poll pairs have a group rebalance
    between their two reads (the last element of each finding)."""
    return {a: sum(1 for f in found[a] if f[-1]) for a in REBALANCE_KINDS}


def counts(events: Iterable[dict[str, Any]], read_committed: bool = True) -> dict[str, int]:
    """Count of each anomaly, every name present."""
    return {a: len(s) for a, s in findings(events, read_committed).items()}


def read_jsonl(path: Path | str) -> list[dict[str, Any]]:
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]
