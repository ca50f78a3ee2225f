"""A fault whose target resolves to no broker is recorded as skipped, with why, never as a start
with empty targets (issue 21: on 0.10.2.2 the role lookup found no leader from 90 s on, and the
leader-targeted kills and cuts were recorded as faults that hit nobody). No Docker: the cluster is
a stand-in whose metadata names no leader, and whose brokers refuse any command."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from analysis.explain.timeline import faults_from
from harness.cluster.metadata_views import BrokerView
from harness.history.faults import SKIPPED
from nemesis.partition import PacketLossNemesis, PartitionNemesis
from nemesis.process import KillNemesis, PauseNemesis


@dataclass
class Broker:
    node_id: int
    hits: list[str]

    def pid_on_file(self) -> int:
        return 100 + self.node_id

    def kill_process(self) -> int:
        self.hits.append(f"kill {self.node_id}")
        return 100 + self.node_id

    def start_process(self) -> int:
        return 100 + self.node_id

    def exec(self, command: str):  # any network rule would come here
        raise AssertionError(f"broker {self.node_id} was touched: {command}")


@dataclass
class Cluster:
    """`leaders`: partition -> leader id as the metadata gives it ({}: no majority agrees, as the
    0.10.2.2 run's role lookup returned)."""
    leaders: dict[int, int] = field(default_factory=dict)
    controller: int | None = None
    hits: list[str] = field(default_factory=list)
    answering: tuple[int, ...] = (1, 2, 3)

    def __post_init__(self) -> None:
        self.brokers = [Broker(i, self.hits) for i in (1, 2, 3)]

    def node(self, node_id: int) -> Broker:
        return self.brokers[node_id - 1]

    def active_controller(self) -> Broker | None:
        return self.node(self.controller) if self.controller is not None else None

    def broker_views(self) -> dict[int, BrokerView]:
        """Every broker answers with the same view (`answering` of them; none: all down or hung)."""
        topics = {"queue": {p: {"leader": leader, "replicas": [1, 2, 3], "isr": [1, 2, 3]} for p, leader in self.leaders.items()}}
        return {i: BrokerView(i, (1, 2, 3), topics) for i in self.answering}


class Events(list):
    def nemesis(self, f: str, value: dict) -> None:
        self.append((f, value))


def test_a_kill_of_the_leader_with_no_leader_in_the_metadata_is_skipped_with_the_reason() -> None:
    cluster, events = Cluster(), Events()
    kill = KillNemesis(("leader",)).setup(cluster, events, "queue")  # type: ignore[arg-type]
    value = kill.invoke("start", {}, random.Random(1))
    assert events == [(SKIPPED, value)]
    assert value["skipped"] == "no leader of topic queue found in the metadata (the brokers that answered ([1, 2, 3]) do not list it)"
    assert value["fault"] == "kill" and value["target"] == "leader" and value["targets"] == []
    assert cluster.hits == [] and kill.victims == {}
    # The schedule keeps it as it was, so that a replay skips it too, and says why.
    replayed = kill.invoke("start", kill.replay_params(value), random.Random(1))
    assert replayed["skipped"] == "the replayed event names no broker"


def test_brokers_that_do_not_answer_are_named_as_the_reason() -> None:
    # As on 0.10.2.2 (issue 21): brokers hung in a shutdown that never ends (KAFKA-4039) answer nothing.
    cluster, events = Cluster(leaders={0: 1}, answering=()), Events()
    value = KillNemesis(("leader",)).setup(cluster, events, "queue").invoke("start", {}, random.Random(0))  # type: ignore[arg-type]
    assert value["skipped"] == "no leader of topic queue found in the metadata (no broker answered a metadata request)"


def test_brokers_that_disagree_are_named_as_the_reason() -> None:
    cluster, events = Cluster(leaders={0: 1}), Events()
    views = cluster.broker_views()
    views[3] = BrokerView(3, (1, 2, 3), {"queue": {0: {"leader": 2, "replicas": [1, 2, 3], "isr": [2]}}})
    del views[1]  # 2 and 3 answer and disagree: no majority
    cluster.broker_views = lambda: views  # type: ignore[method-assign]
    value = KillNemesis(("leader",)).setup(cluster, events, "queue").invoke("start", {}, random.Random(0))  # type: ignore[arg-type]
    assert value["skipped"].endswith("(no majority of the brokers that answered ([2, 3]) agrees on its partitions)")


def test_a_leaderless_partition_and_a_missing_controller_are_named() -> None:
    cluster, events = Cluster(leaders={0: -1}), Events()
    pause = PauseNemesis(("leader", "controller")).setup(cluster, events, "queue")  # type: ignore[arg-type]
    assert pause.invoke("start", {"target": "leader"}, random.Random(0))["skipped"] == "partition queue-0 has no leader in the metadata"
    assert pause.invoke("start", {"target": "controller"}, random.Random(0))["skipped"] == "no active controller found in the metadata"
    assert [f for f, _ in events] == [SKIPPED, SKIPPED]


def test_a_broker_already_down_is_not_killed_twice_and_the_skip_says_so() -> None:
    cluster, events = Cluster(), Events()
    kill = KillNemesis(("one",)).setup(cluster, events, "queue")  # type: ignore[arg-type]
    first = kill.invoke("start", {"target": "one", "targets": [2]}, random.Random(0))
    second = kill.invoke("start", {"target": "one", "targets": [2]}, random.Random(0))
    assert first["targets"] == [2] and "skipped" not in first and cluster.hits == ["kill 2"]
    assert second["skipped"] == "every broker chosen ([2]) is already hit by kill"
    assert [f for f, _ in events] == ["kill", SKIPPED]


def test_a_cut_or_loss_aimed_at_nobody_is_skipped_and_touches_no_broker() -> None:
    cluster, events = Cluster(), Events()
    part = PartitionNemesis(("leader",)).setup(cluster, events, "queue")  # type: ignore[arg-type]
    value = part.invoke("start", {}, random.Random(3))
    assert value["skipped"].startswith("no leader of topic queue") and value["shape"] == "leader"
    assert value["fault"] == "start-partition" and value["targets"] == [] and part.active is None
    again = part.invoke("start", part.replay_params(value), random.Random(3))
    assert again["skipped"] == "the replayed event names no broker"
    loss = PacketLossNemesis(target="controller").setup(cluster, events, "queue")  # type: ignore[arg-type]
    assert loss.invoke("start", {}, random.Random(0))["skipped"] == "no active controller found in the metadata"
    assert loss.active is False
    assert [f for f, _ in events] == [SKIPPED] * 3


def test_the_timeline_draws_no_band_for_a_skipped_fault() -> None:
    cluster, events = Cluster(), Events()
    KillNemesis(("leader",)).setup(cluster, events, "queue").invoke("start", {}, random.Random(1))  # type: ignore[arg-type]
    nemesis = [{"t": 2.0, "f": f, "value": v} for f, v in events] + [{"t": 5.0, "f": "restart", "value": {"targets": []}}]
    faults, markers = faults_from(nemesis, end_s=10.0)
    assert faults == []
    assert [(m["t"], m["f"]) for m in markers] == [(2.0, SKIPPED)]
