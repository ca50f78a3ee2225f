"""The power nemesis's bookkeeping without Docker: what it refuses, what order it cuts in, what it records."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from harness.errors import HarnessError
from nemesis.power import WORST_CASE, PowerNemesis, loss_model
from nemesis.runner import build_nemeses
from tests.power.fakes import Events


@dataclass
class FakeNode:
    node_id: int
    log: list[str]
    running: bool = True

    def kill_process(self) -> int | None:
        self.log.append(f"kill {self.node_id}")
        self.running = False
        return 100 + self.node_id

    def start_process(self) -> int:
        self.log.append(f"start {self.node_id}")
        return 200 + self.node_id

    def pid_on_file(self) -> int:
        return 100 + self.node_id


@dataclass
class FakeDisk:
    node: FakeNode
    log: list[str]
    synced: int = 0

    def drop(self) -> dict:
        assert not self.node.running, "a disk dropped its cache while its JVM still ran"
        self.log.append(f"drop {self.node.node_id}")
        return {"dropped_bytes": 10 * self.node.node_id, "dropped_files": 1, "dropped_entries": 0, "seconds": 0.01}

    def sync_all(self) -> dict:
        self.synced += 1
        return {}


@dataclass
class FakeCluster:
    log: list[str] = field(default_factory=list)
    lossy_writeback_s: float | None = None

    def __post_init__(self) -> None:
        self.brokers = [FakeNode(i, self.log) for i in (1, 2, 3)]
        self.disks = {n.node_id: FakeDisk(n, self.log) for n in self.brokers}

    def node(self, node_id: int) -> FakeNode:
        return self.brokers[node_id - 1]

    def active_controller(self) -> FakeNode:
        return self.brokers[0]


def test_power_needs_every_broker_on_a_lossy_mount() -> None:
    cluster = FakeCluster()
    del cluster.disks[2]
    with pytest.raises(HarnessError) as caught:
        PowerNemesis().setup(cluster)  # type: ignore[arg-type]
    assert "[2]" in caught.value.message and "lossy_data=True" in caught.value.hint


def test_a_cut_kills_every_target_before_any_disk_drops_and_records_each_brokers_loss() -> None:
    cluster, events = FakeCluster(), Events()
    power = PowerNemesis().setup(cluster, events)  # type: ignore[arg-type]
    assert all(d.synced == 1 for d in cluster.disks.values()), "the cluster's setup counts as on disk"
    value = power.invoke("start", {"target": "all"}, random.Random(0))
    assert sorted(cluster.log[:3]) == ["kill 1", "kill 2", "kill 3"]  # together, in any order
    assert cluster.log[3:] == ["drop 1", "drop 2", "drop 3"]
    assert value["dropped"]["2"]["dropped_bytes"] == 20 and value["dropped_bytes"] == 60 and value["dropped_files"] == 3
    assert value["model"] == WORST_CASE and events.events[0][0] == "power-off"
    again = power.invoke("start", {"target": "one"}, random.Random(0))
    assert again["targets"] == [], "a broker without power cannot lose it twice"
    assert "already hit by power" in again["skipped"]  # recorded as skipped, with why: not a cut of nobody
    back = power.invoke("stop", {}, random.Random(0))
    assert back["targets"] == [1, 2, 3] and [f for f, _ in events.events] == ["power-off", "nemesis-skipped", "power-on"]


def test_the_loss_model_is_named() -> None:
    assert loss_model(None) == WORST_CASE
    assert "30 s" in loss_model(30.0)


def test_power_is_a_package_with_its_own_targets() -> None:
    power = build_nemeses(["power"])["power"]
    assert power.targets == ("one", "leader", "controller", "majority", "all")


def test_power_targets_can_be_narrowed_and_are_checked() -> None:
    assert build_nemeses(["power"], power_targets=("all",))["power"].targets == ("all",)
    with pytest.raises(HarnessError):
        build_nemeses(["power"], power_targets=("everyone",))
