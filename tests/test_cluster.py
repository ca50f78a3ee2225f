"""KafkaCluster against real brokers in real containers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from harness.provision.cleanup import leftovers
from harness.cluster import KafkaCluster
from harness.errors import ClusterError, KafkaVersionError
from workloads.roundtrip import RoundTrip, consume, produce

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(prepared, request):
    from conftest import FIGURES_KEY

    with KafkaCluster(brokers=3) as running:
        yield running
    request.config.stash[FIGURES_KEY].append(f"3-broker cluster torn down in {running.timings['teardown_s']:.1f} s")
    assert not leftovers(running.run_id).containers


def test_three_brokers_keep_every_acknowledged_record(cluster, report_figure):
    report_figure(f"3-broker cluster ready in {cluster.timings['ready_s']:.1f} s (warm, includes prepare {cluster.timings['prepare_s']:.1f} s)")
    cluster.create_topic("roundtrip", partitions=6, replication_factor=3, config={"min.insync.replicas": "2"})
    state = cluster.partition_state("roundtrip")
    assert len(state) == 6 and all(len(p["isr"]) == 3 for p in state.values())

    result = RoundTrip()
    produce(cluster.bootstrap_servers(), "roundtrip", 10_000, 6, result)
    assert len(result.acked) == 10_000 and not result.failed
    consume(cluster.bootstrap_servers(), "roundtrip", 6, 10_000, result)
    assert result.missing() == []
    assert result.misplaced() == []
    assert result.out_of_order() == []
    assert len(result.read) == 10_000  # each once


def test_every_broker_is_reachable_from_the_host_and_knows_its_roles(cluster):
    assert len(cluster.brokers) == 3
    ports = {b.host_port for b in cluster.brokers}
    assert len(ports) == 3 and all(isinstance(p, int) and p > 0 for p in ports)
    metadata = cluster.admin().list_topics(timeout=10)
    assert sorted(metadata.brokers) == [1, 2, 3]
    advertised = {b.id: (b.host, b.port) for b in metadata.brokers.values()}
    assert advertised == {b.node_id: ("127.0.0.1", b.host_port) for b in cluster.brokers}
    assert all(b.address.count(".") == 3 for b in cluster.brokers)


def test_leader_and_active_controller_are_cluster_members(cluster):
    cluster.create_topic("roles", partitions=2, replication_factor=3)
    leader = cluster.leader_of("roles", 0)
    assert leader is not None and leader.node_id in cluster.partition_state("roles")[0]["replicas"]
    controller = cluster.active_controller()
    assert controller is not None and controller.node_id in {1, 2, 3}


def test_broker_jvm_is_not_pid_1_and_restarts_with_its_data(cluster):
    cluster.create_topic("restart", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    result = RoundTrip()
    produce(cluster.bootstrap_servers(), "restart", 100, 1, result)
    victim = cluster.brokers[2]
    pid = victim.pid()
    assert pid is not None and pid != 1
    assert victim.kill_process() == pid
    assert victim.pid() is None
    victim.container.reload()
    assert victim.container.status == "running"  # container, address and data stay

    victim.start_process()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        isr = cluster.partition_state("restart").get(0, {}).get("isr", [])
        if victim.node_id in isr:
            break
        time.sleep(0.5)
    assert victim.node_id in cluster.partition_state("restart")[0]["isr"]
    code, out = victim.exec("ls /var/lib/kafka/data/restart-0/")
    assert code == 0 and "00000000000000000000.log" in out


def test_every_broker_jvm_maps_its_versions_class_archive_also_after_a_restart(cluster):
    """harness/cluster/class_archive.py: built by the bootstrap, mounted beside the jars, passed by
    the start script; a JVM that could not use it would start without it, silently, so the test
    reads each JVM's memory maps. The restart is the previous test's kill and start."""
    from harness.cluster.broker_config import KAFKA_LIBS
    from harness.cluster.node import archive_at

    assert cluster.archive is not None and cluster.archive.stat().st_size > (1 << 20)
    for broker in cluster.brokers:
        code, out = broker.exec(f"grep -c '{archive_at(KAFKA_LIBS)}' /proc/{broker.pid()}/maps")
        assert code == 0 and int(out.strip()) > 0, (broker.node_id, out, broker.read_log(0, "stdout.log")[0][-2000:])


def test_teardown_removes_everything_also_after_an_exception(prepared, report_figure):
    with pytest.raises(RuntimeError, match="boom"):
        with KafkaCluster(brokers=1, controllers=1) as single:  # a separate KRaft controller too
            run_id, work_dir = single.run_id, single.work_dir
            assert leftovers(run_id).containers
            # every node has its network address (a separate controller's was "", so cuts at it failed)
            assert all(n.address.count(".") == 3 for n in single.nodes), [(n.hostname, n.address) for n in single.nodes]
            raise RuntimeError("boom")
    assert leftovers(run_id).containers == [] and leftovers(run_id).networks == []
    assert not work_dir.exists()
    report_figure(f"1-broker cluster torn down in {single.timings['teardown_s']:.1f} s")


def test_brokers_zero_is_refused_before_anything_starts():
    with pytest.raises(ClusterError, match="between 1 and 9 brokers"):
        KafkaCluster(brokers=0)


def test_unknown_kafka_version_names_the_version(prepared):
    with pytest.raises(KafkaVersionError, match="9.9.9"):
        KafkaCluster(brokers=1, kafka_version="9.9.9").start()
    with pytest.raises(KafkaVersionError, match="not a Kafka version"):
        KafkaCluster(brokers=1, kafka_version="latest").start()


def test_a_rejected_broker_property_is_named_and_nothing_leaks(prepared):
    cluster = KafkaCluster(brokers=1, broker_config={"num.network.threads": "many"})
    with pytest.raises(ClusterError) as caught:
        cluster.start()
    assert "num.network.threads" in str(caught.value)
    assert leftovers(cluster.run_id).containers == [] and leftovers(cluster.run_id).networks == []


def test_cleanup_removes_what_a_sigkilled_run_left(prepared, tmp_path):
    script = (
        "from harness.cluster import KafkaCluster\n"
        "import sys, time\n"
        "c = KafkaCluster(brokers=1).start()\n"
        "print(c.run_id, flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        run_id = proc.stdout.readline().strip()
        assert run_id, "the child never reported a ready cluster"
        assert leftovers(run_id).containers
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert leftovers(run_id).containers  # a SIGKILLed run cannot tear down
    out = subprocess.run([sys.executable, "-m", "harness", "cleanup", "--run-id", run_id], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert leftovers(run_id).containers == [] and leftovers(run_id).networks == []
