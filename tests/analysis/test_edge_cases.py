"""Hand-written histories for each definition's edge cases, checked by both checkers, and the
verdict/permissions logic."""

from __future__ import annotations

import json

import pytest

from analysis.reference import checker as reference
from analysis.checking.checker import check_history, check_run
from analysis.rules.permissions import allowed
from analysis.rules.verdict import decide
from tests.analysis.histories import ZERO, Builder, write_run


def info_send_later_read() -> Builder:
    b = Builder()
    b.assign(10, [0])
    b.send(1, 0, 1, 0)
    b.send(1, 0, 2, None, "info")  # timed out, but it did land at offset 1
    b.send(1, 0, 3, 2)
    b.poll(10, [(0, 0, 1), (0, 1, 2), (0, 2, 3)])
    return b


def txn_marker_gaps() -> Builder:
    # Offsets 1 and 3 hold transaction markers: no record, so reading 0, 2, 4 skips nothing.
    b = Builder()
    b.assign(10, [0])
    b.add(1, "invoke", "txn", {"sends": [{"key": 0, "value": 1}], "records": []})
    b.add(1, "ok", "txn", {"sends": [{"key": 0, "value": 1, "offset": 0, "epoch": 0}], "records": []})
    b.add(1, "invoke", "txn", {"sends": [{"key": 0, "value": 2}], "records": []})
    b.add(1, "fail", "txn", {"sends": [{"key": 0, "value": 2, "offset": None, "epoch": None}], "records": []})
    b.add(1, "invoke", "txn", {"sends": [{"key": 0, "value": 3}], "records": []})
    b.add(1, "ok", "txn", {"sends": [{"key": 0, "value": 3, "offset": 4, "epoch": 0}], "records": []})
    b.poll(10, [(0, 0, 1)])
    b.poll(10, [(0, 4, 3)])
    return b


def reassign_between_polls(with_assign: bool) -> Builder:
    b = Builder()
    b.assign(10, [0])
    for v in range(3):
        b.send(1, 0, v, v)
    b.poll(10, [(0, 0, 0), (0, 1, 1), (0, 2, 2)])
    if with_assign:
        b.assign(10, [0])  # seek to the beginning: reading 0 again is not a reorder
    b.poll(10, [(0, 0, 0), (0, 1, 1)])
    return b


def aborted_txn_read() -> Builder:
    b = txn_marker_gaps()
    b.poll(11, [(0, 2, 2)])  # a read_uncommitted consumer saw the aborted txn's record
    return b


def acks0_unread_with_reads_beyond() -> Builder:
    b = Builder()
    b.send(1, 0, 1, -1)  # acks=0: ok, but the offset is unknown
    b.send(1, 0, 2, 5)
    b.poll(10, [(0, 5, 2)])
    return b


def reads_of_other_keys_interleaved() -> Builder:
    # Offsets only need to increase per key; interleaving keys inside a poll is fine.
    b = Builder()
    b.send(1, 0, 1, 0)
    b.send(1, 1, 2, 0)
    b.send(1, 0, 3, 1)
    b.poll(10, [(1, 0, 2), (0, 0, 1), (0, 1, 3)])
    return b


def three_values_at_one_offset() -> Builder:
    # Three leaders in turn each acknowledged a different value at offset 0, and each was read
    # by someone: divergence, but nothing unread (the middle value is neither min nor max).
    b = Builder()
    for process, value in ((1, 1), (2, 2), (3, 3)):
        b.send(process, 0, value, 0)
    for process, value in ((10, 1), (11, 2), (12, 3)):
        b.poll(process, [(0, 0, value)])
    return b


CASES = {
    "info send later read": (info_send_later_read, {}),
    "txn marker gaps": (txn_marker_gaps, {}),
    "reassign between polls": (lambda: reassign_between_polls(True), {}),
    "no reassign between polls": (lambda: reassign_between_polls(False), {"nonmonotonic-poll": 1}),
    # The aborted record at offset 2 is observed (by 11), so the committed reader 0 -> 4 is, by the
    # definition, a poll-skip too (see docs/checker.md, "overlaps").
    "aborted txn read": (aborted_txn_read, {"aborted-read": 1, "poll-skip": 1}),
    "acks=0 unread": (acks0_unread_with_reads_beyond, {"unseen": 1}),
    "keys interleaved": (reads_of_other_keys_interleaved, {}),
    "three values at one offset": (three_values_at_one_offset, {"inconsistent-offsets": 1}),
}


@pytest.mark.parametrize("name", CASES)
def test_reference(name):
    build, want = CASES[name]
    assert reference.counts(build().events) == {**ZERO, **want}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["info send later read", "txn marker gaps", "no reassign between polls",
                                  "aborted txn read", "acks=0 unread"])
def test_spark(spark, tmp_path, name):
    build, want = CASES[name]
    assert check_history(spark, write_run(tmp_path, build().events), None)["counts"] == {**ZERO, **want}




# ------------------------------------------------------------------------ verdict and permissions
def test_safe_profile_allows_nothing():
    assert allowed(None)[0] == set()
    assert allowed({"profile": {"name": "safe"}})[0] == set()


def test_unsafe_profiles_allow_their_anomalies():
    assert {"lost-write", "unseen", "inconsistent-offsets"} <= allowed({"profile": {"acks": "1"}})[0]
    no_idem = allowed({"profile": {"enable.idempotence": False, "retries": 5, "max.in.flight": 5}})[0]
    assert no_idem == {"duplicate", "nonmonotonic-send", "eos-duplicate"}  # a duplicated input is processed twice
    assert allowed({"workload": "txn", "profile": {"isolation.level": "read_uncommitted"}})[0] == {"aborted-read"}


def test_unseen_needs_a_complete_drain_to_be_lost():
    counts = {**ZERO, "unseen": 2}
    assert decide(counts, set(), drain_complete=True).verdict == "invalid"
    assert decide(counts, set(), drain_complete=False).verdict == "unknown"
    assert decide(counts, set(), drain_complete=None).verdict == "unknown"
    assert decide(ZERO, set(), drain_complete=None).verdict == "valid"
    assert decide({**ZERO, "duplicate": 1}, {"duplicate"}, drain_complete=True).verdict == "valid"
    assert decide(ZERO, set(), drain_complete=True, truncated=True).verdict == "unknown"


@pytest.mark.slow
def test_results_json_shape_and_truncated_tail(spark, tmp_path):
    b = acks0_unread_with_reads_beyond()
    run = write_run(tmp_path, b.events, {"profile": {"name": "safe"},
                                          "drain": {"complete": True, "high_watermarks": {"0": 6}}})
    with open(run / "history.jsonl", "a") as fh:
        fh.write('{"index": 6, "time": 6000, "proc')  # the recorder was killed mid-line
    results = check_run(run, spark)
    on_disk = json.loads((run / "results.json").read_text())
    assert on_disk["verdict"] == results["verdict"] == "invalid"  # unseen + complete drain = lost
    assert results["history"]["truncated"] is True
    assert results["headline"] == {"lost": 1, "duplicated": 0, "reordered": 0, "diverged": 0, "other": 0}
    assert set(results["counts"]) == set(ZERO)
    ex = results["examples"]["unseen"][0]
    assert ex["value"] == 1 and ex["key"] == 0 and ex["offset"] is None
    assert ex["ops"][0]["index"] == 1 and "time" in ex["ops"][0]
    assert results["op_stats"]["send"] == {"invoke": 2, "ok": 2, "fail": 0, "info": 0}
    assert "total_s" in results["timings"]


def written_twice() -> Builder:
    # Value 1 acknowledged at offset 1 but also in the log at offset 0: a duplicate.
    b = Builder()
    b.assign(10, [0])
    b.send(1, 0, 1, 1)
    b.poll(10, [(0, 0, 1), (0, 1, 1)])
    return b


@pytest.mark.slow
@pytest.mark.parametrize("with_log", [True, False])
def test_forbidden_duplicates_quote_the_brokers_out_of_order_sequence_errors(spark, tmp_path, with_log):
    run = write_run(tmp_path, written_twice().events, {"profile": {"name": "safe"}, "drain": {"complete": True}})
    log = run / "brokers" / "2" / "server.log"
    log.parent.mkdir(parents=True)
    log.write_text("[2026-11-22T10:40:13,811] ERROR [ReplicaManager broker=2] Error processing append operation\n"
                   + ("org.apache.kafka.common.errors.OutOfOrderSequenceException: Out of order sequence number "
                      "for producer 1000 at offset 557 in partition queue-6: 286 (incoming seq. number), 284\n"
                      if with_log else "nothing about sequences\n"))
    results = check_run(run, spark)
    assert results["verdict"] == "invalid" and results["forbidden"] == ["duplicate"]  # still forbidden
    hint = [r for r in results["reasons"] if "OutOfOrderSequenceException" in r]
    if with_log:
        assert results["out_of_order_sequences"]["count"] == 1
        assert len(hint) == 1 and "broker 2" in hint[0] and "librdkafka/issues/4953" in hint[0]
    else:
        assert results["out_of_order_sequences"]["count"] == 0 and hint == []


@pytest.mark.slow
def test_a_duplicate_after_its_producer_s_message_timeout_and_epoch_bump_is_laid_to_the_client(spark, tmp_path):
    """4.4.0 campaign seed 19 (2026-11-27): no OutOfOrderSequenceException, but the duplicated value's
    producer had a message time out locally and its epoch rise while the value was in flight. The
    verdict stays invalid; the reasons, results' client_duplicates and the example say why."""
    from analysis.explain.producer_evidence import known_client_duplicates

    b = Builder()
    b.assign(10, [0])
    b.add(1, "info", "producer", {"producer_id": 5, "producer_epoch": 0})
    b.add(1, "invoke", "send", {"key": 0, "value": 1})
    b.add(1, "invoke", "send", {"key": 0, "value": 2})
    b.add(1, "info", "send", {"key": 0, "value": 2, "offset": None, "epoch": None}, error="_MSG_TIMED_OUT: Local: Message timed out")
    b.add(1, "info", "producer", {"producer_id": 5, "producer_epoch": 1})
    b.add(1, "ok", "send", {"key": 0, "value": 1, "offset": 1, "epoch": 0})
    b.poll(10, [(0, 0, 1), (0, 1, 1)])
    for e in b.events:
        e["time"] *= 10**6  # one second apart
    run = write_run(tmp_path, b.events, {"profile": {"name": "safe"}, "drain": {"complete": True}})
    results = check_run(run, spark)
    assert results["verdict"] == "invalid" and results["forbidden"] == ["duplicate"]
    client = results["client_duplicates"]
    assert (client["duplicates"], client["explained"], client["message_timeout"], client["epoch_bumped"]) == (1, 1, 1, 1)
    assert client["first_timeout_s"] == 5.0 and client["epochs"] == [0, 1]
    assert any("timed out locally (_MSG_TIMED_OUT, first at t=5.000 s)" in r for r in results["reasons"])
    assert known_client_duplicates(results).startswith("known client bug: each of 1 duplicate(s) was re-sent")
    example = results["examples"]["duplicate"][0]
    assert example["client"] == {"timed_out_s": 5.0, "epoch_bump": {"from": 0, "to": 1, "at_s": 6.0}}


def test_only_duplicates_with_broker_evidence_count_as_the_known_client_bug():
    from analysis.explain.producer_evidence import known_client_duplicates

    evidence = {"count": 2, "examples": [], "explanation": "x", "duplicates_matched": {"duplicates": 3, "explained": 3}}
    base = {"forbidden": ["duplicate"], "counts": {"duplicate": 3}, "out_of_order_sequences": evidence}
    assert "each of 3 duplicate(s)" in known_client_duplicates(base)
    partly = {**evidence, "duplicates_matched": {"duplicates": 3, "explained": 2}}
    assert known_client_duplicates({**base, "out_of_order_sequences": partly}) is None  # one duplicate unexplained
    unmatched = {k: v for k, v in evidence.items() if k != "duplicates_matched"}
    assert known_client_duplicates({**base, "out_of_order_sequences": unmatched}) is None  # no proof, no excuse
    assert known_client_duplicates({**base, "forbidden": ["duplicate", "lost-write"]}) is None  # a loss is never excused
    assert known_client_duplicates({**base, "out_of_order_sequences": {"count": 0}}) is None
    assert known_client_duplicates({**base, "out_of_order_sequences": None}) is None
    assert known_client_duplicates({"forbidden": [], "out_of_order_sequences": evidence}) is None


# ------------------------------------------------------------------------ typed (struct) Parquet
def _struct_parquet(run_dir, events):
    """history.parquet with `value` as a typed struct (the layout bench/bench_checker.py writes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rec = pa.struct([(n, pa.int64()) for n in ("key", "offset", "value", "epoch")])
    send = pa.struct([(n, pa.int64()) for n in ("key", "value", "offset", "epoch")])
    value = pa.struct([("key", pa.int64()), ("value", pa.int64()), ("offset", pa.int64()), ("epoch", pa.int64()),
                       ("records", pa.list_(rec)), ("sends", pa.list_(send)), ("keys", pa.list_(pa.int64())),
                       ("seek", pa.string())])
    run_dir.mkdir(parents=True, exist_ok=True)
    cols = {"index": pa.int64(), "time": pa.int64(), "process": pa.string(), "type": pa.string(), "f": pa.string(),
            "value": value, "error": pa.string()}
    rows = {k: [(str(e[k]) if k == "process" else e.get(k)) for e in events] for k in cols}
    rows["value"] = [e["value"] if isinstance(e.get("value"), dict) else None for e in events]
    pq.write_table(pa.table({k: pa.array(v, cols[k]) for k, v in rows.items()}), run_dir / "history.parquet")
    return run_dir


@pytest.mark.slow
def test_struct_parquet_agrees_with_jsonl(spark, tmp_path):
    events = aborted_txn_read().events
    want = {**ZERO, "aborted-read": 1, "poll-skip": 1}
    assert check_history(spark, _struct_parquet(tmp_path / "pq", events), None)["counts"] == want
    assert check_history(spark, write_run(tmp_path / "jsonl", events), None)["counts"] == want


@pytest.mark.slow
@pytest.mark.parametrize("bad", ["null offset", "null record", "null txn send key"])
def test_struct_parquet_with_a_bad_record_is_named(spark, tmp_path, bad):
    from analysis.checking.history_load import HistoryError, load_history

    events = aborted_txn_read().events
    if bad == "null txn send key":
        e = next(e for e in events if e["f"] == "txn" and e["type"] == "ok")
        e["value"]["sends"] = [{"key": None, "value": 1, "offset": 0, "epoch": 0}]
        why = "sends"
    else:
        e = next(e for e in events if e["f"] == "poll" and e["type"] == "ok" and e["value"]["records"])
        recs = e["value"]["records"]
        if bad == "null offset":
            recs.append({"key": 0, "offset": None, "value": 9, "epoch": 0})
        else:
            recs.insert(0, None)
        why = "records"
    with pytest.raises(HistoryError, match=rf"index {e['index']}: .*{why}"):
        load_history(spark, _struct_parquet(tmp_path, events))


@pytest.mark.slow
def test_a_struct_parquet_scan_of_sends_reads_no_records_and_json_text_is_parsed_once(spark, tmp_path):
    """A typed value without every field of the loader's (the bench's layout) is rebuilt field by
    field; wrapped in a CASE on `f`, every scan read every field, each poll's records included.
    A Parquet history whose value is JSON text (the recorder's) is parsed once and kept."""
    from pyspark.sql import functions as F

    from analysis.checking.history_load import load_history
    from harness.history.files import write_parquet

    events = aborted_txn_read().events
    history = load_history(spark, _struct_parquet(tmp_path / "pq", events))
    sends = history.events.filter(F.col("f") == "send").select("value.key", "value.value")
    plan = sends._jdf.queryExecution().executedPlan().toString()
    schema = next(line for line in plan.splitlines() if "ReadSchema" in line)
    assert "value:struct<key:bigint,value:bigint>" in schema and "records" not in schema, schema
    assert history.cached is None  # typed: nothing to parse, nothing kept
    run = write_run(tmp_path / "text", events)
    write_parquet(run / "history.jsonl", run / "history.parquet")
    text = load_history(spark, run)
    assert text.format == "parquet" and text.cached is not None
    text.release()


OOOSE = ("[{when}] ERROR [ReplicaManager broker=2] Error processing append operation on partition queue-{p}\n"
         "org.apache.kafka.common.errors.OutOfOrderSequenceException: Out of order sequence number for producer 1000 "
         "at offset 557 in partition queue-{p}: 286 (incoming seq. number), 284 (current end sequence number)\n")


@pytest.mark.slow
@pytest.mark.parametrize("when, partition, start, excused", [
    ("2026-11-22 10:40:13,811", 0, "2026-11-22T10:40:13.811Z", True),   # in the send's window, its partition
    ("2026-11-22 10:40:13,811", 6, "2026-11-22T10:40:13.811Z", False),  # another partition
    ("2026-11-22 10:40:19,000", 0, "2026-11-22T10:40:13.811Z", False),  # 5 s after the acknowledgement
    ("2026-11-22 10:40:13,811", 0, None, False),                        # no wall-clock start: cannot place it
])
def test_the_known_client_bug_excuses_only_duplicates_sent_while_their_partition_refused_a_batch(
        spark, tmp_path, when, partition, start, excused):
    """Issue 19: any OutOfOrderSequenceException anywhere in the run used to excuse every duplicate."""
    from analysis.explain.producer_evidence import known_client_duplicates

    config = {"profile": {"name": "safe"}, "drain": {"complete": True}, "topic": "queue", "run_id": "synthetic"}
    if start:
        config["history_start_utc"] = start
    run = write_run(tmp_path, written_twice().events, config)
    (run / "brokers" / "2").mkdir(parents=True)
    (run / "brokers" / "2" / "server.log").write_text(OOOSE.format(when=when, p=partition))
    results = check_run(run, spark)
    matched = results["out_of_order_sequences"]["duplicates_matched"]
    assert results["forbidden"] == ["duplicate"] and matched["duplicates"] == 1
    assert (matched["explained"] == 1) is excused and bool(known_client_duplicates(results)) is excused


@pytest.mark.slow
@pytest.mark.parametrize("logged_producer, explained", [(1000, 1), (2000, 0)])
def test_a_duplicate_is_blamed_on_the_epoch_bump_only_for_the_producer_that_sent_it(spark, tmp_path, logged_producer, explained):
    # Value 1 sent by process 1 (producer id 1000, recorded by workloads/producer_ids.py) between
    # 1 µs and 3 µs after 10:40:13.000 UTC; a broker refused an out-of-order batch on queue-0 then.
    b = Builder()
    b.add(1, "info", "producer", {"producer_id": 1000, "producer_epoch": 0})
    for e in written_twice().events:
        b.add(e["process"], e["type"], e["f"], e["value"])
    run = write_run(tmp_path, b.events, {"profile": {"name": "safe"}, "drain": {"complete": True},
                                         "history_start_utc": "2026-11-22T10:40:13.000000+00:00"})
    log = run / "brokers" / "2" / "server.log"
    log.parent.mkdir(parents=True)
    log.write_text("[2026-11-22 10:40:13,000] ERROR [ReplicaManager broker=2] Error processing append operation\n"
                   f"org.apache.kafka.common.errors.OutOfOrderSequenceException: Out of order sequence number "
                   f"for producer {logged_producer} at offset 1 in partition queue-0: 3 (incoming seq. number), 1\n")
    results = check_run(run, spark)
    matched = results["out_of_order_sequences"]["duplicates_matched"]
    assert results["forbidden"] == ["duplicate"] and matched["duplicates"] == 1
    assert matched["explained"] == explained  # another producer's refused batch explains nothing
