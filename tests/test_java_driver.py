"""The Java driver (workloads/drivers/java.py): the real Apache Kafka Java client in a JVM child.

Without a broker: the JVM ends when its stdin closes (also when the Python side is SIGKILLed), and
when the JVM is SIGKILLed every pending send still gets an outcome, recorded unknown, in a valid
history. With a real cluster (slow): the queue workload on the Java client, checked by the
reference checker."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from analysis.reference import checker as reference
from harness.errors import HarnessError
from harness.history import Recorder, read_history, validate_history
from harness.provision.java_client import KNOWN_VERSIONS, ensure_java_client
from workloads import drivers
from workloads.clients import ProducerClient
from workloads.drivers.base import ClientError, ClientException
from workloads.drivers.java import JavaDriver
from workloads.outcomes import send_outcome
from workloads.profiles import get_profile

ROOT = Path(__file__).resolve().parents[1]


def gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def closed_port() -> int:
    """A local port nothing listens on: every connection is refused, so nothing is ever delivered."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def driver():
    d = JavaDriver()
    yield d
    d.close()


def test_the_registry_makes_the_java_driver_with_a_version_and_refuses_a_bad_one(tmp_path):
    made = drivers.make("java", KNOWN_VERSIONS[-1], log_path=tmp_path / "java-client.log")
    try:
        assert isinstance(made, JavaDriver) and made.client.version == KNOWN_VERSIONS[-1]
        assert made.log_path == tmp_path / "java-client.log"
        versions = made.versions()
        assert versions["kafka-clients"] == KNOWN_VERSIONS[-1] and versions["java"].split(".")[0].isdigit()
    finally:
        made.close()
    with pytest.raises(HarnessError) as refused:
        drivers.make("java", "4.4")
    assert "4.4.0" in refused.value.hint
    with pytest.raises(HarnessError, match="not available for the librdkafka driver") as refused:
        drivers.make("librdkafka", "9.9.9")
    assert drivers.make("librdkafka").versions()["librdkafka"] in refused.value.hint


def test_a_kafka_clients_version_missing_from_maven_central_names_versions_that_resolve(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_HARNESS_CACHE", str(tmp_path))
    with pytest.raises(HarnessError, match="kafka-clients 4.9.9 is not available") as refused:
        ensure_java_client("4.9.9")
    assert "4.4.0" in refused.value.hint and "4.3.1" in refused.value.hint
    assert not list((tmp_path / "java-client").rglob("manifest.json"))  # nothing half-built is left as if complete
    assert [p.name for p in (tmp_path / "java-client" / "4.9.9").iterdir()] == [".lock"]  # and no scratch either


def test_the_jvm_exits_when_the_driver_closes_its_stdin(driver):
    driver.consumer({"bootstrap.servers": f"127.0.0.1:{closed_port()}", "group.id": "g"})
    pid = driver.worker().pid
    began = time.monotonic()
    driver.close()
    assert gone(pid, 5), "the JVM outlived its stdin"
    assert time.monotonic() - began < 5  # it halts at once; the margin is for a loaded 2-core machine
    with pytest.raises(ClientException, match="closed"):
        driver.producer({"bootstrap.servers": "x:1"}, lambda *a: None, lambda *a: None)


def test_what_the_jvm_itself_prints_to_stdout_never_reaches_the_protocol(tmp_path, monkeypatch, caplog):
    # JFR prints "Started recording 1." to stdout from inside the JVM, where no Java code can redirect
    # it; on stdout-as-protocol that line raised a JSONDecodeError in the reader (seen profiling the feed).
    monkeypatch.setenv("JDK_JAVA_OPTIONS", f"-XX:StartFlightRecording:filename={tmp_path / 'w.jfr'}")
    d = JavaDriver()
    try:
        with caplog.at_level("DEBUG", logger="workloads.drivers.java_worker"):
            assert d.versions()["kafka-clients"]  # a call and its reply, after JFR's lines
            producer = d.producer({"bootstrap.servers": f"127.0.0.1:{closed_port()}"}, lambda *a: None,
                                  lambda *a: None)
            producer.close()
        worker = d.worker()
        deadline = time.monotonic() + 10  # the stderr thread reads on its own time
        while not any("Started recording" in line for line in worker.stderr_tail) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert any("Started recording" in line for line in worker.stderr_tail), list(worker.stderr_tail)
        assert not [r for r in caplog.records if r.levelno >= 30 or "not a reply" in r.getMessage()]
    finally:
        d.close()


def test_a_sigkill_of_python_never_leaves_the_jvm_behind(tmp_path):
    script = textwrap.dedent("""
        import sys, time
        from workloads.drivers.java import JavaDriver
        d = JavaDriver()
        d.producer({"bootstrap.servers": "127.0.0.1:%d"}, lambda *a: None, lambda *a: None)
        print(d.worker().pid, flush=True)
        time.sleep(600)
    """ % closed_port())
    owner = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        jvm = int(owner.stdout.readline())  # type: ignore[union-attr]
        os.kill(jvm, 0)  # alive while its owner is
        owner.kill()  # SIGKILL: no finally, no atexit
        owner.wait(10)
        assert gone(jvm, 5), f"JVM {jvm} survived the SIGKILL of the Python process that started it"
    finally:
        owner.kill()


def test_a_sigkilled_jvm_gives_every_pending_send_an_unknown_outcome_and_the_history_stays_valid(driver, tmp_path):
    bootstrap = f"127.0.0.1:{closed_port()}"  # sends wait for metadata that never comes: all stay pending
    path = tmp_path / "history.jsonl"
    with Recorder(path) as recorder:
        producer = ProducerClient(0, recorder, bootstrap, "t", get_profile("safe"), driver=driver).open()
        for v in range(200):
            producer.send(v % 4, v)
        txn = driver.producer({"bootstrap.servers": bootstrap, "transactional.id": "x", "enable.idempotence": True},
                              lambda *a: None, lambda *a: None)
        raised: list[BaseException] = []
        waiting = threading.Thread(target=lambda: _catch(raised, txn.init_transactions, 30))
        waiting.start()
        time.sleep(0.5)
        assert producer.producer is not None and producer.producer.flush(0) == 200, "nothing can have been delivered"
        os.kill(driver.worker().pid, signal.SIGKILL)
        waiting.join(10)
        assert not waiting.is_alive()
        assert len(raised) == 1 and isinstance(raised[0], ClientException) and raised[0].error.name == "JvmExited"
        assert producer.producer.flush(5) == 0, "every send got its outcome"
        assert producer.fatal and "JvmExited" in producer.fatal  # the workload replaces the producer
        producer.close(1)
        # The driver starts a new JVM for the next client.
        again = driver.producer({"bootstrap.servers": bootstrap}, lambda *a: None, lambda *a: None)
        again.close()
    assert validate_history(path) == []
    events = read_history(path)
    completions = [e for e in events if e["f"] == "send" and e["type"] != "invoke"]
    assert len(completions) == 200 and {e["type"] for e in completions} == {"info"}
    assert all(e["error"].startswith("JvmExited: ") for e in completions)


def _catch(into: list[BaseException], call, *args) -> None:
    try:
        call(*args)
    except BaseException as exc:  # noqa: BLE001 - the test reads it
        into.append(exc)


def test_java_error_names_are_classified_conservatively():
    def outcome(name: str) -> str:
        return send_outcome(ClientError(name, "m"))
    # static properties of the record or the client's rights: every attempt failed
    assert {outcome(n) for n in ("MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "TOPIC_AUTHORIZATION_FAILED")} == {"fail"}
    # anything an earlier attempt or the append may have survived: unknown
    for name in ("TimeoutException", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "KafkaException",
                 "IllegalStateException", "OUT_OF_ORDER_SEQUENCE_NUMBER", "PRODUCER_FENCED", "JvmExited",
                 "TransactionAbortedException", "NETWORK_EXCEPTION", "NOT_LEADER_OR_FOLLOWER"):
        assert outcome(name) == "info", name


def _queue_run(cluster, driver, path, topic: str, seconds: float, **options) -> dict:  # type: ignore[no-untyped-def]
    """The queue workload on the Java client for `seconds` (2 producers, 2 consumers, 4 partitions,
    `safe`), stopped and drained into the history at `path`; the drain's record."""
    from workloads.queue import QueueWorkload

    cluster.create_topic(topic, partitions=4, replication_factor=3, config=get_profile("safe").topic_config())
    with Recorder(path) as recorder:
        workload = QueueWorkload(recorder, cluster.bootstrap_servers(), topic, get_profile("safe"), partitions=4,
                                 producers=2, consumers=2, seed=5, group_id=topic, driver=driver, **options)
        workload.start(ready_timeout_s=60)
        time.sleep(seconds)
        workload.stop(timeout_s=60)
        drain = workload.drain(timeout_s=60).as_json()
        assert workload.errors == []
    return drain


@pytest.mark.slow
@pytest.mark.docker
def test_the_queue_workload_on_the_java_client_keeps_every_acknowledged_record(prepared, tmp_path, report_figure):
    from harness.cluster import KafkaCluster

    driver = JavaDriver(log_path=tmp_path / "java-client.log")
    path = tmp_path / "history.jsonl"
    try:
        with KafkaCluster(brokers=3) as cluster:
            drain = _queue_run(cluster, driver, path, "java-queue", seconds=10, rate=500, crash_clients_s=3.0)
            # A record larger than max.request.size: the Java client's RecordTooLargeException, named and
            # classified end to end (a static property of the record: a definite failure).
            outcomes: list = []
            big = driver.producer({"bootstrap.servers": cluster.bootstrap_servers(), "max.request.size": 10},
                                  lambda *a: outcomes.append(a), lambda k, v, err: outcomes.append(err))
            big.send("java-queue", 0, 123456789)
            assert big.flush(30) == 0
            big.close()
            assert len(outcomes) == 1 and isinstance(outcomes[0], ClientError), outcomes
            assert outcomes[0].name == "MESSAGE_TOO_LARGE" and send_outcome(outcomes[0]) == "fail", outcomes[0]
    finally:
        driver.close()
    assert validate_history(path) == []
    events = read_history(path)
    acked = {e["value"]["value"] for e in events if e["f"] == "send" and e["type"] == "ok"}
    read = {r["value"] for e in events if e["process"] in drain["processes"] and e["f"] == "poll" and e["type"] == "ok"
            for r in e["value"]["records"]}
    epochs = {r["epoch"] for e in events if e["f"] == "poll" and e["type"] == "ok" for r in e["value"]["records"]}
    pids = [e for e in events if e["f"] == "producer"]
    report_figure(f"java client, 10 s at 500/s: {len(acked)} acknowledged, {len(read)} drained, "
                  f"{len(pids)} producer ids, leader epochs {sorted(epochs)[:5]}")
    assert drain["complete"] and len(acked) > 3000 and acked <= read
    assert None not in epochs and pids, "leader epochs and producer ids are recorded, as with librdkafka"
    assert any(e["f"] == "crash" for e in events)
    assert {k: v for k, v in reference.counts(events).items() if v} == {}


@pytest.mark.slow
@pytest.mark.docker
def test_the_feed_runs_the_produce_loop_in_the_jvm_and_its_history_keeps_every_acknowledged_record(prepared, tmp_path,
                                                                                                   report_figure):
    """Without crash-clients, the queue workload's producers on the Java client are fed in the JVM
    (Feed._fed): rows of invokes and acknowledgements, one history, the same rules. A SIGKILL of the
    JVM mid-feed leaves its unanswered sends unknown and the history valid."""
    from harness.cluster import KafkaCluster

    driver = JavaDriver(log_path=tmp_path / "java-client.log")
    path = tmp_path / "history.jsonl"
    try:
        with KafkaCluster(brokers=3) as cluster:
            drain = _queue_run(cluster, driver, path, "java-feed", seconds=8, rate=2000)
            killed = tmp_path / "killed.jsonl"
            with Recorder(killed) as recorder:  # the JVM SIGKILLed while it feeds
                producer = ProducerClient(100, recorder, cluster.bootstrap_servers(), "java-feed", get_profile("safe"),
                                          driver=driver).open()
                producer.feed(0, 1, 4, 5000.0, 9, 0)
                time.sleep(2)
                os.kill(driver.worker().pid, signal.SIGKILL)
                time.sleep(1)
                producer.close(2)
    finally:
        driver.close()
    assert validate_history(path) == []
    events = read_history(path)
    invoked = [e for e in events if e["f"] == "send" and e["type"] == "invoke"]
    acked = {e["value"]["value"] for e in events if e["f"] == "send" and e["type"] == "ok"}
    read = {r["value"] for e in events if e["process"] in drain["processes"] and e["f"] == "poll" and e["type"] == "ok"
            for r in e["value"]["records"]}
    assert {e["value"]["value"] % 2 for e in invoked} == {0, 1} and len({e["value"]["value"] for e in invoked}) == len(invoked)
    assert drain["complete"] and len(acked) > 8000 and acked <= read, (len(acked), len(read))
    assert any(e["f"] == "producer" for e in events), "producer ids are recorded, as on the per-send path"
    assert {k: v for k, v in reference.counts(events).items() if v} == {}
    assert validate_history(killed) == []
    after = read_history(killed)
    sent = [e for e in after if e["f"] == "send" and e["type"] == "invoke"]
    done = [e for e in after if e["f"] == "send" and e["type"] != "invoke"]
    assert len(sent) > 1000 and len(done) <= len(sent)
    report_figure(f"java feed, 8 s at 2,000/s: {len(invoked)} invoked, {len(acked)} acknowledged, {len(read)} drained; "
                  f"JVM SIGKILLed mid-feed: {len(sent)} invoked, {len(done)} completed, the rest unknown")


@pytest.mark.chaos
@pytest.mark.docker
@pytest.mark.slow
def test_the_java_client_under_a_leader_kill_and_in_the_txn_and_eos_workloads(prepared, tmp_path, report_figure):
    """Heavier (the nightly's -m chaos): the queue workload, assigning and then subscribed, while the
    leader of partition 0 is SIGKILLed and restarted, then the txn and eos workloads, all on one Java
    driver."""
    from harness.cluster import KafkaCluster
    from workloads import registry

    driver = JavaDriver(log_path=tmp_path / "java-client.log")
    profile = get_profile("safe")
    figures = []
    try:
        with KafkaCluster(brokers=3) as cluster:
            for label, name, extra in (("queue", "queue", {}), ("subscribe", "queue", {"subscribe": True}),
                                       ("txn", "txn", {"abort_probability": 0.3}), ("eos", "eos", {"abort_probability": 0.2})):
                path = tmp_path / f"{label}.jsonl"
                with Recorder(path) as recorder:
                    workload = registry.WORKLOADS[name].load()(
                        recorder, cluster.bootstrap_servers(), f"java-{label}", profile, partitions=4, producers=2,
                        consumers=2, rate=300, seed=11, group_id=f"java-{label}", driver=driver, **extra)
                    for topic in workload.topics:
                        cluster.create_topic(topic, partitions=4, replication_factor=3, config=profile.topic_config())
                    workload.start(ready_timeout_s=90)
                    if label in ("queue", "subscribe"):  # subscribe: the group rebalances around the killed broker
                        time.sleep(4)
                        victim = cluster.leader_of(f"java-{label}", 0)
                        assert victim is not None
                        victim.kill_process()
                        time.sleep(8)
                        victim.start_process()
                        time.sleep(6)
                    else:
                        time.sleep(8)
                    workload.stop(timeout_s=90)
                    drain = workload.drain(timeout_s=90).as_json()
                    assert workload.errors == [], label
                assert validate_history(path) == [], label
                events = read_history(path)
                found = {k: v for k, v in reference.findings(events).items() if v}
                # Kafka's transaction model permits these (analysis/rules/permissions.py, MODEL_PERMITS): two
                # transactions' records interleave on their partitions in either order, e.g. a write cycle (G0)
                # of two committed transactions on keys 0 and 1, as this test's first run found.
                found = {k: v for k, v in found.items() if k not in ("G0", "int-send-skip")}
                assert drain["complete"] and found == {}, (label, drain, {k: sorted(v)[:5] for k, v in found.items()})
                kinds = {(e["f"], e["type"]) for e in events}
                figures.append(f"{label}: {len(events)} events, {sorted(kinds)}")
                if name == "queue":
                    acked = {e["value"]["value"] for e in events if e["f"] == "send" and e["type"] == "ok"}
                    read = {r["value"] for e in events if e["process"] in drain["processes"] and e["f"] == "poll"
                            and e["type"] == "ok" for r in e["value"]["records"]}
                    assert acked and acked <= read
                if name == "txn":
                    assert {"ok", "fail"} <= {e["type"] for e in events if e["f"] == "txn"}
    finally:
        driver.close()
    report_figure("; ".join(figures))
