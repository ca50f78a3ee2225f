"""The producer id in the history (workloads/producer_ids.py) and how the duplicate matcher uses it
(analysis/explain/producer_evidence.py): a duplicate is only blamed on librdkafka's epoch bump when the
broker's OutOfOrderSequenceException names the producer that sent it."""

from __future__ import annotations

import json

from analysis.explain.producer_evidence import attach_producer_ids, match_duplicates, out_of_order_sequences
from harness.history import Recorder
from harness.history.files import read_history, validate_history
from workloads.drivers.librdkafka import StatsWatch
from workloads.producer_ids import ProducerIdWatch


def stats(pid: int, epoch: int) -> str:
    return json.dumps({"name": "rdkafka#producer-1", "brokers": {}, "eos": {"idemp_state": "Assigned", "producer_id": pid,
                                                                           "producer_epoch": epoch, "epoch_cnt": 1}})


def test_watch_records_the_first_id_and_each_change_only(tmp_path) -> None:
    path = tmp_path / "history.jsonl"
    with Recorder(path) as recorder:
        watch = StatsWatch(ProducerIdWatch(recorder, 3))  # librdkafka's statistics, through its driver
        for s in (json.dumps({"brokers": {}}), stats(-1, -1), stats(4000, 0), stats(4000, 0), stats(4000, 1), "not json"):
            watch(s)
        recorder.close(parquet=False)
    events = read_history(path)
    assert [(e["process"], e["type"], e["f"], e["value"]) for e in events] == [
        (3, "info", "producer", {"producer_id": 4000, "producer_epoch": 0}),
        (3, "info", "producer", {"producer_id": 4000, "producer_epoch": 1})]
    assert validate_history(path) == []  # an observation: no invoke needed


def send(value: int, process: str, invoke_s: float, complete_s: float, key: int = 0) -> dict:
    return {"value": value, "key": key, "process": process, "invoke_s": invoke_s, "complete_s": complete_s}


def test_one_id_per_process_covers_all_its_sends() -> None:
    sends = attach_producer_ids([send(1, "0", 0.5, 0.7), send(2, "1", 9.0, 9.5)], [("0", 1.2, 77), ("0", 3.0, 77), ("1", 1.0, 78)])
    assert [s["producer_id"] for s in sends] == [77, 78]


def test_a_send_near_an_id_change_gets_no_id() -> None:
    ids = [("0", 1.0, 77), ("0", 5.0, 90)]  # a new id reported at 5.0: it may have been taken up to 1 s earlier
    sends = attach_producer_ids([send(1, "0", 2.0, 2.5), send(2, "0", 4.0, 4.5), send(3, "0", 6.0, 6.1),
                                 send(4, "0", 0.2, 0.4)], ids)
    assert sends[0]["producer_id"] == 77  # in flight well before the change
    assert "producer_id" not in sends[1]  # completed within a statistics interval of the change
    assert sends[2]["producer_id"] == 90
    assert "producer_id" not in sends[3]  # before the first report: not proven


def test_the_matcher_refuses_another_producers_exception() -> None:
    start = 1_000_000_000_000
    evidence = {"events": [{"broker": "2", "utc_ns": start + 2_200_000_000, "topic": "queue", "partition": 0, "producer_id": 90}]}
    mine = attach_producer_ids([send(1, "0", 2.0, 2.5)], [("0", 1.0, 77)])
    assert match_duplicates(evidence, mine, start, "queue")["explained"] == 0  # same partition and time, other producer
    theirs = attach_producer_ids([send(1, "0", 2.0, 2.5)], [("0", 1.0, 90)])
    assert match_duplicates(evidence, theirs, start, "queue")["explained"] == 1
    unknown = [send(1, "0", 2.0, 2.5)]  # no producer events (an older history): partition and time decide
    assert match_duplicates(evidence, unknown, start, "queue")["explained"] == 1


def test_the_bump_is_producer_wide_but_an_unnamed_producer_needs_the_partition() -> None:
    """librdkafka's epoch bump re-sends the in-flight batches of every partition of the producer, so
    a refusal on partition 1 explains its producer's duplicate on partition 7 (1.1.1, issue 21);
    without a producer id in the history only the value's own partition can."""
    start = 1_000_000_000_000
    evidence = {"events": [{"broker": "3", "utc_ns": start + 2_200_000_000, "topic": "queue", "partition": 1, "producer_id": 2000}]}
    mine = attach_producer_ids([send(1, "1", 2.0, 2.5, key=7)], [("1", 1.0, 2000)])
    assert match_duplicates(evidence, mine, start, "queue")["matches"] == [
        {"value": 1, "broker": "3", "producer_id": 2000, "partition": 1}]
    assert match_duplicates(evidence, [send(1, "1", 2.0, 2.5, key=7)], start, "queue")["explained"] == 0
    late = attach_producer_ids([send(1, "1", 2.4, 2.5, key=7)], [("1", 1.0, 2000)])  # invoked after the refusal
    assert match_duplicates(evidence, late, start, "queue")["explained"] == 0


def test_kafka_1x_names_the_partition_on_the_line_above(tmp_path) -> None:
    log = tmp_path / "brokers" / "3" / "server.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        "[2026-11-24 13:27:33,085] INFO Updated PartitionLeaderEpoch. for Partition: queue-4.\n"
        "[2026-11-24 13:27:33,094] ERROR [ReplicaManager broker=3] Error processing append operation on partition queue-1 "
        "(kafka.server.ReplicaManager)\n"
        "org.apache.kafka.common.errors.OutOfOrderSequenceException: Out of order sequence number for producerId 2000: "
        "3733 (incoming seq. number), 3731 (current end sequence number)\n"
        "[2026-11-24 13:27:34,000] INFO unrelated\n"
        "[2026-11-24 13:27:35,000] ERROR OutOfOrderSequenceException: Out of order sequence number for producerId 7: 5, 3\n")
    events = out_of_order_sequences(tmp_path)["events"]
    assert [(e["topic"], e["partition"], e["producer_id"]) for e in events] == [("queue", 1, 2000), (None, None, 7)]
