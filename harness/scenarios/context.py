"""ScenarioContext: the step helpers a scenario is written with (`run_scenario` is in runner.py).

The acting itself (kill, start, cut, heal, reorder replicas, a preferred election, bounded waits for
a leader or a state) is nemesis/steps.py's, shared with the nemeses; this context names the brokers
(A, B, C, D) and records each step. Every step is recorded in the history as a nemesis event (process "nemesis", type "info", f
"scenario-step" or a more specific f such as "kill", "restart", "cut", "elect") before and after it
acts, every wait is bounded, and writes and reads go through the recorded clients, so the
history is an ordinary one that the normal checker reads.

Run directory (as `harness run`'s, plus two files):
    config.json  cluster.json  history.jsonl  history.parquet  brokers/<id>/
    replicas.json   each replica's epochs and records, and their divergence (harness/replicas.py)
    scenario.json   the scenario's steps, writes, observations and a summary
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from confluent_kafka import ElectionType, KafkaException

from harness.cluster import KafkaCluster, leadership
from harness.errors import HarnessError
from harness.history import Recorder
from harness.history.faults import CUT as CUT_FAULT, KILL
from harness.cluster.node import Node
from harness.scenarios import Scenario
from nemesis import steps
from workloads.clients import ConsumerClient, ProcessIds, ProducerClient
from workloads.drivers.base import ClientError, ClientException, Driver
from workloads.profiles import PROFILES, Profile
from workloads.drain import drain_one, high_watermarks

log = logging.getLogger(__name__)

TOPIC = "scenario"
CUT = "SCEN"  # iptables chain tag of the scenarios' cuts


class ScenarioIncomplete(Exception):
    """A step could not be carried out (e.g. an election never happened); the reason is the finding."""


class _TrackingProducer(ProducerClient):
    """A recorded producer that also remembers each value's delivery outcome for the scenario's result."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outcomes: dict[int, dict[str, Any]] = {}

    # The driver's delivery callbacks (workloads/drivers/base.py), which ProducerClient records.
    def _ok(self, key: int, value: int, offset: int, epoch: int | None) -> None:
        super()._ok(key, value, offset, epoch)
        self.outcomes[value] = {"acked": True, "offset": offset if offset is not None and offset >= 0 else None, "error": None}

    def _failed(self, key: int, value: int, err: ClientError) -> None:
        super()._failed(key, value, err)
        self.outcomes[value] = {"acked": False, "offset": None, "error": err.message}  # librdkafka's text, as before


def scenario_profile(s: Scenario) -> Profile:
    """The client profile a scenario runs with (RF 2, its acks, min ISR and unclean setting)."""
    base = PROFILES["acks1"] if s.acks == "1" else PROFILES["no-idempotence"]
    return replace(base, name=f"scenario:{s.name}", description=s.description, acks=s.acks, enable_idempotence=False,
                   replication_factor=s.replication_factor, min_insync_replicas=s.min_insync_replicas, unclean_leader_election=s.unclean,
                   delivery_timeout_ms=20_000, isolation_level=s.isolation_level)


class ScenarioContext:
    """Step helpers over one cluster and one recorder. A, B, C are the scenario's brokers:
    A and B hold the partition's replicas, C is the third broker (the KRaft/ZooKeeper-era
    controller when possible, so that cutting A from B never cuts either from the controller).
    With `controller_apart`, A, B and C are three brokers none of which is the controller,
    and D is the controller's node."""

    def __init__(self, cluster: KafkaCluster, recorder: Recorder, profile: Profile, kafka_version: str,
                 controller_apart: bool = False, driver: Driver | None = None, client_log: Path | None = None) -> None:
        self.cluster, self.recorder, self.profile, self.version = cluster, recorder, profile, kafka_version
        # The client driver (`scenario run --client`) of the scenarios that take one (runner.clients_of);
        # None: librdkafka, which every other scenario's writes and all the readers use. `client_log`:
        # where a driver whose client logs on its own (the Java client) writes that log.
        self.driver, self.client_log = driver, client_log
        self.topic = TOPIC
        self.pids = ProcessIds()
        self.steps: list[dict[str, Any]] = []
        self.writes: list[dict[str, Any]] = []  # label, value, broker, acked, offset, error
        self._next_value = 1
        self.A, self.B, self.C, self.D = self._choose_roles(controller_apart)
        self._pollers: list[tuple[threading.Thread, threading.Event]] = []
        self.replica_ids: list[int] = []
        self.topic_config: dict[str, Any] | None = None

    # --- identity ---------------------------------------------------------------------
    def _choose_roles(self, controller_apart: bool = False) -> tuple[Node, Node, Node, Node | None]:
        controller = None
        try:
            controller = self.cluster.active_controller()
        except Exception as exc:  # the choice is an optimisation; any broker order still runs
            log.info("active controller unknown: %s", exc)
        others = [b for b in self.cluster.brokers if controller is None or b.node_id != controller.node_id]
        if controller_apart:
            if controller is None or len(others) < 3:
                raise HarnessError(f"the scenario needs three brokers besides the controller; controller {controller}, "
                                   f"other brokers {[b.node_id for b in others]}")
            return others[0], others[1], others[2], controller
        c = controller if controller is not None and controller in self.cluster.brokers else others[-1]
        a, b = [n for n in self.cluster.brokers if n is not c][:2]
        return a, b, c, None

    def name(self, node: Node) -> str:
        return {node_id: role for role, node_id in self.roles().items()}.get(node.node_id, str(node.node_id))

    def roles(self) -> dict[str, int]:
        named = {"A": self.A.node_id, "B": self.B.node_id, "C": self.C.node_id}
        return named | ({"D": self.D.node_id} if self.D is not None else {})

    def client_record(self) -> dict[str, Any]:
        """Which client the scenario's driven clients ran, and its library versions (scenario.json)."""
        if self.driver is None:
            return {"name": "librdkafka", "versions": None}
        return {"name": self.driver.name, "versions": self.driver.versions()}

    def at_least(self, version: str) -> bool:
        return leadership.at_least(self.version, version)

    # --- recording ------------------------------------------------------------------------
    def step(self, what: str, f: str = "scenario-step", **value: Any) -> dict[str, Any]:
        """Record one step (a nemesis event) and keep it for scenario.json."""
        event = {"step": len(self.steps) + 1, "what": what, **value}
        self.recorder.nemesis(f, event)
        event = {**event, "f": f, "t_s": round(self.recorder.elapsed_ns() / 1e9, 3)}
        self.steps.append(event)
        log.info("step %s: %s %s", event["step"], what, {k: v for k, v in value.items()})
        return event

    def fail(self, reason: str) -> None:
        self.step("incomplete", reason=reason)
        raise ScenarioIncomplete(reason)

    # --- topic ------------------------------------------------------------------------------
    def create_topic(self, replicas: list[Node], config: dict[str, Any]) -> None:
        ids = [n.node_id for n in replicas]
        self.cluster.create_topic(self.topic, replica_assignment=[ids], config=config, timeout_s=90)
        self.replica_ids, self.topic_config = ids, {k: str(v) for k, v in config.items()}
        self.step("create topic", "scenario-setup", topic=self.topic, replicas=ids,
                  roles=self.roles(), config=config)

    def state(self) -> dict[str, Any] | None:
        try:
            return self.cluster.partition_state(self.topic).get(0)
        except (KafkaException, HarnessError, KeyError) as exc:
            log.info("partition state unavailable: %s", exc)
            return None

    # --- writes -------------------------------------------------------------------------------
    def write(self, labels: list[str], expect_leader: Node | None = None, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Write one record per label through a fresh recorded producer; wait for every delivery
        report (bounded). Returns each label's value, offset and whether it was acknowledged."""
        values = list(range(self._next_value, self._next_value + len(labels)))
        self._next_value += len(labels)
        leader = self.state()
        self.step("write", "scenario-write", labels=labels, values=values, to=None if expect_leader is None else expect_leader.node_id,
                  leader=None if leader is None else leader["leader"])
        producer = _TrackingProducer(self.pids(), self.recorder, self.cluster.bootstrap_servers(), self.topic, self.profile,
                                     extra={"delivery.timeout.ms": int(timeout_s * 1000), "request.timeout.ms": 10_000,
                                            "linger.ms": 0, "max.in.flight.requests.per.connection": 1}).open()
        for v in values:
            producer.send(0, v)
        producer.close(timeout_s=timeout_s + 5)
        out = []
        for label, v in zip(labels, values):
            o = producer.outcomes.get(v, {"acked": False, "offset": None, "error": "no delivery report"})
            out.append({"label": label, "value": v, "to": None if expect_leader is None else self.name(expect_leader), **o})
        self.writes += out
        self.step("written", "scenario-write", results=[{k: w[k] for k in ("label", "value", "acked", "offset", "error")} for w in out])
        return out

    # --- processes -------------------------------------------------------------------------------
    def kill(self, node: Node) -> None:
        pid = steps.kill(node)
        self.step(f"kill {self.name(node)}", KILL.start, node=node.node_id, targets=[node.node_id], pid=pid)

    def start(self, node: Node) -> None:
        pid = steps.start(node)
        # KILL.stop ("restart"), as the kill nemesis records it: the report's kill band ends here.
        self.step(f"start {self.name(node)}", KILL.stop, node=node.node_id, targets=[node.node_id], pid=pid)

    # --- waits -------------------------------------------------------------------------------------
    def wait_for(self, what: str, predicate: Callable[[dict[str, Any] | None], bool], timeout_s: float,
                 tick: Callable[[], None] | None = None, every_s: float = 0.5) -> dict[str, Any] | None:
        """Poll the partition state until `predicate` holds or `timeout_s` passes; record the outcome."""
        return self.waited(what, steps.poll(self.state, predicate, timeout_s, every_s, tick))

    def waited(self, what: str, polled: steps.Polled) -> dict[str, Any] | None:
        """Record how a wait ended (waited or timed out, how long, the last state); the state if it held."""
        self.step(f"{'waited' if polled.ok else 'timed out'}: {what}", ok=polled.ok, seconds=round(polled.seconds, 1),
                  state=polled.value)
        return polled.value if polled.ok else None

    def leads(self, node: Node, what: str, timeout_s: float) -> dict[str, Any] | None:
        """Wait (recorded as `what`) until `node` leads the partition; its state then, or None."""
        return self.waited(what, steps.wait_leader(self.state, lambda state: state["leader"] if state else None,
                                                   node.node_id, timeout_s))

    def wait_leader(self, node: Node, timeout_s: float = 60.0, unclean: bool = False) -> dict[str, Any]:
        """Wait until `node` leads the partition. With `unclean`, after 15 s without an automatic
        election ask for an unclean one (Kafka >= 2.4's ElectLeaders API), every 5 s."""
        want = node.node_id
        began = time.monotonic()
        if unclean and self.at_least("2.4"):
            state = self.leads(node, f"{self.name(node)} leader (automatic)", min(15.0, timeout_s))
            for _ in range(int(timeout_s / 5) + 1):
                if state is not None or time.monotonic() - began > timeout_s:
                    break
                self.elect(ElectionType.UNCLEAN)
                state = self.leads(node, f"{self.name(node)} leader (after unclean ElectLeaders)", 5.0)
        else:
            state = self.leads(node, f"{self.name(node)} leader", timeout_s)
        if state is None:
            self.fail(f"broker {want} ({self.name(node)}) did not become leader within {timeout_s:.0f} s; state: {self.state()}")
        return state  # type: ignore[return-value]

    def wait_isr(self, nodes: list[Node], timeout_s: float = 60.0) -> dict[str, Any] | None:
        want = sorted(n.node_id for n in nodes)
        return self.wait_for(f"ISR {want}", lambda s: bool(s) and sorted(s["isr"]) == want and s["leader"] >= 0, timeout_s)

    # --- elections and placement ----------------------------------------------------------------------
    def elect(self, kind: ElectionType) -> str:
        """AdminClient.elect_leaders (Kafka >= 2.4); returns and records the broker's answer."""
        _, text = leadership.elect(self.cluster, kind.name, self.topic, 0)
        self.step(f"elect leaders ({kind.name})", "elect", kind=kind.name, answer=text[:500])
        return text

    def tool(self, node: Node, main: str, args: str, timeout_s: int = 90) -> tuple[int, str]:
        """Run one of Kafka's command-line tools inside `node`'s container."""
        return leadership.run_tool(node, main, args, timeout_s)

    def reorder_replicas(self, order: list[Node], via: Node) -> None:
        """Change the partition's replica order (the preferred leader is the first) with Kafka's
        ReassignPartitionsCommand (harness/cluster/leadership.py; KRaft: run inside `via`)."""
        ids = [n.node_id for n in order]
        code, out = steps.reorder_replicas(self.cluster, self.version, self.topic, 0, ids, via=via)
        self.step(f"reorder replicas to {ids}", "reassign", replicas=ids, exit_code=code, output=out.strip()[-600:])
        if code != 0:
            self.fail(f"ReassignPartitionsCommand exited {code}: {out.strip()[-300:]}")

    def preferred_election(self, via: Node) -> str:
        if self.at_least("2.4"):
            return self.elect(ElectionType.PREFERRED)
        ok, out = steps.elect_preferred(self.cluster, self.version, self.topic, 0)
        self.step("preferred leader election (PreferredReplicaLeaderElectionCommand)", "elect", kind="PREFERRED",
                  exit_code=0 if ok else 1, answer=out)
        return out

    # --- network -------------------------------------------------------------------------------------
    def cut(self, a: Node, b: Node, both_ways: bool = True) -> None:
        """a drops packets from b (and b from a when both_ways)."""
        steps.cut(a, b, CUT, both_ways)
        self.step(f"cut {self.name(a)}{'<->' if both_ways else '<-'}{self.name(b)}", CUT_FAULT.start,
                  targets=sorted({a.node_id, b.node_id}), drop_on=[a.node_id] + ([b.node_id] if both_ways else []),
                  from_=[b.node_id] + ([a.node_id] if both_ways else []))

    def heal(self) -> None:
        steps.heal(self.cluster.brokers, CUT)
        self.step("heal every cut", CUT_FAULT.stop)

    # --- consumers -------------------------------------------------------------------------------------
    def consumer(self, extra: dict[str, Any] | None = None) -> ConsumerClient:
        process = self.pids()
        return ConsumerClient(process, self.recorder, self.cluster.bootstrap_servers(), self.topic, self.profile,
                              f"scenario-{process}", extra=extra).open()

    def start_poller(self, client: ConsumerClient, max_s: float = 600.0) -> Callable[[], None]:
        """Poll `client` in the background (every ~0.2 s, at most `max_s`); returns the stop function."""
        stop = threading.Event()

        def loop() -> None:
            end = time.monotonic() + max_s
            while not stop.is_set() and time.monotonic() < end:
                client.poll(max_records=100, timeout_s=0.2)

        thread = threading.Thread(target=loop, name=f"poller-{client.process}", daemon=True)
        thread.start()
        self._pollers.append((thread, stop))

        def halt() -> None:
            stop.set()
            thread.join(timeout=10)

        return halt

    def stop_pollers(self) -> None:
        for thread, stop in self._pollers:
            stop.set()
            thread.join(timeout=10)

    # --- the end -----------------------------------------------------------------------------------------
    def high_watermark(self, timeout_s: float = 10.0) -> int:
        """The partition's high watermark now (raises the driver's ClientException while it has none).
        library.py's waits call it; it was lost in the refactor that moved the drain's probe to
        workloads/drain.py."""
        return high_watermarks(self.cluster.bootstrap_servers(), self.topic, [0], "scenario-hwm", timeout_s=timeout_s)[0]

    def drain(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """The final drain: a fresh consumer reads the partition from the beginning to its high watermark."""
        began = time.monotonic()
        first_index = self.recorder.events_recorded
        try:
            high = high_watermarks(self.cluster.bootstrap_servers(), self.topic, [0], "scenario-hwm", timeout_s=10)
        except (KafkaException, ClientException) as exc:  # high_watermarks raises the driver's error
            self.step("drain: high watermark unavailable", error=str(exc))
            return {"complete": False, "high_watermarks": {}, "timed_out_partitions": [0], "processes": [],
                    "undrained": {"0": str(exc)}, "first_index": first_index, "seconds": 0.0}
        client = self.consumer()
        try:
            left = drain_one(client, 1, high, began + timeout_s)
        finally:
            client.close()
        drain = {"complete": not left, "high_watermarks": {"0": high[0]}, "timed_out_partitions": sorted(left),
                 "processes": [client.process], "first_index": first_index, "seconds": round(time.monotonic() - began, 3)}
        self.step("final drain", "scenario-drain", **{k: drain[k] for k in ("complete", "high_watermarks", "seconds")})
        return drain

    def ensure_all_running(self) -> None:
        for n in self.cluster.brokers:
            if n.pid() is None:
                self.start(n)
