"""Reference for the unavailability measurement (docs/checker.md, "Unavailability"), in plain Python
straight from its definition, sharing no code with analysis/checking/unavailability.py: the fault
bands paired from the nemesis events, then, per band, the longest stretch of it with no ok write
and the longest with no ok read, from every completion's exact time. Small histories only.
"""

from __future__ import annotations

import bisect
from typing import Any

from harness.history.faults import BY_START, HEAL, OPERATIONS, STOPS, ended_by

NS = 1_000_000_000
OPERATION_STARTS = {k.start for k in OPERATIONS}


def completions(events: list[dict[str, Any]], until_index: int | None = None) -> dict[str, list[int]]:
    """The times (ns) of ok writes (a send, or a txn with sends) and ok reads (a poll, or a txn
    that read records), in time order; reads from `until_index` on (the final drain) left out."""
    out: dict[str, list[int]] = {"write": [], "read": []}
    for e in events:
        if e["type"] != "ok" or e["process"] == "nemesis":
            continue
        v = e.get("value") or {}
        if e["f"] == "send" or (e["f"] == "txn" and v.get("sends")):
            out["write"].append(e["time"])
        if (e["f"] == "poll" or (e["f"] == "txn" and v.get("records"))) and (until_index is None or e["index"] < until_index):
            out["read"].append(e["time"])
    return {k: sorted(v) for k, v in out.items()}


def bands(events: list[dict[str, Any]], last: int) -> list[dict[str, Any]]:
    """Each fault from its start event to the event that ended it (a stop naming targets ends only
    the bands of those nodes; a heal ends all); one never ended runs to `last`."""
    open_: list[dict[str, Any]] = []
    done: list[dict[str, Any]] = []
    for e in events:
        if e["process"] != "nemesis":
            continue
        v = e.get("value") if isinstance(e.get("value"), dict) else {}
        targets = [t for t in v.get("targets") or [] if isinstance(t, int)]
        if e["f"] in BY_START:
            open_.append({"f": e["f"], "start": e["time"], "end": last, "targets": targets})
        elif e["f"] in STOPS or e["f"] == HEAL:
            kinds = {k.start for k in ended_by(e["f"])}
            closing = [b for b in open_ if e["f"] == HEAL or (b["f"] in kinds and (not targets or not b["targets"]
                                                                                 or set(b["targets"]) & set(targets)))]
            for b in closing:
                b["end"] = e["time"]
            done += closing
            open_ = [b for b in open_ if b not in closing]
    return sorted(done + open_, key=lambda b: b["start"])


def longest_gap(times: list[int], start: int, end: int) -> int:
    """The longest stretch of [start, end] that holds none of `times` (sorted), in ns."""
    inside = times[bisect.bisect_left(times, start):bisect.bisect_right(times, end)]
    edges = [start, *inside, end]
    return max(b - a for a, b in zip(edges, edges[1:]))


def measure(events: list[dict[str, Any]], until_index: int | None = None) -> list[dict[str, Any]]:
    """Per band: its kind, whether it is an operation, its span and targets, and the longest stretch
    with no ok write and with no ok read (seconds, to the millisecond; None when the run never read)."""
    done = completions(events, until_index)
    reads = any(e["f"] in ("poll",) or (e["f"] == "txn" and (e.get("value") or {}).get("records"))
                for e in events if e["process"] != "nemesis")
    # The history's last moment: its last nemesis event or ok completion counted above.
    last = max([e["time"] for e in events if e["process"] == "nemesis"] + done["write"] + done["read"] + [0])
    out = []
    for b in bands(events, last):
        out.append({"f": b["f"], "operation": b["f"] in OPERATION_STARTS, "start_s": round(b["start"] / NS, 3),
                    "end_s": round(b["end"] / NS, 3), "targets": b["targets"],
                    "no_write_s": round(longest_gap(done["write"], b["start"], b["end"]) / NS, 3),
                    "no_read_s": round(longest_gap(done["read"], b["start"], b["end"]) / NS, 3) if reads else None})
    return out
