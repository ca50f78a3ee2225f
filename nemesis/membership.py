"""`membership`: a broker's disk replaced under load (issue 36 item 4, its disk-replacement part).

An operator replaces a failed data disk: the broker is down, its log directories come back empty,
and it starts again with the same node id. The partitions it held must come back from the other
replicas; if it rejoins an ISR, or is elected, before it has caught up, acknowledged data is gone.
Kafka guards this with the broker epoch in AlterPartition (KIP-903, after KAFKA-14139) and, in
KRaft, with the directory ids of KIP-858; this package checks the guard under load.

Each start takes one broker (`--db-targets`: one, leader, controller, follower...), only while the
cluster is whole (every ISR full: one disk at a time, as operators replace them), SIGKILLs it (a
disk that fails takes its broker down with it), removes every partition directory under its data
directory, waits a seeded 0-5 s and starts it again:

- on a node that is also a KRaft controller (the default combined layout), the metadata log
  (`__cluster_metadata-0`) and `meta.properties` stay: the data disk is replaced, the metadata disk
  is not. Wiping a voter's metadata log under a static quorum is a Raft disk-loss case of its own
  (KIP-853), left to the `quorum` package;
- on a broker-only node (`--controllers N`) and before KRaft, everything goes, and a KRaft broker is
  formatted again with the cluster's id (a new directory id), as a new disk is.

The band is `disk-swap` ... `disk-swapped`, with what was removed (the partition directories by
name) and the new PID; then the package holds until the swapped broker answers for itself and every
ISR is full again (`disk-swap-settled`, with the seconds waited), so that the next swap never takes
the last copy. A loss after that is Kafka's: an empty replica let back into an ISR, or elected. Decommissioning a broker and adding one under a new node id (the rest of
item 4) are not built yet.
"""

from __future__ import annotations

import random
import time
from typing import Any

from harness.cluster.broker_config import DATA_DIR
from harness.history.faults import DISK_SWAP
from nemesis import steps
from nemesis.process import DB_TARGETS, ProcessNemesis
from nemesis.registry import Package
from nemesis.roll import under_replicated

PAUSE_S = (0.0, 5.0)
WHOLE_WAIT_S = 180.0
WHOLE = "disk-swap-settled"  # a point in time: the swapped broker answers and every ISR is full (or the wait gave up)
KEEP = ("__cluster_metadata-0", "meta.properties", "bootstrap.checkpoint")


class MembershipNemesis(ProcessNemesis):
    """A disk swap per start; a stop starts the broker if the start has not yet."""

    name = "membership"
    faults = (DISK_SWAP,)
    start_f, stop_f = DISK_SWAP.start, DISK_SWAP.stop
    replay_keys = ("target", "targets", "partition", "pause_s")

    def decide(self, look: Any, rng: random.Random, given: dict[str, Any]) -> dict[str, Any]:
        plan = super().decide(look, rng, given)
        plan["targets"] = plan["targets"][:1]  # one disk at a time
        return {**plan, "pause_s": round(given.get("pause_s") or rng.uniform(*PAUSE_S), 2)}

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        nodes, value, nobody = self.aim(plan)
        value["pause_s"] = plan.get("pause_s", 0.0)
        if nobody is not None:
            return self.skip(self.start_f, value, nobody)
        lagging = under_replicated(self.cluster)
        if lagging != {}:  # a second swap now could remove the last copy: no operator does that
            why = "no majority of brokers agrees on the ISRs" if lagging is None else f"under-replicated: {dict(list(lagging.items())[:6])}"
            return self.skip(self.start_f, value, f"the cluster is not whole ({why}); one disk at a time")
        node = nodes[0]
        whole = self.wipes_everything(node)
        value["wiped"] = "everything" if whole else "partition data (the metadata log and meta.properties stay)"
        value["pids"] = {str(node.node_id): node.pid_on_file()}
        self.record(self.start_f, value)
        self.victims[node.node_id] = steps.kill(node)
        keep = "" if whole else " ".join(f"! -name '{k}'" for k in KEEP)
        code, out = node.exec(f"cd {DATA_DIR} && find . -mindepth 1 -maxdepth 1 {keep} -printf '%f\\n' -exec rm -rf {{}} +")
        self.removed = sorted(line.strip() for line in out.splitlines() if line.strip())[:500] if code == 0 else [f"rm failed: {out[-300:]}"]
        time.sleep(float(plan.get("pause_s") or 0.0))
        self.undo_one(node, whole)
        self.wait_whole(node)
        return value

    def wait_whole(self, node: Any) -> None:
        """Hold this package until the swapped broker answers for itself and every ISR is full again, as
        an operator waits before the next disk (bounded): recorded as `whole` with the seconds waited.
        Why: a first sweep swapped brokers 2, 1 and 3 within 33 s at load ~30, while brokers took 30 s
        just to start, so no copy of queue-0 was left (run 20261126T021937-affeae, moved to
        store/ops-superseded): the fault itself destroyed the data, a false alarm against Kafka."""
        assert self.cluster is not None
        def whole() -> bool:
            views = self.cluster.broker_views()  # type: ignore[union-attr]
            return node.node_id in views and under_replicated(self.cluster) == {}
        # The heal ends the wait (it waits for full ISRs itself): a hold past its 60 s join of the fault
        # threads would leave the swap out of config.json's executed schedule (roll.py's step says more).
        polled = steps.poll(lambda: whole(), lambda ok: ok or self.stopping.is_set(), WHOLE_WAIT_S, 1.0)
        self.record(WHOLE, {"targets": [node.node_id], "whole": polled.value is True, "waited_s": round(polled.seconds, 2),
                            **({"ended_by": "heal"} if polled.ok and polled.value is not True else {})})

    def wipes_everything(self, node: Any) -> bool:
        """Everything goes (and a KRaft broker is formatted again) unless the node holds a KRaft
        controller's metadata log, which stays with `meta.properties` (see the module's doc)."""
        assert self.cluster is not None
        return not self.cluster.is_kraft or "controller" not in getattr(node, "roles", ())

    def undo_one(self, node: Any, whole: bool | None = None) -> None:
        assert self.cluster is not None
        whole = self.wipes_everything(node) if whole is None else whole
        fmt = self.cluster.cluster_id if (whole and self.cluster.is_kraft) else None
        pid = node.start_process(format_cluster_id=fmt) if fmt else steps.start(node, supervised_by=self, why="disk swap")
        self.victims.pop(node.node_id, None)
        self.record(self.stop_f, {"targets": [node.node_id], "pids": {str(node.node_id): pid}, "formatted": bool(fmt),
                                  "removed": getattr(self, "removed", [])})

    def teardown(self) -> dict[str, Any]:
        assert self.cluster is not None
        undone = sorted(self.victims)
        for node_id in undone:
            self.undo_one(self.cluster.node(node_id))
        return {"targets": undone}

    def hit(self, node: Any) -> int | None:  # not used: apply strikes and undoes in one go
        raise NotImplementedError

    def undo(self, node: Any) -> int | None:
        raise NotImplementedError


PACKAGES = (
    Package("membership", make=lambda s: MembershipNemesis(s["db_targets"]), settings=(DB_TARGETS,), heal_rank=21,
            requires=frozenset({"signals", "restart", "own_data"}),
            summary="a broker's data disk replaced: SIGKILL, its partition directories removed, started again with the same id"),
)
