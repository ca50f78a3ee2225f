"""Fault schedules and partition shapes: pure functions, no cluster."""

from __future__ import annotations

import time
from time import sleep as time_sleep

import pytest

from harness.errors import HarnessError
from nemesis.clock import offset_spec, random_offset_ms
from nemesis.partition import bridge, isolate, majorities_ring, one_way, split
from nemesis.runner import build_nemeses
from nemesis.schedule import build_schedule


def test_same_seed_same_schedule_and_packages_do_not_disturb_each_other():
    a = build_schedule(["partition", "kill"], 120, 10, seed=3)
    assert a == build_schedule(["kill", "partition"], 120, 10, seed=3)
    assert a != build_schedule(["partition", "kill"], 120, 10, seed=4)
    alone = [e for e in build_schedule(["kill"], 120, 10, seed=3)]
    assert [e for e in a if e.package == "kill"] == alone


def test_each_package_alternates_start_and_stop_within_the_time_limit():
    events = build_schedule(["partition", "kill", "pause", "clock", "loss"], 60, 5, seed=1)
    for package in {e.package for e in events}:
        actions = [e.action for e in events if e.package == package]
        assert actions == ["start", "stop"] * (len(actions) // 2) + ["start"] * (len(actions) % 2)
    assert all(0 <= e.at_s < 60 for e in events)
    kills = [e.at_s for e in events if e.package == "kill"]
    assert all(2.5 - 1e-3 <= b - a <= 7.5 + 1e-3 for a, b in zip(kills, kills[1:]))  # interval 5: gaps in [2.5, 7.5]
    assert events == sorted(events, key=lambda e: (e.at_s, e.package))


def test_grudge_shapes():
    assert split([1], [2, 3]) == {1: {2, 3}, 2: {1}, 3: {1}}
    assert majorities_ring([1, 2, 3]) == {1: {3}, 2: {1}, 3: {2}}
    five = majorities_ring([1, 2, 3, 4, 5])
    assert all(len(drops) == 2 for drops in five.values())  # each sees a majority of 3
    assert len({frozenset({1, 2, 3, 4, 5} - d) for d in five.values()}) == 5  # no two the same
    assert bridge([1, 2, 3]) == {1: {3}, 3: {1}, 2: set()}
    assert one_way(split([1], [2, 3])) == {1: {2, 3}, 2: set(), 3: set()}


def test_clock_offsets_are_libfaketime_specs():
    assert offset_spec(1250) == "+1.250" and offset_spec(-300) == "-0.300"
    import random

    rng = random.Random(0)
    offsets = [random_offset_ms(rng) for _ in range(200)]
    assert all(100 <= abs(o) <= 300_000 for o in offsets) and min(offsets) < 0 < max(offsets)


@pytest.mark.parametrize("packages", [["flood"], ["partition", "fire"]])
def test_unknown_nemesis_is_refused(packages):
    with pytest.raises(HarnessError, match="unknown nemesis"):
        build_nemeses(packages)


def test_unknown_targets_are_refused_and_none_means_no_faults():
    with pytest.raises(HarnessError, match="unknown target"):
        build_nemeses(["partition"], partition_targets=("everyone",))
    assert build_nemeses(["none"]) == {}


def test_a_fault_schedule_stops_acting_when_its_run_ends_without_a_heal():
    """A run that fails mid-schedule exits the FaultRunner (harness/run/steps.py owns it): no fault acts after."""
    import time

    from nemesis.runner import FaultRunner
    from nemesis.schedule import FaultEvent

    class Counting:
        def __init__(self) -> None:
            self.calls = 0

        def invoke(self, action, params, rng):  # type: ignore[no-untyped-def]
            self.calls += 1
            return {}

        def replay_params(self, value):  # type: ignore[no-untyped-def]
            return {}

        struck_at = None

    nemesis = Counting()
    schedule = [FaultEvent(0.0, "kill", "start", {}), FaultEvent(0.3, "kill", "stop", {}), FaultEvent(30.0, "kill", "start", {})]
    runner = FaultRunner({"kill": nemesis}, 60, schedule=schedule)  # type: ignore[dict-item]
    began = time.monotonic()
    with runner:
        runner.start()
        time.sleep(0.6)
    assert time.monotonic() - began < 3 and nemesis.calls == 2  # the 30 s event never ran
    assert not any(t.is_alive() for t in runner._threads)


def test_the_heal_starts_a_broker_whose_jvm_is_gone_and_says_why():
    """A restart that Kafka refused (0.10.2.2: still registered in ZooKeeper) left the broker down
    through the heal and the drain; the heal now starts it, as a supervisor would."""
    from nemesis.runner import FaultRunner

    class Node:
        def __init__(self, node_id: int, alive: bool) -> None:
            self.node_id, self.alive, self.started = node_id, alive, 0

        def pid(self):  # type: ignore[no-untyped-def]
            return 100 + self.node_id if self.alive else None

        def log_tail(self, lines: int = 40) -> str:
            return ("[t] FATAL Fatal error during KafkaServerStartable startup. Prepare to shutdown\n"
                    "java.lang.RuntimeException: A broker is already registered on the path /brokers/ids/3.\n"
                    "[t] INFO shutting down")

        def start_process(self) -> int:
            self.started, self.alive = self.started + 1, True
            return 300 + self.node_id

    class Cluster:
        zookeeper = Node(0, True)
        nodes = [zookeeper, Node(1, True), Node(3, False)]

    runner = FaultRunner({}, 10)
    runner.cluster = Cluster()  # type: ignore[assignment]
    revived = runner.revive()
    assert revived == {"3": {"pid": 303, "why": "java.lang.RuntimeException: A broker is already registered on the path /brokers/ids/3."}}
    assert [n.started for n in Cluster.nodes] == [0, 0, 1]
    assert runner.revive() == {}  # all up: nothing to do


@pytest.mark.parametrize("stop_f", ["restart", "power-on", "disk-healed"])
def test_the_supervisor_starts_again_a_broker_that_zookeeper_refused(tmp_path, monkeypatch, stop_f):
    """0.10.2.2: a JVM started while ZooKeeper still holds the killed broker's session logs the
    refusal and exits; the supervisor starts it again, records why under the fault's own end
    (a kill's restart, a power cut's power-on, a disk fault's heal), and stops once it started."""
    from nemesis import supervisor

    stop_event = stop_f  # the stand-in nemesis declares it, as each real one does
    monkeypatch.setattr(supervisor, "EVERY_S", 0.01)
    monkeypatch.setattr(supervisor, "RETRY_AFTER_S", 0.01)
    log = tmp_path / "server.log"
    log.write_text("[old] FATAL java.lang.RuntimeException: A broker is already registered on the path /brokers/ids/3.\n")

    from tests.power.fakes import LogFolder

    class Node(LogFolder):
        node_id, node_dir, running, starts = 3, tmp_path, None, 0

        def start_process(self) -> int:
            self.starts += 1
            self.running = 500 + self.starts
            (tmp_path / "kafka.pid").write_text(str(self.running))
            line = ("java.lang.RuntimeException: A broker is already registered on the path /brokers/ids/3. This probably"
                    if self.starts == 1 else "[t] INFO [Kafka Server 3], started (kafka.server.KafkaServer)")
            with log.open("a") as f:
                f.write(line + "\n")
            if self.starts == 1:
                self.running = None  # the refused JVM exits
            return 500 + self.starts

        def pid_on_file(self):  # type: ignore[no-untyped-def]
            return int((tmp_path / "kafka.pid").read_text())

        def pid(self):  # type: ignore[no-untyped-def]
            return self.running

    class Nemesis:
        cluster = type("C", (), {"is_kraft": False})()
        events: list = []
        stop_f = stop_event

        def record(self, f, value):  # type: ignore[no-untyped-def]
            self.events.append((f, value))

    node, nemesis = Node(), Nemesis()
    assert supervisor.restart(nemesis, node, "rejoin: the follower restarts") == 501
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and node.starts < 2:
        time_sleep(0.01)
    time_sleep(0.2)
    assert node.starts == 2  # once refused, started again, then left alone
    (f, value), = nemesis.events
    assert f == stop_f and value["targets"] == [3] and value["pids"] == {"3": 502} and value["attempt"] == 2
    assert value["refused"].startswith("java.lang.RuntimeException: A broker is already registered")
    nemesis.cluster.is_kraft = True  # KRaft: nothing to watch
    node.starts = 5
    supervisor.restart(nemesis, node, "kill")
    time_sleep(0.2)
    assert node.starts == 6 and len(nemesis.events) == 1
