"""ZooKeeper-era Kafka: the versions that still had the leader-epoch bugs must run here too."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from harness.provision.cleanup import leftovers
from harness.cluster import KafkaCluster
from harness.errors import ClusterError

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def round_trip(cluster: KafkaCluster, topic: str, count: int) -> tuple[dict[int, tuple[int, int]], list[tuple[int, int, int]]]:
    """acks=all without idempotence (0.10.2 predates it): acknowledged positions and what was read back."""
    acked: dict[int, tuple[int, int]] = {}
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all"})
    for value in range(count):
        producer.produce(
            topic, value=str(value).encode(), partition=value % 3,
            on_delivery=lambda err, msg: acked.__setitem__(int(msg.value()), (msg.partition(), msg.offset())) if err is None else None,
        )
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": "versions", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    read: list[tuple[int, int, int]] = []
    deadline = time.monotonic() + 60
    while len(read) < len(acked) and time.monotonic() < deadline:
        read += [(m.partition(), m.offset(), int(m.value())) for m in consumer.consume(500, 1) if not m.error()]
    consumer.close()
    return acked, read


def test_kafka_0_10_2_runs_with_zookeeper_and_keeps_acknowledged_records(prepared, report_figure):
    with KafkaCluster(brokers=3, kafka_version="0.10.2.2") as cluster:
        report_figure(f"Kafka 0.10.2.2 + ZooKeeper, 3 brokers, ready in {cluster.timings['ready_s']:.1f} s")
        assert cluster.metadata == "zookeeper" and cluster.zookeeper is not None
        assert cluster.active_controller() in cluster.brokers
        cluster.create_topic("old", partitions=3, replication_factor=3, config={"min.insync.replicas": 2})
        assert cluster.leader_of("old", 0) in cluster.brokers
        acked, read = round_trip(cluster, "old", 600)
        assert len(acked) == 600
        assert sorted((p, o) for p, o, _ in read) == sorted(acked.values())
        assert all(acked[v] == (p, o) for p, o, v in read)
        refused, up_s = _kill_and_restart_at_once(cluster)
        report_figure(f"0.10.2.2 broker killed and restarted at once: registered again after {up_s:.1f} s "
                      f"({'after ZooKeeper refused the first restart' if refused else 'no refusal this time'})")
        run_id = cluster.run_id
    assert leftovers(run_id).containers == []


def _kill_and_restart_at_once(cluster: KafkaCluster) -> tuple[bool, float]:
    """Kill a broker and start it again at once, while ZooKeeper still holds its session: 0.10.2.2
    then refuses the new JVM ("already registered"), and the supervisor (nemesis/supervisor.py)
    starts it again. Whether or not a refusal came, the broker must be registered again."""
    from nemesis import supervisor
    from nemesis.process import KillNemesis

    events: list[tuple[str, dict]] = []
    kill = KillNemesis(("one",))
    kill.cluster, kill.recorder = cluster, None
    kill.record = lambda f, value: events.append((f, value))  # type: ignore[method-assign]
    victim = cluster.brokers[-1]
    victim.kill_process()
    mark = victim.log_size()  # server.log, read through the node (harness/cluster/transport.py)
    began = time.monotonic()
    kill.undo(victim)
    started = False
    while time.monotonic() - began < 60 and not started:
        time.sleep(0.5)
        after = victim.read_log(mark)[0]
        started = after.rfind(supervisor.STARTED) > after.rfind(supervisor.REFUSED)
    up_s = time.monotonic() - began
    time.sleep(8)  # past the session timeout (6 s): a refused JVM would be gone by now
    assert victim.pid() is not None and victim.node_id in cluster.admin().list_topics(timeout=5).brokers, victim.log_tail(20)
    refusals = [v for f, v in events if f == "restart" and "refused" in v]
    assert all("already registered" in v["refused"] for v in refusals)
    return bool(refusals), up_s


@pytest.mark.parametrize(
    "version,metadata,message",
    [("4.3.1", "zookeeper", "no ZooKeeper mode"), ("1.1.1", "kraft", "predates KRaft")],
)
def test_impossible_metadata_modes_are_refused(prepared, version, metadata, message):
    cluster = KafkaCluster(brokers=1, kafka_version=version, metadata=metadata)
    with pytest.raises(ClusterError, match=message):
        cluster.start()
    assert leftovers(cluster.run_id).containers == []
