"""The operations packages (issue 36) on a stand-in cluster, no Docker: what `roll` decides and
records (every node once, dedicated controllers first, seeded coins, replayable steps, an abort at
the heal), what `coordinator` aims at (the leader of the id's internal partition), and what both
do when the workload offers nothing to aim at. Real runs: tests/test_operations_run.py."""

from __future__ import annotations

import random
import signal
from dataclasses import dataclass, field
from typing import Any

from harness.cluster.metadata_views import BrokerView
from harness.cluster.txn_coordinator import txn_state_partition
from harness.history.faults import SKIPPED
from nemesis.coordinator import CoordinatorNemesis
from nemesis.fence import FenceNemesis
from nemesis.roll import RollNemesis, under_replicated


@dataclass
class Node:
    node_id: int
    hits: list[str]
    running: bool = True
    pid_no: int = 100

    def pid_on_file(self) -> int:
        return self.pid_no

    def pid(self) -> int | None:
        return self.pid_no if self.running else None

    def send_signal(self, sig: int) -> int | None:
        self.hits.append(f"{signal.Signals(sig).name} {self.node_id}")
        if sig in (signal.SIGTERM, signal.SIGKILL):
            self.running = False
        return self.pid_no

    def kill_process(self) -> int:
        return self.send_signal(signal.SIGKILL)

    def start_process(self) -> int:
        self.hits.append(f"start {self.node_id}")
        self.running, self.pid_no = True, self.pid_no + 1
        return self.pid_no


@dataclass
class Cluster:
    hits: list[str] = field(default_factory=list)
    controller_ids: tuple[int, ...] = ()
    is_kraft: bool = True
    txn_leaders: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.brokers = [Node(i, self.hits) for i in (1, 2, 3)]
        self.controllers = [Node(i, self.hits) for i in self.controller_ids]

    def node(self, node_id: int) -> Node:
        return next(n for n in self.brokers + self.controllers if n.node_id == node_id)

    def active_controller(self) -> Node | None:
        return None

    def broker_views(self) -> dict[int, BrokerView]:
        topics = {"queue": {p: {"leader": 1 + p % 3, "replicas": [1, 2, 3], "isr": [1, 2, 3]} for p in range(3)}}
        return {i: BrokerView(i, (1, 2, 3), topics) for i in (1, 2, 3)}

    def partition_state(self, topic: str) -> dict[int, dict[str, Any]]:
        return {p: {"leader": self.txn_leaders.get(p, 1 + p % 3), "replicas": [1, 2, 3], "isr": [1, 2, 3]} for p in range(50)}


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def nemesis(self, f: str, value: dict) -> None:
        self.events.append((f, value))


def rolled(cluster: Cluster, seed: int = 1, **kw: Any) -> tuple[RollNemesis, Recorder, dict]:
    recorder = Recorder()
    roll = RollNemesis(**kw).setup(cluster, recorder, "queue")
    value = roll.invoke("start", {}, random.Random(seed))
    return roll, recorder, value


def test_a_roll_restarts_every_node_once_controllers_first_each_as_its_coins_say(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    cluster = Cluster(controller_ids=(4, 5))
    _, recorder, value = rolled(cluster)
    order = [s["who"] for s in value["steps"]]
    assert sorted(order) == [1, 2, 3, 4, 5] and set(order[:2]) == {4, 5}
    fs = [f for f, _ in recorder.events]
    assert fs[0] == "roll" and fs[-1] == "rolled" and fs.count("node-stop") == fs.count("node-start") == 5
    for step in value["steps"]:
        stop = "SIGTERM" if step["how"] == "clean" else "SIGKILL"
        assert cluster.hits.index(f"{stop} {step['who']}") < cluster.hits.index(f"start {step['who']}")
        assert step["wait"] in ("isr", "no-wait") and step["after_s"] >= 0
        assert step.get("isr_full", True) is True
    assert value["aborted"] is False and all(n.running for n in cluster.brokers + cluster.controllers)


def test_the_same_seed_rolls_the_same_way_and_a_replay_keeps_the_steps(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    a, b = rolled(Cluster(), seed=7)[2], rolled(Cluster(), seed=7)[2]
    strip = lambda v: [(s["who"], s["how"], s["wait"]) for s in v["steps"]]
    assert strip(a) == strip(b)
    assert {strip(rolled(Cluster(), seed=s)[2])[0] for s in range(12)} != {strip(a)[0]}  # seeds differ
    roll = RollNemesis().setup(Cluster(), Recorder(), "queue")
    params = roll.replay_params(a)
    assert [s["after_s"] for s in params["steps"]] == [s["after_s"] for s in a["steps"]]
    replayed = roll.invoke("start", params, random.Random(99))  # the rng is not asked
    assert strip(replayed) == strip(a) and replayed.get("replay") == "recorded targets"


def test_a_replay_ends_the_isr_wait_when_the_next_step_is_due():
    """A replay keeps the recorded moments: with an ISR that stays short, the next node still goes down
    at its recorded offset (real time here, 0.6 s apart), and the step says why its wait ended."""
    import time

    class Lagging(Cluster):
        def broker_views(self) -> dict[int, BrokerView]:
            topics = {"queue": {0: {"leader": 1, "replicas": [1, 2, 3], "isr": [1, 2]}}}
            return {i: BrokerView(i, (1, 2, 3), topics) for i in (1, 2, 3)}

    roll = RollNemesis().setup(Lagging(), Recorder(), "queue")
    roll.poll_s = 0.05
    plan = {"target": "all", "targets": [1, 2], "steps": [
        {"who": 1, "how": "hard", "wait": "isr", "after_s": 0.0},
        {"who": 2, "how": "hard", "wait": "no-wait", "pause_s": 0.0, "after_s": 0.6}]}
    began = time.monotonic()
    value = roll.invoke("start", plan, random.Random(0))
    first, second = value["steps"]
    assert first["wait_ended_by"] == "replay" and first["isr_full"] is False and first["lagging"] == {"queue-0": [3]}
    assert 0.6 <= second["after_s"] <= 1.1 and time.monotonic() - began < 5  # on time, not after ISR_WAIT_S


def test_a_replayed_step_does_not_wait_for_a_slow_look():
    """A look that is not back by the step's recorded moment is not waited for: the node goes down on
    time and the step says its roles are unknown."""
    import time

    class Slow(Cluster):
        def broker_views(self) -> dict[int, BrokerView]:
            time.sleep(0.4)  # a broker still starting: its metadata request times out
            return super().broker_views()

    roll = RollNemesis().setup(Slow(), Recorder(), "queue")
    plan = {"target": "all", "targets": [1], "steps": [{"who": 1, "how": "hard", "wait": "no-wait", "pause_s": 0.0, "after_s": 0.1}]}
    value = roll.invoke("start", plan, random.Random(0))
    (step,) = value["steps"]
    assert step["after_s"] < 0.3 and step["roles"].startswith("unknown")


def test_one_coin_only_is_honoured_and_a_heal_stops_a_roll_between_nodes(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    cluster = Cluster()
    _, _, value = rolled(cluster, stops=("hard",), waits=("no-wait",))
    assert {s["how"] for s in value["steps"]} == {"hard"} and {s["wait"] for s in value["steps"]} == {"no-wait"}
    roll = RollNemesis().setup(Cluster(), Recorder(), "queue")
    roll.stopping.set()
    value = roll.invoke("start", {}, random.Random(1))
    assert value["steps"] == [] and value["aborted"] is True


def test_a_coordinator_fault_strikes_the_leader_of_the_ids_partition_and_the_stop_undoes_it():
    tid = "txn-run-txn-0"
    partition = txn_state_partition(tid, 50)
    cluster, recorder = Cluster(txn_leaders={partition: 2}), Recorder()
    nemesis = CoordinatorNemesis(("kill",)).setup(cluster, recorder, "queue")
    nemesis.coordinated = {"transactional_ids": [tid], "groups": []}
    value = nemesis.invoke("start", {}, random.Random(0))
    assert value["targets"] == [2] and value["partition"] == f"__transaction_state-{partition}"
    assert f"txn-coordinator:{tid}" in value["roles"]["2"] and cluster.hits == ["SIGKILL 2"]
    nemesis.invoke("stop", {}, random.Random(0))
    assert cluster.hits[-1] == "start 2" and [f for f, _ in recorder.events] == ["kill", "restart"]


def test_with_nothing_to_aim_at_the_operations_record_a_skip_that_says_why():
    for nemesis in (CoordinatorNemesis(("pause",)), FenceNemesis()):
        recorder = Recorder()
        nemesis.setup(Cluster(), recorder, "queue")
        nemesis.invoke("start", {}, random.Random(0))
        (f, value), = recorder.events
        assert f == SKIPPED and ("no transactional id" in value["skipped"] or "names no" in value["skipped"])


def test_the_fault_runner_gives_every_nemesis_its_stop_event_and_the_workloads_ids():
    """A merge once left these two lines inside a later `if` (only the last nemesis got them, and only
    when the run observed): a roll then went on restarting brokers through the heal."""
    from nemesis.runner import FaultRunner, build_nemeses

    runner = FaultRunner(build_nemeses(["roll", "fence", "coordinator"]), 10)
    runner.setup(Cluster(), None, "queue", coordinated={"transactional_ids": ["t"], "groups": ["g"]})
    for nemesis in runner.nemeses.values():
        assert nemesis.stopping is runner._stop and nemesis.coordinated == {"transactional_ids": ["t"], "groups": ["g"]}


def test_a_shrink_moves_to_one_in_sync_follower_then_back_verifying_each_step(monkeypatch):
    """What `reassign` asks Kafka's tool for, in order (the tool itself is stood in for; real runs
    in tests/test_operations_run.py): execute, verify until complete, for each stage."""
    from nemesis.reassign import ReassignNemesis

    calls: list[tuple[str, list[int], int | None]] = []

    def tool(cluster, version, topic, partition, ids, via, action="execute", throttle_bps=None, timeout_s=90):
        calls.append((action, list(ids), throttle_bps))
        return 0, f"Reassignment of partition {topic}-{partition} is completed." if action == "verify" else "Successfully started"

    monkeypatch.setattr("harness.cluster.leadership.reassign", tool)
    cluster = Cluster()
    cluster.distribution = type("D", (), {"version": "4.4.0"})()
    recorder = Recorder()
    nemesis = ReassignNemesis(("shrink",), ("throttled",), ("none",)).setup(cluster, recorder, "queue")
    value = nemesis.invoke("start", {}, random.Random(3))
    shrunk, back = value["steps"]
    assert len(shrunk) == 1 and shrunk[0] != 1 + int(value["partition"].rsplit("-", 1)[1]) % 3  # a follower, not the leader
    assert back == value["from"] == [1, 2, 3]
    assert [(a, ids) for a, ids, _ in calls] == [("execute", shrunk), ("verify", shrunk), ("execute", back), ("verify", back)]
    assert all(t == 100_000 for _, _, t in calls)
    (f0, _), (f1, end) = recorder.events
    assert (f0, f1, end["complete"]) == ("reassign", "reassigned", True)
    old = cluster.distribution
    cluster.distribution = type("D", (), {"version": "2.4.1"})()
    nemesis.invoke("start", {}, random.Random(3))
    assert recorder.events[-1][0] == SKIPPED and "2.5" in recorder.events[-1][1]["skipped"]
    cluster.distribution = old


def test_a_disk_swap_waits_for_a_whole_cluster_and_never_starts_while_a_partition_is_under_replicated(monkeypatch):
    """One disk at a time: a first sweep swapped three brokers' disks within 33 s and destroyed every copy
    of a partition, a loss the fault made, not Kafka (run 20261126T021937-affeae)."""
    from nemesis.membership import MembershipNemesis

    monkeypatch.setattr("time.sleep", lambda s: None)
    cluster, recorder = Cluster(), Recorder()
    cluster.cluster_id = "c"
    for n in cluster.brokers:
        n.roles = ("broker", "controller")
        n.exec = lambda command, n=n: (n.hits.append(f"wipe {n.node_id}") or (0, "queue-0\nqueue-1\n"))
    nemesis = MembershipNemesis(("one",), ("swap-disk",)).setup(cluster, recorder, "queue")
    nemesis.invoke("start", {}, random.Random(1))
    fs = [f for f, _ in recorder.events]
    assert fs == ["disk-swap", "disk-swapped", "disk-swap-settled"] and recorder.events[-1][1]["whole"] is True
    assert recorder.events[1][1]["removed"] == ["queue-0", "queue-1"]

    views = cluster.broker_views
    cluster.broker_views = lambda: {i: BrokerView(i, (1, 2, 3), {"queue": {0: {"leader": 1, "replicas": [1, 2, 3], "isr": [1, 3]}}})
                                    for i in (1, 2, 3)}
    hits = len(cluster.hits)
    nemesis.invoke("start", {}, random.Random(2))
    assert recorder.events[-1][0] == SKIPPED and "under-replicated" in recorder.events[-1][1]["skipped"]
    assert len(cluster.hits) == hits  # nobody was touched
    cluster.broker_views = views


def test_the_heal_ends_a_steps_isr_wait_so_the_operation_is_in_the_executed_schedule(monkeypatch):
    # A wait that outlived the heal's 60 s join of the fault threads left its operation out of
    # config.json's executed schedule (helper-13's upgrade run under kill,partition: an 84 s wait).
    monkeypatch.setattr("time.sleep", lambda s: None)

    class Lagging(Cluster):
        def broker_views(self) -> dict[int, BrokerView]:  # broker 3 never catches up
            topics = {"queue": {0: {"leader": 1, "replicas": [1, 2, 3], "isr": [1, 2]}}}
            return {i: BrokerView(i, (1, 2, 3), topics) for i in (1, 2, 3)}

    roll = RollNemesis(stops=("hard",), waits=("isr",)).setup(Lagging(), Recorder(), "queue")
    roll.poll_s = 0.01
    polls = []

    def probe(cluster):  # the heal comes during the first node's wait
        polls.append(1)
        if len(polls) == 3:
            roll.stopping.set()
        return under_replicated(cluster)

    monkeypatch.setattr("nemesis.roll.under_replicated", probe)
    value = roll.invoke("start", {}, random.Random(1))
    first = value["steps"][0]
    assert len(polls) == 3 and first["wait_ended_by"] == "heal" and first["isr_full"] is False
    assert first["lagging"] == {"queue-0": [3]}
    assert value["aborted"] is True and len(value["steps"]) == 1  # no node after the heal


def test_a_shrink_whose_grow_back_the_fault_phase_cut_off_is_grown_back_by_the_heal(monkeypatch):
    """A 4.4.0 run's fault phase ended between a shrink and its grow-back: queue-5 stayed on one
    replica through the drain (20261127T022341-3dc2f3). The heal now puts the original list back."""
    from nemesis.reassign import ReassignNemesis

    monkeypatch.setattr("time.sleep", lambda s: None)
    calls: list[tuple[str, list[int]]] = []
    nemesis = ReassignNemesis(("shrink",), ("none",), ("none",))

    def tool(cluster, version, topic, partition, ids, via, action="execute", throttle_bps=None, timeout_s=90):
        calls.append((action, list(ids)))
        if action == "verify" and len(ids) == 1:
            nemesis.stopping.set()  # the fault phase ends while the shrink is verified done
        return 0, f"Reassignment of partition {topic}-{partition} is completed." if action == "verify" else "Successfully started"

    monkeypatch.setattr("harness.cluster.leadership.reassign", tool)
    cluster, recorder = Cluster(), Recorder()
    cluster.distribution = type("D", (), {"version": "4.4.0"})()
    nemesis.setup(cluster, recorder, "queue")
    value = nemesis.invoke("start", {}, random.Random(3))
    shrunk, back = value["steps"]
    assert calls == [("execute", shrunk), ("verify", shrunk)]  # the grow-back never ran
    healed = nemesis.teardown()
    assert calls[2:] == [("execute", back), ("verify", back)] and back == [1, 2, 3]
    assert healed["restored"]["complete"] is True and healed["restored"]["replicas"] == back
    assert recorder.events[-1][0] == "reassigned" and recorder.events[-1][1]["step"] == "heal"
    assert nemesis.teardown() == {"targets": []}  # owed once: a second heal does nothing


def test_a_refused_reassignment_keeps_kafka_s_message_before_its_stack_trace():
    from nemesis.reassign import _tail

    out = "Error: org.apache.kafka.server.common.AdminCommandFailedException: Unknown broker id 1\n" + "\n".join(
        f"\tat org.apache.kafka.tools.reassign.ReassignPartitionsCommand.x(ReassignPartitionsCommand.java:{i})" for i in range(30))
    said = _tail(out)
    assert said.startswith("Error: org.apache.kafka.server.common.AdminCommandFailedException: Unknown broker id 1 ... ")
    assert said.endswith("(ReassignPartitionsCommand.java:29)")
    assert _tail("Successfully started partition reassignment for queue-2") == "Successfully started partition reassignment for queue-2"


def test_a_reassignment_with_every_broker_down_is_skipped_saying_why():
    """ReassignPartitionsCommand runs in a broker's container. With every broker's JVM down (other
    packages' faults: 3 starts of the 4.4.0 campaign's first 18 runs raised a nemesis error) the
    start is a skip with the reason, and no tool runs."""
    from harness.history.faults import REASSIGN
    from nemesis.reassign import ReassignNemesis

    cluster, recorder = Cluster(), Recorder()
    for node in cluster.brokers:
        node.running = False
    nemesis = ReassignNemesis().setup(cluster, recorder, "queue")
    nemesis._looked = type("Look", (), {"unseen": None, "of": lambda self, nodes: {}})()
    plan = {"targets": [1], "partition": "queue-0", "steps": [[2, 3]], "move": "shrink", "throttle": "none",
            "kill": None, "restart_after_s": 2.0}
    value = nemesis.apply(plan)
    (f, skipped), = recorder.events
    assert f == SKIPPED and skipped["fault"] == REASSIGN.start and "no broker's JVM runs" in skipped["skipped"]
    assert value["skipped"] == skipped["skipped"] and nemesis.in_flight is None and cluster.hits == []


def test_before_2_5_a_reorder_goes_through_zookeeper_then_asks_a_preferred_election(monkeypatch):
    """Issue 38: a planned leader change on 1.1.1, where KIP-279's divergence needs one. Kafka's own
    tools run in ZooKeeper's container with --zookeeper (no broker answers a reassignment before
    KIP-455); 1.x's verify says "completed successfully"; there is no --cancel before 2.6, so the
    heal lets a move still in flight finish instead."""
    from nemesis.reassign import ReassignNemesis

    class Zk:
        def __init__(self) -> None:
            self.commands: list[str] = []

        def exec(self, command: str) -> tuple[int, str]:
            self.commands.append(command)
            if "--verify" in command:
                return 0, "Status of partition reassignment: \nReassignment of partition queue-1 completed successfully\n"
            return 0, "Successfully started reassignment of partitions."

    elected: list[tuple[str, int]] = []
    monkeypatch.setattr("harness.cluster.leadership.elect_preferred",
                        lambda cluster, version, topic, partition: (elected.append((topic, partition)) or True, "written"))
    cluster = Cluster()
    cluster.distribution = type("D", (), {"version": "1.1.1"})()
    cluster.zookeeper = Zk()
    recorder = Recorder()
    nemesis = ReassignNemesis(("reorder",), ("none",), ("none",)).setup(cluster, recorder, "queue")
    value = nemesis.invoke("start", {}, random.Random(5))
    tools = [c for c in cluster.zookeeper.commands if "ReassignPartitionsCommand" in c]
    assert [c.split("--")[-1].strip(" '2>&1") for c in tools] == ["execute", "verify"]
    assert all("--zookeeper localhost:2181" in c and "--bootstrap-server" not in c for c in tools)
    partition = int(value["partition"].rsplit("-", 1)[1])
    (order,) = value["steps"]
    assert sorted(order) == sorted(value["from"]) and order != value["from"] and elected == [("queue", partition)]
    assert recorder.events[-1][0] == "reassigned" and recorder.events[-1][1]["complete"] is True
    nemesis.in_flight = {"partition": "queue-1", "ids": [2, 3, 1], "throttle": None}
    healed = nemesis.teardown()
    assert healed["finished"]["complete"] is True and "cancelled" not in healed
    assert "--cancel" not in " ".join(cluster.zookeeper.commands)


def test_a_reorder_moves_the_leadership_and_may_put_the_old_leader_second_or_last():
    """A reorder's new preferred replica is never the leader, so its election moves leadership; the
    old leader comes second in some orders and last in others (a rotation always put it last, so a
    failure of the new leader never handed leadership back to it: KIP-279's window, issue 38)."""
    from nemesis.reassign import ReassignNemesis

    cluster = Cluster()
    cluster.distribution = type("D", (), {"version": "4.4.0"})()
    nemesis = ReassignNemesis(("reorder",), ("none",), ("none",)).setup(cluster, Recorder(), "queue")
    look = type("Look", (), {"replicas": {0: [1, 2, 3]}, "leaders": {0: 2}, "isrs": {0: [1, 2, 3]}, "error": None})()
    places = set()
    for seed in range(40):
        plan = nemesis.decide(look, random.Random(seed), {})
        (order,) = plan["steps"]
        assert sorted(order) == [1, 2, 3] and order[0] != 2, plan
        places.add(order.index(2))
    assert places == {1, 2}
    same = nemesis.decide(look, random.Random(7), {})
    assert same == nemesis.decide(look, random.Random(7), {})  # seeded: a replay draws the same order


def test_a_grow_back_kafka_refuses_is_not_waited_for_and_the_heal_puts_the_replicas_back(monkeypatch):
    """1.1.1 (20261128T115253-b993b4): the grow-back named a broker another package had killed; the
    tool printed "AdminCommandFailedException: The proposed assignment contains non-existent
    brokerIDs: 3" and exited 0, the package verified a move that never started for 94 s, and the
    partition stayed on one replica through the drain. A refusal is now a failed step, and the
    heal grows the partition back, asking again while the restarted broker is not registered."""
    from nemesis.reassign import ReassignNemesis

    refusal = ("kafka.common.AdminCommandFailedException: The proposed assignment contains non-existent brokerIDs: 3\n"
               "\tat kafka.admin.ReassignPartitionsCommand$.main(ReassignPartitionsCommand.scala:62)\n")

    class Zk:
        def __init__(self) -> None:
            self.executes = 0

        def exec(self, command: str) -> tuple[int, str]:
            if "--verify" in command:
                return 0, "Reassignment of partition queue-1 completed successfully"
            if "--execute" not in command:
                return 0, ""
            self.executes += 1
            return 0, "Successfully started reassignment of partitions." if self.executes in (1, 4) else refusal

    cluster = Cluster()
    cluster.distribution = type("D", (), {"version": "1.1.1"})()
    cluster.zookeeper = Zk()
    recorder = Recorder()
    nemesis = ReassignNemesis(("shrink",), ("none",), ("none",)).setup(cluster, recorder, "queue")
    nemesis.poll_s = 0.01
    nemesis.invoke("start", {}, random.Random(3))
    shrink, grow = recorder.events[-1][1]["steps"]
    assert shrink["complete"] is True and grow["exit"] == 1 and "non-existent brokerIDs: 3" in grow["answer"]
    assert "waited_s" not in grow and nemesis.in_flight is None
    restored = nemesis.teardown()["restored"]  # executes 2 and 3 refused, 4 accepted
    assert (restored["exit"], restored["tries"], restored["complete"]) == (0, 2, True)
