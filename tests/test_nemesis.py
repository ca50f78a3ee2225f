"""Each fault checked against reality: sockets, the admin API, PIDs and the broker's own clock."""

from __future__ import annotations

import random
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from harness.cluster import KafkaCluster
from nemesis.clock import ClockNemesis
from nemesis.partition import PacketLossNemesis, PartitionNemesis
from nemesis.process import KillNemesis, PauseNemesis

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TOPIC = "faults"


class ListRecorder:
    """Collects nemesis events as the run's recorder would write them."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def nemesis(self, f: str, value: dict) -> None:
        self.events.append((f, value))


def wait_until(predicate, timeout_s: float, step_s: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return predicate()


@pytest.fixture(scope="module")
def cluster(prepared):
    # Short lag time so that ISR changes show within seconds.
    with KafkaCluster(brokers=3, broker_config={"replica.lag.time.max.ms": 4000}) as running:
        running.create_topic(TOPIC, partitions=3, replication_factor=3, config={"min.insync.replicas": 2})
        yield running


def isr_full(cluster) -> bool:
    state = cluster.partition_state(TOPIC)  # {} while no majority of brokers agrees
    return len(state) == 3 and all(len(p["isr"]) == 3 for p in state.values())


def can_connect(node, host: str, port: int = 9092) -> bool:
    code, _ = node.exec(f"nc -z -w 2 {host} {port}")
    return code == 0


def test_partition_cuts_new_and_established_connections_and_shrinks_isr(cluster):
    assert wait_until(lambda: isr_full(cluster), 60)
    victim, other = cluster.brokers[0], cluster.brokers[1]
    assert can_connect(victim, other.hostname)
    # An established stream from the victim to another broker, started before the cut.
    other.exec("(timeout 30 nc -l -p 7777 > /tmp/stream &) ; true")
    time.sleep(0.3)
    victim.exec(f"((for i in $(seq 1 250); do echo $i; sleep 0.1; done) | timeout 30 nc {other.hostname} 7777 &) ; true")
    time.sleep(1.5)

    recorder = ListRecorder()
    nemesis = PartitionNemesis(("one",)).setup(cluster, recorder, TOPIC)
    try:
        # A replayed event (recorded targets): exactly this victim, not one chosen at random.
        value = nemesis.invoke("start", {"shape": "one", "targets": [victim.node_id]}, random.Random(0))
        assert value["targets"] == [victim.node_id]
        lines_at_cut = int(other.exec("wc -l < /tmp/stream")[1])
        time.sleep(2)
        assert int(other.exec("wc -l < /tmp/stream")[1]) == lines_at_cut, "established connection kept flowing"
        assert not can_connect(victim, other.hostname)
        assert wait_until(lambda: any(victim.node_id not in p["isr"] for p in cluster.partition_state(TOPIC).values()), 40)
        # The isolated broker still serves its own stale cache (itself in every ISR):
        # the reason partition_state trusts only what a majority of brokers reports.
        own = cluster.broker_views().get(victim.node_id)
        assert own is None or all(victim.node_id in p["isr"] for p in own.topics[TOPIC].values()), own
    finally:
        nemesis.teardown()  # a failed step must not leave the module's cluster cut for the next tests
    assert harness_rules(victim) == [] and harness_rules(other) == []
    assert can_connect(victim, other.hostname)
    assert wait_until(lambda: isr_full(cluster), 90)
    assert int(other.exec("wc -l < /tmp/stream")[1]) > lines_at_cut, "stream did not resume after heal"
    assert [f for f, _ in recorder.events] == ["start-partition", "stop-partition"]
    assert recorder.events[0][1]["grudge"][str(victim.node_id)] == sorted(b.node_id for b in cluster.brokers if b is not victim)


def test_kill_removes_the_pid_and_the_broker_restart_rejoins_the_isr(cluster):
    assert wait_until(lambda: isr_full(cluster), 90)
    recorder = ListRecorder()
    nemesis = KillNemesis(("one",)).setup(cluster, recorder, TOPIC)
    try:
        value = nemesis.invoke("start", {"target": "one"}, random.Random(1))
        victim = cluster.node(value["targets"][0])
        assert value["pids"][str(victim.node_id)] is not None
        assert victim.pid() is None
        victim.container.reload()
        assert victim.container.status == "running"
        assert wait_until(lambda: victim.node_id not in cluster.admin().list_topics(timeout=5).brokers, 40)
    finally:
        nemesis.invoke("stop", {}, random.Random(1))
    assert victim.pid() is not None
    assert wait_until(lambda: isr_full(cluster), 90)
    assert [f for f, _ in recorder.events] == ["kill", "restart"]


def test_pause_stops_answers_while_the_container_runs_and_resume_restores_them(cluster):
    assert wait_until(lambda: isr_full(cluster), 90)
    nemesis = PauseNemesis(("one",)).setup(cluster, ListRecorder(), TOPIC)
    try:
        value = nemesis.invoke("start", {"target": "one"}, random.Random(2))
        victim = cluster.node(value["targets"][0])
        direct = AdminClient({"bootstrap.servers": f"127.0.0.1:{victim.host_port}"})
        with pytest.raises(KafkaException):
            direct.list_topics(timeout=3)
        victim.container.reload()
        assert victim.container.status == "running" and victim.pid() is not None  # stopped, not gone
    finally:
        nemesis.invoke("stop", {}, random.Random(2))
    assert wait_until(lambda: bool(AdminClient({"bootstrap.servers": f"127.0.0.1:{victim.host_port}"}).list_topics(timeout=3).brokers), 30)
    assert wait_until(lambda: isr_full(cluster), 90)


def append_times_by_partition(cluster, topic: str, partitions: int) -> dict[int, float]:
    """Produce one record per partition and read back the broker-stamped (LogAppendTime) seconds."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all"})
    for p in range(partitions):
        producer.produce(topic, value=b"tick", partition=p)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": f"clock-{time.monotonic_ns()}", "enable.auto.commit": False})
    stamps: dict[int, float] = {}
    try:
        for p in range(partitions):
            high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            consumer.assign([TopicPartition(topic, p, high - 1)])
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None
            stamps[p] = msg.timestamp()[1] / 1000
    finally:
        consumer.close()
    return stamps


def test_clock_bump_shifts_only_the_target_brokers_own_timestamps(cluster):
    topic = "clock"
    cluster.create_topic(topic, partitions=3, replication_factor=1, config={"message.timestamp.type": "LogAppendTime"})
    leaders = {p: s["leader"] for p, s in cluster.partition_state(topic).items()}
    skewed = leaders[0]
    nemesis = ClockNemesis().setup(cluster, ListRecorder(), topic)
    nemesis.shift(skewed, 3_600_000)
    time.sleep(2.5)  # libfaketime re-reads the offset file at most once a second
    now = time.time()
    stamps = append_times_by_partition(cluster, topic, 3)
    for p, stamp in stamps.items():
        expected = 3600 if leaders[p] == skewed else 0
        assert abs(stamp - now - expected) < 30, (p, leaders[p], stamp - now)
    assert any(leaders[p] != skewed for p in stamps) or len(set(leaders.values())) == 1

    nemesis.teardown()
    time.sleep(2.5)
    now = time.time()
    assert all(abs(stamp - now) < 30 for stamp in append_times_by_partition(cluster, topic, 3).values())


def test_packet_loss_drops_some_packets_between_brokers(cluster, report_figure):
    assert wait_until(lambda: isr_full(cluster), 90)
    nemesis = PacketLossNemesis(probability=0.3).setup(cluster, ListRecorder(), TOPIC)
    try:
        value = nemesis.invoke("start", {"target": "one"}, random.Random(3))
        victim = cluster.node(value["targets"][0])
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all"})
        # Replication traffic crosses the lossy links. One round of 300 records is a few fetch round
        # trips: 0 drops after one round in CI and in 1 of 2 runs here (2026-11-29), 3, 12 and 7
        # in three others; so rounds go on until a drop shows, for at most 30 s.
        deadline, dropped, rounds = time.monotonic() + 30, 0, 0
        while dropped == 0 and time.monotonic() < deadline:
            for i in range(300):
                producer.produce(TOPIC, value=str(i).encode(), partition=i % 3)
            producer.flush(60)
            rounds += 1
            code, out = victim.exec("iptables -w -L KH_LOSS_IN -v -n -x")
            dropped = sum(int(line.split()[0]) for line in out.splitlines()[2:] if line.strip())
        assert dropped > 0, (rounds, out)
        report_figure(f"packet loss: {dropped} packet(s) dropped into broker {victim.node_id} after {rounds} round(s) of 300 records")
    finally:
        nemesis.teardown()
    assert harness_rules(victim) == []


def harness_rules(node) -> list[str]:
    """Every harness iptables rule on `node`, of any kind (what a heal must leave empty)."""
    code, out = node.exec("iptables -w -S 2>/dev/null")
    return [line for line in out.splitlines() if line.startswith("-A KH_")]
