"""Power loss: the brokers stop at once and their disks lose what was never made durable.

Kafka acknowledges a write before it reaches the disk (by default it never fsyncs: replication
is its durability), and every other fault here keeps the page cache. This one does not. It
needs the data directories on lossy mounts (`KafkaCluster(lossy_data=True)`, which a run asks
for when `power` is among its nemeses; harness/cluster/lossy_mount.py, docs/power.md).

`power-off`: SIGKILL the JVMs of the targets together (one power feed), wait until they are
gone, then drop on each one's mount every byte written since its file's last fsync and every
name created, renamed or removed since its directory's last fsync. The event is recorded once
the cut is done, with per broker `dropped_bytes`, `dropped_files` (files cut back or vanished)
and `dropped_entries` (names undone), and the loss model used. `power-on`: the JVMs restart on
the same directories. Targets: one, leader, controller, majority, all: correlated loss, a
majority or all of the replicas at once, is what replication alone cannot cover.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError
from harness.history.faults import POWER
from nemesis import steps
from nemesis.process import ProcessNemesis
from nemesis.targets import NODE_TARGETS
from nemesis.registry import Package, Setting

if TYPE_CHECKING:
    from harness.cluster import KafkaCluster
    from nemesis.base import NemesisRecorder

POWER_TARGETS = ("one", "leader", "controller", "majority", "all")
WORST_CASE = "worst case: everything not fsynced is lost"


def loss_model(writeback_s: float | None) -> str:
    """How much a cut takes, in words for the reports."""
    if writeback_s is None:
        return WORST_CASE
    return f"kernel writeback: data and names dirty for {writeback_s:g} s or more had reached the disk"


def lossy_disks(cluster: "KafkaCluster", package: str) -> dict[int, Any]:
    """Every broker's lossy mount (harness/cluster/lossy_mount.py), or HarnessError naming the brokers without one."""
    disks = getattr(cluster, "disks", {})
    bare = [b.node_id for b in cluster.brokers if b.node_id not in disks]
    if bare:
        raise HarnessError(f"the {package} nemesis needs every broker's data directory on a lossy mount; brokers {bare} have none.",
                           hint=f"start the cluster with KafkaCluster(lossy_data=True); a run does so when --nemesis names {package}")
    return disks


class PowerNemesis(ProcessNemesis):
    name, faults = "power", (POWER,)
    start_f, stop_f = POWER.start, POWER.stop
    option_names = ("targets", "model")

    def __init__(self, targets: tuple[str, ...] = POWER_TARGETS) -> None:
        super().__init__(targets)
        self.model = WORST_CASE

    def setup(self, cluster: "KafkaCluster", recorder: "NemesisRecorder | None" = None, topic: str | None = None) -> "PowerNemesis":
        super().setup(cluster, recorder, topic)
        disks = lossy_disks(cluster, "power")
        self.model = loss_model(cluster.lossy_writeback_s)
        # The cluster's formatting and topic creation count as long on disk: a machine that has
        # run for a while has flushed its setup. Only what the workload writes is at stake.
        for disk in disks.values():
            disk.sync_all()
        return self

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        nodes, value, nobody = self.aim(plan)
        if nobody is not None:  # nobody to cut: recorded as skipped with why, never as a cut that hit nobody
            value["model"] = self.model
            return self.skip(self.start_f, value, nobody)
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:  # together: one power feed
            pids = list(pool.map(steps.kill, nodes))
        value["pids"] = {str(n.node_id): pid for n, pid in zip(nodes, pids)}
        for node, pid in zip(nodes, pids):
            self.victims[node.node_id] = pid
        # Every JVM is gone before any disk loses its cache: nothing writes after the cut.
        value["dropped"] = {str(n.node_id): self.cluster.disks[n.node_id].drop() for n in nodes}
        value["dropped_bytes"] = sum(d["dropped_bytes"] for d in value["dropped"].values())
        value["dropped_files"] = sum(d["dropped_files"] for d in value["dropped"].values())
        value["model"] = self.model
        self.record(self.start_f, value)
        return value

    def undo(self, node: Any) -> int | None:
        # On the same directory, as after power comes back; through the supervisor, since a
        # ZooKeeper-era broker started within its old session's 6 s is refused and exits.
        return steps.start(node, supervised_by=self, why="power: back on")


POWER_TARGETS_SETTING = Setting("power_targets", POWER_TARGETS, recorded="targets", choices=NODE_TARGETS,
                                help=f"Power-loss targets: {', '.join(POWER_TARGETS)} (nemesis power).")
# By default with majority and all: correlated loss.
PACKAGES = (Package("power", make=lambda s: PowerNemesis(s["power_targets"]), settings=(POWER_TARGETS_SETTING,),
                    heal_rank=40, requires=frozenset({"signals", "restart", "lossy_data"}),
                    summary="cut a broker's power: what it had not fsynced is lost; power on at stop"),)
