"""The compound packages (flap, rejoin) and the follower/rejoined targets, without Docker: a
stand-in cluster elects the next in-sync replica when a leader dies, drops the dead from ISRs, and
lets a restarted broker back into the ISRs one look later. Checked: what is hit, in which order,
what is recorded (targets, roles, the partition, the steps), that the same seed repeats it, that a
replay hits the recorded brokers with the recorded delays, and why nobody is hit when nobody can be."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import pytest

from harness.cluster.metadata_views import BrokerView
from harness.history.faults import KILL, SKIPPED
from nemesis.flap import FlapNemesis, RejoinNemesis
from nemesis.runner import build_nemeses
from nemesis.schedule import PACKAGES, build_schedule
from nemesis.observer import Observer
from nemesis.targets import NODE_TARGETS, choose_nodes


@dataclass
class Broker:
    node_id: int
    cluster: "Cluster"

    def pid_on_file(self) -> int:
        return 100 + self.node_id

    def kill_process(self) -> int | None:
        self.cluster.hits.append(("kill", self.node_id))
        alive = self.node_id in self.cluster.alive
        self.cluster.alive.discard(self.node_id)
        return 100 + self.node_id if alive else None

    def start_process(self) -> int:
        if self.node_id not in self.cluster.alive:
            self.cluster.hits.append(("start", self.node_id))
            self.cluster.alive.add(self.node_id)
            self.cluster.catching_up.add(self.node_id)
        return 100 + self.node_id


@dataclass
class Cluster:
    """Three brokers, partitions 0-2 led by 1, 2, 3. A dead leader is replaced at the next look by the
    next live in-sync replica (in replica order); a restarted broker is back in the ISRs one look later."""
    leaders: dict[int, int] = field(default_factory=lambda: {0: 1, 1: 2, 2: 3})
    elect: bool = True
    hits: list[tuple[str, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.brokers = [Broker(i, self) for i in (1, 2, 3)]
        self.alive = {1, 2, 3}
        self.isrs = {p: [1, 2, 3] for p in self.leaders}
        self.catching_up: set[int] = set()

    def node(self, node_id: int) -> Broker:
        return self.brokers[node_id - 1]

    def active_controller(self) -> Broker:
        return self.node(min(self.alive or {1}))

    def broker_views(self) -> dict[int, BrokerView]:
        for i in sorted(self.catching_up):  # back in every ISR at the look after its restart
            self.catching_up.discard(i)
            self.isrs = {p: sorted(set(isr) | {i}) for p, isr in self.isrs.items()}
            return self._views()
        self.isrs = {p: [i for i in isr if i in self.alive] for p, isr in self.isrs.items()}
        for p, leader in self.leaders.items():
            if leader not in self.alive and self.elect:
                self.leaders[p] = next((i for i in self.isrs[p] if i in self.alive), -1)
        return self._views()

    def _views(self) -> dict[int, BrokerView]:
        topics = {"queue": {p: {"leader": leader, "replicas": [1, 2, 3], "isr": self.isrs[p]}
                            for p, leader in self.leaders.items()}}
        return {i: BrokerView(i, tuple(sorted(self.alive)), topics) for i in sorted(self.alive)}


class Events(list):
    def nemesis(self, f: str, value: dict) -> None:
        self.append((f, value))


def fast(nemesis, cluster):
    nemesis.poll_s = 0.0
    nemesis.live_views = cluster.broker_views  # the stand-in's dead brokers simply do not answer
    return nemesis


def flap(cluster: Cluster, events: Events) -> FlapNemesis:
    return fast(FlapNemesis(window_s=1.0, max_delay_s=0.01), cluster).setup(cluster, events, "queue")  # type: ignore[arg-type]


def test_the_packages_are_known_and_scheduled_like_the_others():
    assert {"flap", "rejoin"} <= set(PACKAGES) and {"follower", "rejoined"} <= set(NODE_TARGETS)
    assert set(build_nemeses(["flap", "rejoin"])) == {"flap", "rejoin"}
    events = build_schedule(["kill", "flap"], 120, 10, seed=3)
    assert [e for e in events if e.package == "kill"] == build_schedule(["kill"], 120, 10, seed=3)


def test_flap_kills_the_leader_then_the_new_leader_and_records_both_with_roles():
    cluster, events = Cluster(), Events()
    value = flap(cluster, events).invoke("start", {"restart_first": False}, random.Random(2))
    first, second = value["targets"]
    partition = int(value["partition"].rsplit("-", 1)[1])
    assert first == {0: 1, 1: 2, 2: 3}[partition] and second != first and second == cluster.leaders[partition]
    assert cluster.hits == [("kill", first), ("kill", second)]
    kills = [v for f, v in events if f == KILL.start]
    assert [k["targets"] for k in kills] == [[first], [second]]
    assert kills[0]["target"] == "leader" and f"leader:queue-{partition}" in kills[0]["roles"][str(first)]
    assert kills[1]["target"] == "new-leader" and f"leader:queue-{partition}" in kills[1]["roles"][str(second)]
    assert 0 <= value["after_s"] < 1.0 and value["restart_first"] is False


def test_flap_stop_restarts_both_and_the_coin_restarts_the_first_during_the_second_election():
    cluster, events = Cluster(), Events()
    nemesis = flap(cluster, events)
    value = nemesis.invoke("start", {"restart_first": True}, random.Random(2))
    first, second = value["targets"]
    assert cluster.hits[-1] == ("start", first) and set(nemesis.victims) == {second}
    assert events[-1][0] == KILL.stop and events[-1][1]["targets"] == [first]
    assert nemesis.invoke("stop", {}, random.Random(2))["targets"] == [second]
    assert cluster.alive == {1, 2, 3}


def test_flap_is_seeded_and_replays_the_recorded_brokers_and_delay():
    runs = []
    for _ in range(2):
        cluster, events = Cluster(), Events()
        value = flap(cluster, events).invoke("start", {}, random.Random(7))
        runs.append((value["targets"], value["partition"], value["restart_first"], cluster.hits))
    assert runs[0] == runs[1]
    # Replayed in a cluster whose leaders differ: the recorded brokers are hit, in order, after after_s.
    nemesis = flap(Cluster(), Events())
    params = nemesis.replay_params({**value, "after_s": 0.05})
    other, events = Cluster(leaders={0: 3, 1: 3, 2: 3}), Events()
    replayed = flap(other, events).invoke("start", params, random.Random(99))
    assert replayed["targets"] == value["targets"] and other.hits[:2] == [("kill", t) for t in value["targets"]]
    assert all(v.get("replay") == "recorded targets" for f, v in events if f == KILL.start)
    assert 0.05 <= replayed["after_s"] < 0.5


def test_flap_with_no_leader_is_skipped_and_with_no_new_leader_kills_only_the_first():
    cluster, events = Cluster(leaders={0: -1}, elect=False), Events()
    value = flap(cluster, events).invoke("start", {}, random.Random(1))
    assert events == [(SKIPPED, value)] and "has no leader" in value["skipped"] and cluster.hits == []
    cluster, events = Cluster(elect=False), Events()
    value = flap(cluster, events).invoke("start", {}, random.Random(1))
    assert len(value["targets"]) == 1 and value["after_s"] is None
    assert [f for f, _ in events] == [KILL.start, SKIPPED]
    assert events[1][1]["skipped"].startswith(f"no new leader of {value['partition']} within 1.0 s")
    # Leaders alone in their ISRs (as on 1.1.1, seed 1, 20 s after a flap): no kill, and why.
    cluster, events = Cluster(), Events()
    cluster.isrs = {0: [1], 1: [2], 2: [3]}
    value = flap(cluster, events).invoke("start", {}, random.Random(1))
    assert cluster.hits == [] and value["skipped"].startswith("no partition of queue has an in-sync replica besides its leader")


def test_rejoined_is_a_broker_back_in_an_isr_since_the_previous_look_and_never_the_leader():
    cluster, observer = Cluster(), Observer()
    rng = random.Random(1)
    first = observer.look(cluster, "queue")  # type: ignore[arg-type]
    assert choose_nodes(cluster, "rejoined", rng, "queue", None, first) == []  # type: ignore[arg-type]
    cluster.node(2).kill_process()
    observer.look(cluster, "queue")  # type: ignore[arg-type]  # 2 is out of every ISR, partition 1 led by 3
    cluster.node(2).start_process()
    back = observer.look(cluster, "queue")  # type: ignore[arg-type]
    assert back.rejoined == {0: [2], 1: [2], 2: [2]} and back.since_s is not None
    aimed: dict = {}
    assert [n.node_id for n in choose_nodes(cluster, "rejoined", rng, "queue", aimed, back)] == [2]  # type: ignore[arg-type]
    assert "rejoined:queue-0" in back.of([cluster.node(2)])["2"]  # type: ignore[list-item]
    followers = {n.node_id for _ in range(20) for n in choose_nodes(cluster, "follower", rng, "queue", None, back)}  # type: ignore[arg-type]
    assert followers == {1, 2, 3}  # followers of some partition, each chosen partition's leader excluded


def test_rejoin_bounces_a_follower_then_kills_its_partitions_leader():
    cluster, events = Cluster(), Events()
    nemesis = fast(RejoinNemesis(max_after_s=0.01, down_range_s=(0.0, 0.01), up_range_s=(0.0, 0.01)), cluster)
    nemesis.setup(cluster, events, "queue")  # type: ignore[arg-type]
    value = nemesis.invoke("start", {}, random.Random(4))
    follower, leader = value["targets"]
    partition = int(value["partition"].rsplit("-", 1)[1])
    assert value["target"] == "follower" and leader == {0: 1, 1: 2, 2: 3}[partition] != follower
    rounds = len(value["down_s"])
    assert 1 <= rounds <= 3 and len(value["up_s"]) == rounds - 1
    assert cluster.hits == [("kill", follower), ("start", follower)] * rounds + [("kill", leader)]
    assert [f for f, _ in events] == [KILL.start, KILL.stop] * rounds + [KILL.start]
    assert events[-1][1]["step"].startswith("rejoin: the leader") and f"leader:queue-{partition}" in events[-1][1]["roles"][str(leader)]
    assert nemesis.invoke("stop", {}, random.Random(4))["targets"] == [leader]
    # A replay: the recorded follower and leader, the recorded rounds.
    other, again = Cluster(leaders={0: 3, 1: 3, 2: 3}), Events()
    replay = fast(RejoinNemesis(), other).setup(other, again, "queue")  # type: ignore[arg-type]
    replayed = replay.invoke("start", nemesis.replay_params(value), random.Random(0))
    assert replayed["targets"] == value["targets"] and other.hits == cluster.hits[:len(other.hits)]


@pytest.mark.docker
@pytest.mark.slow
def test_flap_on_real_brokers_kills_a_leader_then_the_leader_elected_after_it(prepared):
    from harness.cluster import KafkaCluster

    with KafkaCluster(brokers=3) as cluster:
        cluster.create_topic("flap", partitions=2, replication_factor=3, config={"min.insync.replicas": 2})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(len(p["isr"]) == 3 for p in cluster.partition_state("flap").values()):
            time.sleep(0.5)
        events = Events()
        nemesis = FlapNemesis(max_delay_s=0.5).setup(cluster, events, "flap")
        value = nemesis.invoke("start", {"restart_first": True}, random.Random(3))
        first, second = value["targets"]
        partition = value["partition"]
        kills = [v for f, v in events if f == KILL.start]
        assert first != second and [k["targets"] for k in kills] == [[first], [second]]
        # Each was the partition's leader as the brokers' metadata named it when it died.
        assert f"leader:{partition}" in kills[0]["roles"][str(first)] and f"leader:{partition}" in kills[1]["roles"][str(second)]
        assert cluster.node(first).pid() is not None and cluster.node(second).pid() is None  # the first restarted
        assert nemesis.invoke("stop", {}, random.Random(3))["targets"] == [second]
        assert all(node.pid() is not None for node in cluster.brokers)
        print(f"flap on {cluster.describe().get('kafka_version')}: {first} then {second} {value['after_s']} s later")


def test_each_run_s_observer_keeps_its_own_looks_so_a_new_run_starts_afresh():
    """The previous look lives in the run's Observer, not in a module-global keyed by id(cluster):
    a later cluster that reused a gone one's id compared its first look with the gone one's ISRs."""
    cluster = Cluster()
    old_run = Observer()
    old_run.look(cluster, "queue")  # type: ignore[arg-type]
    cluster.node(2).kill_process()
    old_run.look(cluster, "queue")  # type: ignore[arg-type]  # 2 out of every ISR
    cluster.node(2).start_process()
    assert old_run.look(cluster, "queue").rejoined  # type: ignore[arg-type]  # the same run sees 2 rejoin
    first = Observer().look(cluster, "queue")  # type: ignore[arg-type]  # a new run's first look
    assert first.rejoined == {} and first.since_s is None
