"""The `heir` package without Docker, on test_nemesis_flap's stand-in cluster (three brokers, every
partition assigned [1, 2, 3], partitions 0-2 led by 1, 2, 3, the lowest live id the controller):
which pair it kills and in which order, what it records, that it keeps away from a controller heir,
that it restarts both, replays the recorded pair and delays, and says why when it hits nobody."""

from __future__ import annotations

import random

from harness.history.faults import KILL, SKIPPED
from nemesis.heir import HEIR_RULE, HeirNemesis, heirs
from nemesis.runner import build_nemeses
from nemesis.schedule import PACKAGES
from nemesis.targets import Roles
from tests.test_nemesis_flap import Cluster, Events, fast


def heir(cluster: Cluster, events: Events) -> HeirNemesis:
    nemesis = HeirNemesis(gap_range_s=(0.0, 0.01), down_range_s=(0.0, 0.01))
    return fast(nemesis, cluster).setup(cluster, events, "queue")  # type: ignore[arg-type]


def test_the_heir_is_the_first_in_sync_replica_after_the_leader_in_assignment_order():
    look = Roles(topic="queue", leaders={0: 2, 1: 3, 2: 1, 3: 1},
                 isrs={0: [1, 2, 3], 1: [2, 3, 1], 2: [1, 3, 2], 3: [1, 2]},
                 replicas={0: [2, 3, 1], 1: [1, 3, 2], 2: [1, 3, 2], 3: [1, 2, 3]})
    # partition 3 has no survivor in sync: killing two of its two in-sync replicas elects nobody
    assert heirs(look) == {0: (2, 3), 1: (3, 1), 2: (1, 3)}
    assert "heir" in PACKAGES and set(build_nemeses(["heir"])) == {"heir"}


def test_heir_kills_the_leader_then_its_heir_and_restarts_both():
    cluster, events = Cluster(), Events()
    value = heir(cluster, events).invoke("start", {}, random.Random(1))
    # partitions 1 and 2 have heir 1, the controller: only partition 0 (leader 1, heir 2) is calm
    assert value["partition"] == "queue-0" and value["targets"] == [1, 2]
    assert cluster.hits == [("kill", 1), ("kill", 2), ("start", 1), ("start", 2)] and cluster.alive == {1, 2, 3}
    kills = [v for f, v in events if f == KILL.start]
    assert [k["target"] for k in kills] == ["leader", "heir"]
    assert "leader:queue-0" in kills[0]["roles"]["1"] and "controller" in kills[0]["roles"]["1"]
    assert kills[1]["heir_of"] == 1 and kills[1]["rule"] == HEIR_RULE and kills[1]["after_s"] >= 0
    assert [v["targets"] for f, v in events if f == KILL.stop] == [[1], [2]]
    assert 0 <= value["gap_s"] <= 0.01 and 0 <= value["down_s"] <= 0.01


def test_heir_replays_the_recorded_pair_and_delays_whoever_leads_now():
    cluster, events = Cluster(), Events()
    params = {"targets": [3, 1], "partition": "queue-2", "gap_s": 0.0, "down_s": 0.0}
    value = heir(cluster, events).invoke("start", params, random.Random(9))
    assert value["targets"] == [3, 1] and value["replay"] == "recorded targets"
    assert cluster.hits[:2] == [("kill", 3), ("kill", 1)] and (value["gap_s"], value["down_s"]) == (0.0, 0.0)


def test_heir_hits_nobody_without_a_full_isr_and_says_why():
    cluster, events = Cluster(), Events()
    cluster.isrs = {p: [leader] for p, leader in cluster.leaders.items()}
    value = heir(cluster, events).invoke("start", {}, random.Random(1))
    assert cluster.hits == [] and value["targets"] == []
    assert events[-1][0] == SKIPPED and "all three replicas in sync" in events[-1][1]["skipped"]


def test_heir_is_seeded():
    def once(seed: int) -> tuple:
        cluster, events = Cluster(), Events()
        cluster.active_controller = lambda: None  # no controller known: all three partitions are calm
        value = heir(cluster, events).invoke("start", {}, random.Random(seed))
        return value["partition"], value["targets"], value["gap_s"], value["down_s"]

    assert once(5) == once(5)
    assert len({once(s)[0] for s in range(12)}) == 3  # every partition can be chosen


def test_each_kill_records_only_its_own_brokers_roles():
    cluster, events = Cluster(), Events()
    value = heir(cluster, events).invoke("start", {}, random.Random(1))
    kills = [v for f, v in events if f == KILL.start]
    assert [sorted(k["roles"]) for k in kills] == [["1"], ["2"]]
    assert sorted(value["roles"]) == ["1", "2"] and "leader:queue-1" in value["roles"]["2"]
