"""Faults on a cluster with dedicated KRaft controllers (`run --controllers N`): a `controller`
partition cuts the active controller off from every node, its quorum too, and the heal undoes the
rules on every node. Found by the first real run with --controllers 3 (2026-11-25, run
20261125T231440-485a17): the heal cleared the brokers' rules only, so the cut controller kept
dropping the brokers' packets, and broker 3, restarted during the cut, could not register for 60 s
and exited. No Docker here: the nodes are stand-ins that record each iptables command."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from harness.cluster.metadata_views import BrokerView
from nemesis.partition import PartitionNemesis


@dataclass(eq=False)
class Node:
    node_id: int
    log: list[tuple[int, str]]

    @property
    def hostname(self) -> str:
        return f"node-{self.node_id}"

    @property
    def address(self) -> str:
        return f"10.0.0.{self.node_id % 250}"

    def exec(self, command: str):
        self.log.append((self.node_id, command))
        return 0, ""


@dataclass
class Cluster:
    log: list[tuple[int, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.brokers = [Node(i, self.log) for i in (1, 2, 3)]
        self.controllers = [Node(i, self.log) for i in (101, 102, 103)]

    @property
    def nodes(self) -> list[Node]:
        return self.brokers + self.controllers

    def node(self, node_id: int) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)

    def active_controller(self) -> Node:
        return self.node(102)

    def broker_views(self) -> dict[int, BrokerView]:
        topics = {"queue": {0: {"leader": 1, "replicas": [1, 2, 3], "isr": [1, 2, 3]}}}
        return {i: BrokerView(i, (1, 2, 3), topics) for i in (1, 2, 3)}


class Events(list):
    def nemesis(self, f: str, value: dict) -> None:
        self.append((f, value))


def test_a_cut_controller_is_cut_from_its_quorum_too_and_the_heal_reaches_every_node():
    cluster = Cluster()
    partition = PartitionNemesis(("controller",)).setup(cluster, Events(), "queue")  # type: ignore[arg-type]
    value = partition.invoke("start", {"shape": "controller"}, random.Random(1))
    assert value["targets"] == [102] and value["roles"] == {"102": ["controller"]}
    grudge = {int(k): set(v) for k, v in value["grudge"].items()}
    assert grudge[102] == {1, 2, 3, 101, 103}  # a real isolation: the other controllers elect a new leader
    assert grudge[101] == grudge[103] == grudge[1] == {102}
    cut = {node for node, command in cluster.log if "-j DROP" in command}
    assert cut == {1, 2, 3, 101, 102, 103}
    cluster.log.clear()
    partition.teardown()
    healed = {node for node, command in cluster.log if "-F KH_PART_IN" in command}
    assert healed == {1, 2, 3, 101, 102, 103}


def test_a_replay_that_names_a_dedicated_controller_strikes_it_again():
    cluster = Cluster()
    partition = PartitionNemesis(("controller",)).setup(cluster, Events(), "queue")  # type: ignore[arg-type]
    nodes, note = partition.replay_nodes({"targets": [101]})
    assert [n.node_id for n in nodes] == [101] and note == "recorded targets"
