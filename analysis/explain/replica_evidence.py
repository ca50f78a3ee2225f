"""replica-divergence: evidence from the brokers' own logs rather than from the clients' history.

After a scenario, `harness.cluster.replicas` dumps every replica's log with Kafka's DumpLogSegments and
writes `replicas.json`. Replicas that, once healed, hold different values at the same offset have
diverged: Kafka's replication promises that followers converge on the leader's log. Only unclean
leader election gives that up (KIP-101 appendix (a)), so divergence is forbidden everywhere else.
A replica that is merely shorter is lagging, not diverged.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

NAME = "replica-divergence"


def read_replica_divergence(run_dir: Path | str) -> dict[str, Any] | None:
    """The divergence summary of RUN_DIR/replicas.json, or None when the run has no replica evidence."""
    path = Path(run_dir) / "replicas.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    partitions = {}
    for partition, info in sorted((data.get("partitions") or {}).items()):
        divergence = info.get("divergence") or {}
        partitions[partition] = {
            "diverged": bool(divergence.get("diverged")),
            "first_offset": divergence.get("first_offset"),
            "diverged_offsets": int(divergence.get("diverged_offsets") or 0),
            "log_end_offsets": divergence.get("log_end_offsets"),
            "differences": (divergence.get("differences") or [])[:20],
            "not_compared": divergence.get("not_compared") or {},  # broker -> why (its JVM was down)
        }
        if divergence.get("diverged"):
            partitions[partition]["explanation"] = explain(f"{data.get('topic')}-{partition}", divergence,
                                                           info.get("replicas") or {}, info.get("isr"))
    diverged = [p for p in partitions.values() if p["diverged"]]
    return {
        "diverged": bool(diverged),
        "diverged_offsets": sum(p["diverged_offsets"] for p in diverged),
        "first_offset": min((p["first_offset"] for p in diverged if p["first_offset"] is not None), default=None),
        "topic": data.get("topic"),
        "tool": data.get("tool"),
        "partitions": partitions,
    }


def _names(brokers: list[str]) -> str:
    ids = sorted(brokers, key=lambda b: (len(b), b))
    return ("broker " if len(ids) == 1 else "brokers ") + (" and ".join(ids) if len(ids) < 3 else ", ".join(ids))


def _cache(replica: dict[str, Any]) -> list[tuple[int, int]]:
    return [(int(e), int(s)) for e, s in replica.get("leader_epochs") or []]


def explain(name: str, divergence: dict[str, Any], replicas: dict[str, dict[str, Any]], isr: list[int] | None = None) -> str:
    """One sentence per diverged partition: where the replicas differ, who holds what at the first
    differing offset, and the leader epochs one side has and the other never had. That last part
    is KIP-279's signature: a replica that kept records of an epoch the leader never had, because
    the leader answered "where does epoch N end?" with the start of its own next epoch."""
    first, last = divergence.get("first_offset"), divergence.get("last_offset")
    count = int(divergence.get("diverged_offsets") or 0)
    span = (f"offsets {first}-{last}" if last is not None and last != first
            else f"offset {first}" if count == 1 else f"from offset {first}")  # replicas.json before last_offset
    text = f"{name}: {count} offset(s) differ ({span})"
    left_out = divergence.get("not_compared") or {}
    if left_out:
        text += " (not compared: " + "; ".join(f"broker {b}, {why}" for b, why in sorted(left_out.items())) + ")"
    diffs = divergence.get("differences") or []
    if not diffs:
        return text
    groups: dict[str, list[str]] = {}
    for broker, value in diffs[0]["values"].items():
        groups.setdefault(json.dumps(value), []).append(broker)
    sides = sorted(groups.items(), key=lambda kv: (len(kv[1]), sorted(kv[1])))  # the odd one out first
    held = ", ".join(f"{_names(b)} {'hold' if len(b) > 1 else 'holds'} "
                     f"{'nothing' if v == 'null' else 'value ' + v}" for v, b in sides)
    text += f"; at offset {first} {held}"
    everyone = [b for _, bs in sides for b in bs]
    caches = {b: _cache(replicas.get(b) or {}) for b in everyone}
    for _, odd in sides if len(sides) > 1 and all(caches.values()) else ():  # the odd one out first
        rest = [b for b in everyone if b not in odd]
        only = [(e, s) for e, s in caches[odd[0]]
                if all((e, s) in caches[b] for b in odd) and all((e, s) not in caches[b] for b in rest)]
        if only:
            epochs = ", ".join(f"epoch {e} from offset {s}" for e, s in only)
            text += (f". {_names(odd).capitalize()}'s leader-epoch cache {'has' if len(odd) == 1 else 'have'} {epochs}, which "
                     f"{_names(rest)} never had (theirs: {{{', '.join(f'{e}: {s}' for e, s in caches[rest[0]])}}})")
            break
    outside = sorted((b for b in everyone if isr is not None and int(b) not in isr), key=int)
    if outside:  # e.g. a follower whose fetcher died on the divergent batch (UnexpectedAppendOffsetException)
        text += f". {_names(outside).capitalize()} {'was' if len(outside) == 1 else 'were'} outside the ISR {sorted(isr or [])} when dumped"
    return text


def divergence_permitted(profile: dict[str, Any]) -> bool:
    return bool(profile.get("unclean.leader.election.enable"))


# 0.10.x-1.x followers with unclean election off refuse to truncate below their log end when the
# leader's log is shorter ("Exiting because log truncation is not allowed for partition queue-4,
# Current leader 1's latest offset 135 is less than replica 2's latest offset 208"), and on
# 0.10.2.2 then hang half shut down (KAFKA-4039). The line proves that a leader was elected with a
# shorter log than an in-sync follower's, which is KIP-101's precondition for loss; it does not
# prove that acknowledged records were lost (the follower's extra records may never have been
# committed), so it is evidence quoted with the verdict, never a verdict of its own.
_REFUSED = re.compile(r"truncation is not allowed for partition (\S+?)-(\d+), Current leader (\d+)'s latest offset (\d+) "
                      r"is less than replica (\d+)'s latest offset (\d+)")
MAX_LOG_BYTES = 64 << 20


def truncation_refusals(run_dir: Path | str, limit: int = 5) -> dict[str, Any] | None:
    """Each broker's 'log truncation is not allowed' line (count, and up to `limit` parsed), or None."""
    found: list[dict[str, Any]] = []
    for log in sorted(Path(run_dir).glob("brokers/*/server.log")):
        with open(log, "rb") as fh:
            text = fh.read(MAX_LOG_BYTES).decode("utf-8", "replace")
        for line in text.splitlines():
            m = _REFUSED.search(line)
            if m:
                found.append({"broker": int(log.parent.name) if log.parent.name.isdigit() else log.parent.name,
                              "time": line[1:24] if line.startswith("[") else None, "topic": m.group(1),
                              "partition": int(m.group(2)), "leader": int(m.group(3)), "leader_end": int(m.group(4)),
                              "replica": int(m.group(5)), "replica_end": int(m.group(6))})
    if not found:
        return None
    first = found[0]
    return {"count": len(found), "examples": found[:limit],
            "sentence": (f"broker {first['replica']} refused to truncate {first['topic']}-{first['partition']}: its new leader "
                         f"{first['leader']} ended at offset {first['leader_end']}, the follower at {first['replica_end']} "
                         f"({len(found)} such line(s), first at {first['time']}): a leader was elected with a shorter log than "
                         "an in-sync follower's (KIP-101's precondition for loss; on 0.10.x the follower then hangs, KAFKA-4039)")}
