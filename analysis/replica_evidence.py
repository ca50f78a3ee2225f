"""replica-divergence: evidence from the brokers' own logs rather than from the clients' history.

After a scenario, `harness.cluster.replicas` dumps every replica's log with Kafka's DumpLogSegments and
writes `replicas.json`. Replicas that, once healed, hold different values at the same offset have
diverged: Kafka's replication promises that followers converge on the leader's log. Only unclean
leader election gives that up (KIP-101 appendix (a)), so divergence is forbidden everywhere else.
A replica that is merely shorter is lagging, not diverged.
"""

from __future__ import annotations

import json
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
        }
    diverged = [p for p in partitions.values() if p["diverged"]]
    return {
        "diverged": bool(diverged),
        "diverged_offsets": sum(p["diverged_offsets"] for p in diverged),
        "first_offset": min((p["first_offset"] for p in diverged if p["first_offset"] is not None), default=None),
        "topic": data.get("topic"),
        "tool": data.get("tool"),
        "partitions": partitions,
    }


def divergence_permitted(profile: dict[str, Any]) -> bool:
    return bool(profile.get("unclean.leader.election.enable"))
