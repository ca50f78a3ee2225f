"""The producer id in the history (workloads/producer_ids.py) and how the duplicate matcher uses it
(analysis/explain/producer_evidence.py): a duplicate is only blamed on librdkafka's epoch bump when the
broker's OutOfOrderSequenceException names the producer that sent it."""

from __future__ import annotations

import json

from analysis.explain.producer_evidence import (attach_epoch_bumps, attach_message_timeouts, attach_producer_ids,
                                                client_explained, duplicate_hint, known_client_duplicates, librdkafka_only,
                                                match_duplicates, out_of_order_sequences, timeout_hint)
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


# --- a local message timeout, and the epoch seen rising: librdkafka's bump without a refused batch ----------
def test_a_message_timeout_of_the_same_producer_while_in_flight_explains_a_duplicate() -> None:
    """4.4.0 campaign seed 19 (2026-11-27): 27,727 values written twice in one leader epoch, each
    acknowledged at its second offset just after its producer's first messages timed out locally
    (_MSG_TIMED_OUT, 300 s), no OutOfOrderSequenceException. A timeout of the same process between
    the invoke and the acknowledgement (+0.1 s) explains it; another process's, or one before the
    invoke or after the acknowledgement, does not."""
    sends = [send(1, "1", 5.0, 305.7), send(2, "1", 5.0, 299.0), send(3, "0", 5.0, 305.7), send(4, "1", 301.0, 305.7)]
    attach_message_timeouts(sends, [("1", 300.2), ("1", 300.9), ("2", 100.0)])
    assert [s.get("timed_out_s") for s in sends] == [300.2, None, None, None]


def test_the_producer_epoch_seen_rising_while_in_flight_explains_a_duplicate() -> None:
    """The history records each id and epoch librdkafka's statistics report (workloads/producer_ids.py):
    seed 19's producer 1 went from epoch 0 to 89 between 300.6 s and 305.7 s. A rise after the invoke
    and up to one statistics interval after the acknowledgement counts; a new id (a new producer) or a
    rise before the invoke does not."""
    epochs = [("1", 2.0, 0, 0), ("1", 300.6, 0, 3), ("1", 305.7, 0, 89), ("0", 2.0, 1, 0), ("0", 50.0, 7, 1)]
    sends = [send(1, "1", 5.0, 305.0), send(2, "1", 301.0, 302.0), send(3, "0", 5.0, 60.0), send(4, "1", 306.0, 307.0),
             send(5, "2", 5.0, 305.0)]
    attach_epoch_bumps(sends, epochs)
    assert sends[0]["epoch_bump"] == {"from": 0, "to": 89, "at_s": 300.6}
    assert "epoch_bump" not in sends[1]  # invoked at epoch 3; the next report (305.7) is > 1 s after its ack
    assert "epoch_bump" not in sends[2]  # a new producer id is not a bump
    assert "epoch_bump" not in sends[3] and "epoch_bump" not in sends[4]


def test_the_causes_are_counted_value_by_value_and_the_nightly_may_call_it_known() -> None:
    sends = [send(v, "1", 5.0, 305.7) for v in (1, 2, 3)]
    attach_message_timeouts(sends[:2], [("1", 300.2)])
    attach_epoch_bumps(sends[1:], [("1", 2.0, 0, 0), ("1", 300.6, 0, 3)])
    explained = client_explained(sends)
    assert explained == {"client": "librdkafka", "duplicates": 3, "explained": 3, "refused_batch": 0, "message_timeout": 2, "epoch_bumped": 2,
                         "first_timeout_s": 300.2, "epochs": [0, 3], "unexplained": []}
    hint = timeout_hint(explained)
    assert "2 were acknowledged after a message of their producer timed out locally (_MSG_TIMED_OUT" in hint
    assert "2 were in flight while their producer's epoch rose (from 0 to 3" in hint and "issuecomment" in hint
    results = {"forbidden": ["duplicate"], "counts": {"duplicate": 3}, "client_duplicates": explained}
    assert known_client_duplicates(results).startswith("known client bug: each of 3 duplicate(s) was re-sent")
    assert known_client_duplicates({**results, "counts": {"duplicate": 30_000}}) is None  # not every value checked
    assert known_client_duplicates({**results, "forbidden": ["duplicate", "lost-write"]}) is None
    unexplained = client_explained([send(9, "1", 5.0, 6.0)])
    assert unexplained["explained"] == 0 and unexplained["unexplained"] == [9] and timeout_hint(unexplained) is None
    assert known_client_duplicates({**results, "counts": {"duplicate": 1}, "client_duplicates": unexplained}) is None


def test_the_timeout_and_epoch_facts_count_for_librdkafka_runs_only() -> None:
    """They stand for librdkafka's epoch bump; a Java client run's duplicates are not laid to it."""
    def sends() -> list[dict]:
        return [dict(send(1, "1", 5.0, 305.7), timed_out_s=300.2, epoch_bump={"from": 0, "to": 3, "at_s": 300.6}),
                dict(send(2, "1", 5.0, 305.7), refused_batch=True)]
    assert client_explained(librdkafka_only(sends(), "librdkafka"))["explained"] == 2
    java = client_explained(librdkafka_only(sends(), "java"))
    assert (java["explained"], java["message_timeout"], java["epoch_bumped"], java["unexplained"]) == (1, 0, 0, [1])


def test_a_java_run_s_duplicates_are_never_called_librdkafka_s_bug() -> None:
    """A refused batch explains a duplicate's re-send whatever the client, but the known bug and its
    issue are librdkafka's: a Java run whose every duplicate sat beside a refused batch stays a
    finding (no "known client bug", so the nightly does not xfail it), and its hint names its client."""
    sends = [dict(send(v, "1", 5.0, 6.0), refused_batch=True) for v in (1, 2)]
    results = {"forbidden": ["duplicate"], "counts": {"duplicate": 2}}
    librdkafka = client_explained(librdkafka_only([dict(s) for s in sends], "librdkafka"), "librdkafka")
    assert known_client_duplicates({**results, "client_duplicates": librdkafka}).startswith("known client bug")
    java = client_explained(librdkafka_only([dict(s) for s in sends], "java"), "java")
    assert java["explained"] == 2 and java["client"] == "java"
    assert known_client_duplicates({**results, "client_duplicates": java}) is None
    evidence = {"count": 3, "examples": [{"broker": 2, "line": "OutOfOrderSequenceException: Out of order sequence number"}]}
    assert "librdkafka bumps the producer epoch" in duplicate_hint(evidence, "librdkafka")
    hint = duplicate_hint(evidence, "java")
    assert "client is java, not librdkafka" in hint and "bumps the producer epoch" not in hint
    assert duplicate_hint({"count": 0}, "java") is None
