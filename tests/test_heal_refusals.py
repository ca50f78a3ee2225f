"""The heal stops waiting for replicas on brokers that refused to truncate (nemesis/refusals.py):
the lines are a 0.10.2.2 broker's own (run 20261129T080436-b21ba3, broker 1: refused, started
again, refused again with the same offsets, and hung exiting, KAFKA-4039)."""

from __future__ import annotations

from nemesis import runner as runner_module
from nemesis.refusals import Refusals
from nemesis.runner import FaultRunner

from harness.cluster.metadata_views import BrokerView

STARTED = "[2026-11-29 08:04:41,260] INFO [Kafka Server 1], started (kafka.server.KafkaServer)\n"
REFUSED = ("[2026-11-29 08:06:03,004] FATAL [ReplicaFetcherThread-0-2], Exiting because log truncation is not allowed "
           "for partition queue-2, Current leader 2's latest offset 2077 is less than replica 1's latest offset 2094 "
           "(kafka.server.ReplicaFetcherThread)\n")
SHUTTING = "[2026-11-29 08:06:03,008] INFO [Kafka Server 1], shutting down (kafka.server.KafkaServer)\n"


class Node:
    """A broker's server.log as bytes read from an offset, as KafkaNode.read_log gives it."""

    def __init__(self, node_id: int, text: str = "") -> None:
        self.node_id, self.text = node_id, text

    def read_log(self, offset: int = 0, name: str = "server.log") -> tuple[str, int]:
        data = self.text.encode()
        return data[offset:].decode(), len(data)


def test_a_refusal_after_the_last_start_is_stuck_and_a_start_clears_it():
    node = Node(1, STARTED)
    watch = Refusals([node, Node(2, STARTED)])
    assert watch.stuck() == {}
    node.text += REFUSED + SHUTTING
    assert list(watch.stuck()) == [1] and "Current leader 2's latest offset 2077" in watch.stuck()[1]
    node.text += STARTED.replace("08:04:41", "08:06:24")
    assert watch.stuck() == {}  # started again: it may rejoin
    node.text += REFUSED.replace("08:06:03", "08:06:40")
    assert list(watch.stuck()) == [1]


def test_a_refusal_read_in_two_pieces_is_one_line():
    node = Node(1, STARTED + REFUSED[:50])
    watch = Refusals([node])
    assert watch.stuck() == {}
    node.text += REFUSED[50:]
    assert list(watch.stuck()) == [1]


def test_kraft_and_zookeeper_start_lines_clear_a_refusal():
    for start in ("[2026-11-29 08:06:24,634] INFO [KafkaRaftServer nodeId=1] Kafka Server started (kafka.server.KafkaRaftServer)\n",
                  "[2026-11-29 08:06:24,634] INFO [KafkaServer id=1] started (kafka.server.KafkaServer)\n"):
        node = Node(1, REFUSED)
        watch = Refusals([node])
        assert list(watch.stuck()) == [1]
        node.text += start
        assert watch.stuck() == {}, start


class Cluster:
    """Three brokers, broker 1 lagging on every partition; its log says what the test puts there."""

    def __init__(self, log_of_1: str) -> None:
        self.brokers = [Node(1, log_of_1), Node(2, STARTED), Node(3, STARTED)]

    def broker_views(self) -> dict[int, BrokerView]:
        topics = {"queue": {p: {"leader": 2, "replicas": [1, 2, 3], "isr": [2, 3]} for p in range(4)}}
        return {i: BrokerView(i, (1, 2, 3), topics) for i in (1, 2, 3)}


def _runner(cluster: Cluster, timeout_s: float) -> FaultRunner:
    r = FaultRunner({}, 10, interval_s=5, seed=1, topic="queue")
    r.cluster, r.isr_timeout_s = cluster, timeout_s  # type: ignore[assignment]
    return r


def test_the_heal_stops_waiting_for_a_broker_that_refused(monkeypatch):
    monkeypatch.setattr(runner_module, "REFUSAL_LOOK_S", 0.0)
    out = _runner(Cluster(STARTED + REFUSED + SHUTTING), timeout_s=30).wait_for_full_isr()
    assert out["isr_full"] is False and out["waited_s"] < 5, out
    assert list(out["refused"]) == ["1"] and "truncation is not allowed" in out["refused"]["1"]
    assert out["lagging"]["queue-0"] == [1]


def test_the_heal_waits_as_before_when_the_lagging_broker_refused_nothing(monkeypatch):
    monkeypatch.setattr(runner_module, "REFUSAL_LOOK_S", 0.0)
    out = _runner(Cluster(STARTED), timeout_s=1.2).wait_for_full_isr()
    assert out["isr_full"] is False and out["waited_s"] >= 1.0 and "refused" not in out, out
