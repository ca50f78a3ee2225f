"""Unclean elections that explain a loss: a replica without the acknowledged records made leader.

On Kafka 4.x with ELR (KIP-966), when neither the ISR nor the ELR has a replica to elect, the
controller elects the last known leader once it is back, even with unclean.leader.election.enable
false ("Select the last known leader if it is unfenced", Kafka's operations guide), and marks the
partition RECOVERING. A last known leader whose power was cut comes back without what it had not
fsynced: the first campaign on 4.4.0 (2026-11-27, docs/campaigns.md) lost queue-0's 66 records
that way, and the explanation named 40 faults but not the election. A last known leader whose data
disk was replaced comes back with nothing: its broker creates the partition's log again, empty
("Created log for partition"), and the controller still elects it (the campaign's seed 5, 3,191
offsets). Facts only; text.py tells them.
"""

from __future__ import annotations

import re
from typing import Any

from analysis.explain import logs
from analysis.explain.timeline import Fault
from harness.history.faults import DISK_SWAP, POWER

MAX_ELECTIONS = 3  # unclean elections named per example


LOADED = re.compile(r"Completed load of Log\(.*?\blogEndOffset=(\d+)")
CREATED = re.compile(r"\bCreated log for partition \S+ in ")  # a new log: empty (LogManager, Kafka 2.x-4.x)
# What another replica held just before the election: its last start as a follower or leader
# ("Follower queue-1 starts at leader epoch 2 from offset 111", 4.x) or its last log load.
FROM_OFFSET = re.compile(r"\bstarts at leader epoch \d+ from offset (\d+)")
HELD_WINDOW_NS = 120 * 1_000_000_000  # a replica's last word older than this is not "then"


def unclean_between(log_view: logs.LogView, key: int, faults: list[Fault], start_ns: int | None, utc: Any,
                    after_epoch: int | None, upto_epoch: int | None, since_s: float | None) -> list[dict[str, Any]]:
    """Partition `key`'s unclean elections into a leader epoch above `after_epoch` and at most
    `upto_epoch` (either may be unknown), each with what the elected broker held: the log end
    offset it last loaded the partition's log with before the election (`loaded`; 0 and `created`
    when it last created the log instead), its power cuts from `since_s` (the lost record's
    acknowledgement) to the election (`power_cuts`: how many, and those that dropped bytes or files
    it had not fsynced), and its data disk's replacements in that window (`disk_swaps`)."""
    out = []
    for e in log_view.unclean_elections(key):
        if (after_epoch is not None and e["epoch"] <= after_epoch) or (upto_epoch is not None and e["epoch"] > upto_epoch):
            continue
        t_s = (e["wall_ns"] - start_ns) / 1e9 if start_ns is not None else None
        item: dict[str, Any] = {k: e[k] for k in ("leader", "was", "epoch", "file", "line")}
        item["t_s"] = round(t_s, 3) if t_s is not None else None
        item["utc"] = utc(t_s)
        loads = [x for x in log_view.by_key.get(key) or []
                 if x.broker == str(e["leader"]) and x.wall_ns <= e["wall_ns"] and (LOADED.search(x.text) or CREATED.search(x.text))]
        if loads:
            last = loads[-1]
            m = LOADED.search(last.text)
            item["loaded"] = {"log_end_offset": int(m.group(1)) if m else 0, "created": m is None, "file": last.file,
                              "line": last.line_no, "t_s": round((last.wall_ns - start_ns) / 1e9, 3) if start_ns is not None else None}

        held = _held_by_others(log_view, key, e)
        if held and item.get("loaded") and any(h["log_end_offset"] > item["loaded"]["log_end_offset"] for h in held):
            item["others_held"] = held

        def struck(kind: str) -> list[Fault]:
            return [f for f in faults if f.f == kind and e["leader"] in f.targets
                    and (since_s is None or f.start_s >= since_s) and (t_s is None or f.start_s <= t_s)]
        swaps = struck(DISK_SWAP.start)
        if swaps:
            item["disk_swaps"] = [{"t_s": round(f.start_s, 3), "utc": utc(f.start_s)} for f in swaps]
        cuts = struck(POWER.start)
        if cuts:
            dropping = []
            for f in cuts:
                d = (f.detail.get("dropped") or {}).get(str(e["leader"])) or {}
                if d.get("dropped_bytes") or d.get("dropped_files") or d.get("dropped_entries"):
                    dropping.append({"t_s": round(f.start_s, 3), "utc": utc(f.start_s), "target": f.detail.get("target"),
                                     "dropped_bytes": d.get("dropped_bytes") or 0, "dropped_files": d.get("dropped_files") or 0,
                                     "partition_names": partition_names(d, f"{log_view.topic}-{key}")})
            item["power_cuts"] = {"count": len(cuts), "dropping": dropping}
        out.append(item)
        if len(out) == MAX_ELECTIONS:
            break
    return out


def partition_names(dropped: dict[str, Any], partition: str, limit: int = 3) -> list[dict[str, Any]]:
    """What a power cut took of one partition's directory (lossyfs names it since 2026-11-27; []
    before): the directory's own name first (an `entry` made since its parent's last fsync takes
    the whole log with it, as in the campaign's seed 33), then its files, at most `limit`."""
    mine = [n for n in dropped.get("dropped_names") or [] if partition in n.get("path", "").split("/")]
    mine.sort(key=lambda n: (n["path"].split("/")[-1] != partition, n["path"]))
    return mine[:limit]


def _held_by_others(log_view: logs.LogView, key: int, e: dict[str, Any]) -> list[dict[str, Any]]:
    """Each other broker's log end offset for the partition as its last line before the election
    said (a start from an offset, or a log load), within HELD_WINDOW_NS: the campaign's seed 33
    elected broker 1 with an empty log while brokers 2 and 3 had started from offset 111 six
    seconds before."""
    last: dict[str, dict[str, Any]] = {}
    for x in log_view.by_key.get(key) or []:
        if x.broker == str(e["leader"]) or not x.broker.isdigit() or x.wall_ns > e["wall_ns"]:
            continue
        if x.wall_ns < e["wall_ns"] - HELD_WINDOW_NS:
            continue
        m = FROM_OFFSET.search(x.text) or LOADED.search(x.text)
        if m:
            last[x.broker] = {"broker": int(x.broker), "log_end_offset": int(m.group(1)), "file": x.file, "line": x.line_no}
    return [last[b] for b in sorted(last, key=int)]
