"""Design 12 of the guided schedule (nemesis/guided/scheduler.py): a cut made by a partition
alone is struck at once, at its partition's leader, by kill or pause; and the `leader` target
aimed at a partition (nemesis/targets.py). Observations are fed by hand."""

from __future__ import annotations

import random

from nemesis.guided.risk import AtRisk
from nemesis.guided.scheduler import STRIKE_WITHIN_S, GuidedScheduler
from nemesis.targets import Roles, leader_node


class _Nemesis:
    def __init__(self, **attrs) -> None:  # type: ignore[no-untyped-def]
        self.__dict__.update(attrs)


NEMESES = {"kill": _Nemesis(targets=("one", "leader", "controller")), "partition": _Nemesis(shapes=("one", "halves")),
           "pause": _Nemesis(targets=("one", "leader"))}


class _Watch:
    topic = "queue"

    def __init__(self) -> None:
        self.sites: list = []

    def decision_state(self) -> str:
        return "partition|isr3|trunc-hw"

    def take_fresh(self) -> list[str]:
        return []

    def take_cut_sites(self) -> list:
        new, self.sites = self.sites, []
        return new


def _scheduler() -> tuple[GuidedScheduler, _Watch, object]:
    s = GuidedScheduler(NEMESES, 60.0, 10.0, 3, version="x")
    for p in NEMESES:
        s._decide_at[p] = 50.0  # no decision at a delay during the test
    watch = _Watch()
    return s, watch, type("O", (), {"watch": watch})()


def test_a_cut_by_a_partition_alone_is_struck_at_its_leader_at_once() -> None:
    s, watch, observer = _scheduler()
    watch.sites = [(3, 2, 1, ("partition",))]  # queue-3: follower 2 truncated, kept from leader 1 by a partition
    event = s.next("kill", 0.0, observer)
    assert event is not None and event.action == "start" and event.package == "kill"
    assert event.params == {"target": "leader", "partition": "queue-3"}
    d = s.decisions[-1]
    assert d["on"] == "cut" and d["action"] == "start:kill:leader" and "queue-3" in d["why"]
    assert s.strikes == 1 and s._tokens["kill"] < 1.0  # paid from its budget, as a reaction


def test_only_partition_cuts_that_are_fresh_are_struck_and_each_once() -> None:
    s, watch, _ = _scheduler()
    watch.sites = [(1, 2, 3, ("kill",)), (2, 3, 1, ("kill", "partition"))]  # the leader is down already
    assert s._strike_site("kill", 0.0, watch) is None and s._sites == []
    watch.sites = [(4, 1, 2, ("partition",))]
    assert s._strike_site("partition", 0.0, watch) is None  # the partition package does not strike
    assert s._strike_site("kill", STRIKE_WITHIN_S + 0.1, watch) is None  # read too long ago: dropped
    watch.sites = [(5, 1, 2, ("partition",))]
    assert s._strike_site("kill", 1.0, watch) == "queue-5"
    assert s._strike_site("pause", 1.0, watch) is None  # struck once


def test_a_package_holding_a_fault_leaves_the_strike_to_the_next() -> None:
    s, watch, observer = _scheduler()
    s.held["kill"] = [0.0]
    watch.sites = [(6, 1, 3, ("partition",))]
    assert s._strike_site("kill", 1.0, watch) is None
    event = s.next("pause", 1.0, observer)
    assert event is not None and event.package == "pause" and event.params == {"target": "leader", "partition": "queue-6"}


def test_the_risk_records_where_each_cut_was() -> None:
    risk = AtRisk()
    risk.acked({4: 100})
    risk.fetches(4, 2, 1, 10.0)
    risk.truncated(4, 2, 90, 10.2)
    risk.look({"partition": {2}}, 10.5)  # follower 2 on one side, its leader 1 on the other
    assert risk.cuts == [("partition",)] and risk.cut_sites == [(4, 2, 1, ("partition",))]


def test_a_leader_start_aimed_at_a_partition_hits_that_partition_s_leader() -> None:
    nodes = {i: f"node{i}" for i in (1, 2, 3)}
    cluster = type("C", (), {"node": lambda self, i: nodes[i]})()
    roles = Roles(topic="queue", leaders={0: 1, 1: 2, 2: 3, 3: -1})
    for seed in range(20):
        aimed = {"partition": "queue-2"}
        assert leader_node(cluster, roles, random.Random(seed), aimed) == "node3" and aimed["partition"] == "queue-2"
    assert leader_node(cluster, roles, random.Random(0), {"partition": "queue-3"}) is None  # leaderless now
    assert leader_node(cluster, roles, random.Random(0), {"partition": "queue-9"}) is None  # not in the metadata
    drawn = {leader_node(cluster, roles, random.Random(s), {}) for s in range(30)}
    assert drawn >= {"node1", "node2", "node3"}  # not aimed: a random partition's leader, as before
