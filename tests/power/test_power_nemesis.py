"""The power nemesis on a real 3-broker cluster whose data directories are lossy mounts.

Unflushed appends exist: the topic never fsyncs (Kafka's default). A cut of every broker must
drop bytes, power-on must bring the brokers back on the same directories, the containers stay
unprivileged, and nothing is left mounted once the cluster is gone.
"""

from __future__ import annotations

import random
import time

import pytest
from confluent_kafka import Producer

from harness.cluster import KafkaCluster
from harness.provision.lossyfs import mounted
from nemesis.power import WORST_CASE, PowerNemesis

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TOPIC = "power"


class ListRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def nemesis(self, f: str, value: dict) -> None:
        self.events.append((f, value))


def produce(cluster: KafkaCluster, count: int) -> int:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all", "linger.ms": 5})
    acked = [0]

    def done(err, msg) -> None:  # type: ignore[no-untyped-def]
        acked[0] += err is None

    for i in range(count):
        producer.produce(TOPIC, value=f"{i:08d}".encode() * 16, callback=done)
        producer.poll(0)
    producer.flush(30)
    return acked[0]


def wait_for_leaders(cluster: KafkaCluster, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = cluster.partition_state(TOPIC)
            if len(state) == 3 and all(p["leader"] >= 0 for p in state.values()):
                return True
        except Exception:  # brokers still starting
            pass
        time.sleep(1)
    return False


def test_power_cut_of_all_brokers_drops_unflushed_bytes_and_they_come_back(prepared) -> None:
    recorder = ListRecorder()
    with KafkaCluster(brokers=3, lossy_data=True) as cluster:
        run_id = cluster.run_id
        assert len(mounted(f"lossyfs:{run_id}:")) == 3
        host_config = cluster.brokers[0].container.get_wrapped_container().attrs["HostConfig"]
        assert not host_config["Privileged"] and host_config["CapAdd"] == ["NET_ADMIN"]
        cluster.create_topic(TOPIC, partitions=3, replication_factor=3, config={"min.insync.replicas": 2})
        power = PowerNemesis().setup(cluster, recorder, TOPIC)
        assert produce(cluster, 3000) == 3000

        cut = power.invoke("start", {"target": "all"}, random.Random(1))
        assert sorted(cut["targets"]) == [1, 2, 3] and cut["model"] == WORST_CASE
        assert set(cut["dropped"]) == {"1", "2", "3"}
        assert all(d["dropped_bytes"] > 0 for d in cut["dropped"].values()), cut["dropped"]
        assert all(b.pid() is None for b in cluster.brokers)

        back = power.invoke("stop", {}, random.Random(1))
        assert sorted(back["targets"]) == [1, 2, 3]
        assert wait_for_leaders(cluster, 120), "the brokers did not come back after the power cut"
        assert [f for f, _ in recorder.events] == ["power-off", "power-on"]
    assert mounted(f"lossyfs:{run_id}:") == []
