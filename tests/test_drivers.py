"""Client drivers (workloads/drivers/): the protocol, the registry, librdkafka as the first driver,
and the proof that the workloads stand on the protocol alone: each one runs unchanged on a second
driver (tests/memory_driver.py, a toy Kafka in memory) and writes a valid history with nothing
forbidden in it, which is what issue 35's Java client has to do."""

from __future__ import annotations

import ast
import inspect
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

from analysis.reference import checker as reference
from analysis.reference import eos as reference_eos
from harness.errors import HarnessError
from harness.history import Recorder, read_history, validate_history
from harness.run.config import RunConfig
from tests.memory_driver import MemoryConsumer, MemoryDriver, MemoryProducer
from workloads import drivers, registry
from workloads.drivers import base
from workloads.drivers.java import JavaConsumer, JavaDriver, JavaProducer
from workloads.drivers.librdkafka import LibrdkafkaConsumer, LibrdkafkaDriver, LibrdkafkaProducer, client_error
from workloads.outcomes import error_text
from workloads.profiles import get_profile

ROOT = Path(__file__).resolve().parents[1]


def protocol_methods(protocol: type) -> dict[str, list[str]]:
    return {name: list(inspect.signature(f).parameters) for name, f in vars(protocol).items()
            if callable(f) and not name.startswith("_")}


@pytest.mark.parametrize("protocol, implementations", [
    (base.Driver, [LibrdkafkaDriver, MemoryDriver, JavaDriver]),
    (base.ProducerDriver, [LibrdkafkaProducer, MemoryProducer, JavaProducer]),
    (base.ConsumerDriver, [LibrdkafkaConsumer, MemoryConsumer, JavaConsumer]),
])
def test_each_driver_implements_every_method_of_the_protocol_with_its_parameters(protocol, implementations):
    wanted = protocol_methods(protocol)
    assert wanted, protocol
    for cls in implementations:
        for name, params in wanted.items():
            assert list(inspect.signature(getattr(cls, name)).parameters) == params, f"{cls.__name__}.{name}"


def test_the_registry_names_librdkafka_as_the_default_and_refuses_an_unknown_driver():
    assert drivers.names() == ("librdkafka", "java") and drivers.DEFAULT == "librdkafka"
    assert isinstance(drivers.make(), LibrdkafkaDriver)
    assert set(drivers.make().versions()) == {"confluent-kafka", "librdkafka"}
    with pytest.raises(HarnessError, match="unknown client driver 'jvm'") as refused:
        drivers.make("jvm")
    assert refused.value.hint and "librdkafka" in refused.value.hint


def test_only_the_librdkafka_driver_imports_confluent_kafka_in_workloads():
    """Everything above the driver is client-neutral, so a second driver needs no change there."""
    importers = []
    for path in sorted((ROOT / "workloads").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n.split(".")[0] == "confluent_kafka" for n in names):
                importers.append(str(path.relative_to(ROOT)))
    assert sorted(set(importers)) == ["workloads/drivers/librdkafka.py"]


def test_librdkafka_errors_keep_the_history_s_error_text_and_flags():
    err = KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True, txn_requires_abort=True)
    converted = client_error(KafkaException(err))
    assert str(converted) == error_text(converted) == "_TIMED_OUT: timed out" == error_text(KafkaException(err))
    assert (converted.retriable, converted.txn_requires_abort, converted.fatal) == (True, True, False)
    assert error_text(client_error(RuntimeError("Consumer closed"))) == "RuntimeError: Consumer closed"
    assert error_text(BufferError("Local: Queue full")) == "BufferError: Local: Queue full"


def test_the_run_s_workloads_take_a_driver_by_name(monkeypatch, tmp_path):
    monkeypatch.setitem(drivers.DRIVERS, "memory", "tests.memory_driver:MemoryDriver")
    config = RunConfig(store=tmp_path, workload="queue", partitions=3, producers=1, consumers=1, rate=10)
    for name in registry.names():
        assert registry.make(name, config, get_profile("safe"), None, "-", "queue", "r1").clients.driver.name == "librdkafka"
        assert registry.make(name, config, get_profile("safe"), None, "-", "queue", "r1", driver="memory").clients.driver.name == "memory"


def run_on_memory(name: str, tmp_path: Path, seconds: float = 1.5, **settings) -> tuple[list[dict], dict]:
    """One workload on the memory driver: start, `seconds` of operations, stop, drain."""
    spec = registry.WORKLOADS[name]
    path = tmp_path / "history.jsonl"
    with Recorder(path) as recorder:
        workload = spec.load()(recorder, "memory:0", "queue", get_profile("safe"), partitions=4, producers=2, consumers=2,
                               rate=400, seed=3, group_id=f"{name}-mem", driver=MemoryDriver(partitions=4), **settings)
        workload.start(ready_timeout_s=10)
        time.sleep(seconds)
        workload.stop(timeout_s=20)
        drain = workload.drain(timeout_s=10).as_json()
        assert workload.errors == []
    assert validate_history(path) == []
    return read_history(path), drain


def drained_values(events: list[dict], drain: dict) -> set[int]:
    return {r["value"] for e in events if e["process"] in drain["processes"] and e["f"] == "poll" and e["type"] == "ok"
            for r in e["value"]["records"]}


def test_the_queue_workload_on_a_second_driver_writes_a_valid_history(tmp_path):
    events, drain = run_on_memory("queue", tmp_path, crash_clients_s=0.5)
    assert drain["complete"] and not drain["undrained"]
    acked = {e["value"]["value"] for e in events if e["f"] == "send" and e["type"] == "ok"}
    assert len(acked) > 200 and acked <= drained_values(events, drain)
    assert any(e["f"] == "crash" for e in events) and any(e["f"] == "producer" for e in events)
    assert {k: v for k, v in reference.counts(events).items() if v} == {}


def test_the_txn_workload_on_a_second_driver_never_shows_an_aborted_record(tmp_path):
    events, drain = run_on_memory("txn", tmp_path, abort_probability=0.3)
    outcomes = {e["type"] for e in events if e["f"] == "txn"}
    assert outcomes == {"invoke", "ok", "fail"}
    aborted = {s["value"] for e in events if e["f"] == "txn" and e["type"] == "fail" for s in e["value"]["sends"]}
    read = {r["value"] for e in events if e["f"] == "poll" and e["type"] == "ok" for r in e["value"]["records"]}
    assert aborted and read and not aborted & read
    assert drain["complete"] and {k: v for k, v in reference.counts(events).items() if v} == {}


def test_the_eos_pipeline_on_a_second_driver_commits_every_input_once(tmp_path):
    events, drain = run_on_memory("eos", tmp_path, abort_probability=0.2)
    assert drain["complete"] and drain["pipeline"]["caught_up"], drain["pipeline"]
    found = reference.findings(events)
    positions = {(r["key"], r["offset"], r["value"]) for e in events if e["type"] == "ok" and e["f"] in ("poll", "txn")
                 for r in (e.get("value") or {}).get("records") or []}
    found.update(reference_eos.findings(events, positions))
    assert {k: sorted(v)[:5] for k, v in found.items() if v and k not in ("G0", "int-send-skip")} == {}
    fed = {e["value"]["value"] for e in events if e["f"] == "send" and e["type"] == "ok"}
    committed = [r["value"] for e in events if e["f"] == "txn" and e["type"] == "ok" for r in e["value"]["records"]]
    assert fed and sorted(committed) == sorted(fed), "each fed input committed by exactly one transaction"
    assert any(e["f"] == "txn" and e["type"] == "fail" for e in events), "some transactions aborted on purpose"


@pytest.mark.parametrize("settings, incremental", [({"group.protocol": "consumer"}, True),
                                                   ({"partition.assignment.strategy": "cooperative-sticky"}, True),
                                                   ({}, False)])
def test_librdkafka_reports_the_assignment_held_when_rebalances_are_incremental(settings, incremental):
    """KIP-848's protocol and cooperative-sticky name only the partitions added (on_assign) or taken
    (on_revoke): the driver reports what the consumer holds, so the checker never reads an increment
    as the whole assignment and drops the other keys' read sequences (found by issue 35 item 7)."""
    from confluent_kafka import TopicPartition

    seen: list[list[int]] = []
    consumer = LibrdkafkaConsumer({"bootstrap.servers": "127.0.0.1:9", "group.id": "g", **settings}, report_eof=False)
    try:
        consumer._on_assign = seen.append
        tps = lambda *ps: [TopicPartition("t", p) for p in ps]  # noqa: E731
        consumer._assigned(consumer.raw, tps(0, 1, 2, 3) if not incremental else tps(0, 1))
        if incremental:
            consumer._assigned(consumer.raw, tps(2, 3))  # an increment
            consumer._revoked(consumer.raw, tps(0))
            assert seen == [[0, 1], [0, 1, 2, 3], [1, 2, 3]]
        else:
            consumer._revoked(consumer.raw, tps(0, 1, 2, 3))  # eager: revoke all, then the new whole set
            consumer._assigned(consumer.raw, tps(1, 2))
            assert seen == [[0, 1, 2, 3], [1, 2]]
    finally:
        consumer.close()


def test_librdkafka_flush_raises_the_drivers_exception_for_a_fatal_error():
    # A fenced transactional producer's flush raised confluent-kafka's own KafkaException, which the
    # txn scenario's close did not expect (helper-14's run 20261126T060210-ef7cfe ended FAILED).
    from confluent_kafka import KafkaError, KafkaException

    from workloads.drivers.base import ClientException
    from workloads.drivers.librdkafka import LibrdkafkaProducer

    class Fenced:
        def flush(self, timeout_s: float) -> int:
            raise KafkaException(KafkaError(KafkaError._FENCED, "Producer fenced by newer instance", fatal=True))

    producer = LibrdkafkaProducer.__new__(LibrdkafkaProducer)
    producer.raw = Fenced()
    with pytest.raises(ClientException) as caught:
        producer.flush(1.0)
    assert caught.value.error.fatal and "_FENCED" in str(caught.value)
