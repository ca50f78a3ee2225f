"""The history recorder and the v1 validator, without Kafka."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.history import Recorder, read_history, validate_events, validate_history


def send(process, type_, key, value, offset=None, epoch=None, error=None):
    v = {"key": key, "value": value} if type_ == "invoke" else {"key": key, "value": value, "offset": offset, "epoch": epoch}
    event = {"index": 0, "time": 0, "process": process, "type": type_, "f": "send", "value": v}
    if error is not None:
        event["error"] = error
    return event


def numbered(events):
    for i, e in enumerate(events):
        e["index"], e["time"] = i, i * 10
    return events


def test_recorder_writes_valid_v1_from_many_threads_and_parquet_at_close(tmp_path: Path):
    rec = Recorder(tmp_path / "history.jsonl")

    def worker(p: int) -> None:
        for n in range(500):
            v = p * 1000 + n
            rec.record(p, "invoke", "send", {"key": n % 4, "value": v})
            rec.record(p, "ok", "send", {"key": n % 4, "value": v, "offset": n, "epoch": 0})

    threads = [threading.Thread(target=worker, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    rec.nemesis("kill", {"targets": [1], "signal": "KILL"})
    for t in threads:
        t.join()
    parquet = rec.close()
    events = read_history(tmp_path / "history.jsonl")
    assert len(events) == 4 * 1000 + 1
    assert [e["index"] for e in events] == list(range(len(events)))
    assert validate_history(tmp_path / "history.jsonl") == []
    nem = [e for e in events if e["process"] == "nemesis"]
    assert nem == [{**nem[0], "type": "info", "f": "kill", "value": {"targets": [1], "signal": "KILL"}}]
    table = pq.read_table(parquet)
    assert table.num_rows == len(events)
    assert table.column("index").to_pylist() == list(range(len(events)))
    assert json.loads(table.column("value")[0].as_py()) == events[0]["value"]


def test_recorder_flushes_within_200_ms_without_close(tmp_path: Path):
    rec = Recorder(tmp_path / "h.jsonl")
    rec.record(0, "invoke", "poll")
    time.sleep(0.25)
    assert len(read_history(tmp_path / "h.jsonl")) == 1
    rec.close(parquet=False)


CHILD = """
import sys, time
from harness.history import Recorder
rec = Recorder(sys.argv[1])
n = 0
print("started", flush=True)
while True:
    rec.record(0, "invoke", "send", {"key": n % 8, "value": n, "pad": "x" * 200})
    rec.record(0, "ok", "send", {"key": n % 8, "value": n, "offset": n, "epoch": 1})
    n += 1
    if n % 1000 == 0:
        time.sleep(0.001)
"""


def test_sigkill_mid_write_leaves_jsonl_valid_up_to_its_last_line(tmp_path: Path):
    path = tmp_path / "history.jsonl"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, cwd=Path(__file__).parents[1])
    try:
        assert child.stdout.readline().strip() == b"started"
        time.sleep(1.0)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    events = read_history(path)  # drops at most an incomplete last line
    assert len(events) > 1000, "the flusher should have written for a second"
    assert [e["index"] for e in events] == list(range(len(events)))
    # a trailing open invoke is fine; nothing else may be wrong
    assert validate_events(events) == []


def test_read_history_drops_a_torn_last_line_but_not_a_torn_middle_one(tmp_path: Path):
    good = json.dumps(send(0, "invoke", 1, 1))
    (tmp_path / "a.jsonl").write_text(good + "\n" + good[:20])
    assert len(read_history(tmp_path / "a.jsonl")) == 1
    (tmp_path / "b.jsonl").write_text(good[:20] + "\n" + good + "\n")
    assert validate_history(tmp_path / "b.jsonl") and "not JSON" in validate_history(tmp_path / "b.jsonl")[0]


def valid_history():
    return numbered([
        send(0, "invoke", 2, 10),
        send(0, "invoke", 3, 11),
        send(0, "ok", 3, 11, offset=0, epoch=1),
        send(0, "info", 2, 10, error="_MSG_TIMED_OUT: Local: Message timed out"),
        {"process": 1, "type": "invoke", "f": "assign", "value": {"keys": [2, 3], "seek": "beginning"}},
        {"process": 1, "type": "ok", "f": "assign", "value": {"keys": [2, 3], "seek": "beginning"}},
        {"process": 1, "type": "invoke", "f": "poll", "value": None},
        {"process": 1, "type": "ok", "f": "poll", "value": {"records": [{"key": 3, "offset": 0, "value": 11, "epoch": 1}]}},
        {"process": "nemesis", "type": "info", "f": "partition", "value": {"isolated": [1]}},
        {"process": 2, "type": "invoke", "f": "txn", "value": {"sends": [{"key": 0, "value": 12}], "records": []}},
        {"process": 2, "type": "fail", "f": "txn", "value": {"sends": [{"key": 0, "value": 12, "offset": 5, "epoch": None}], "records": []}},
        {"process": 2, "type": "info", "f": "crash", "value": {"reason": "fatal"}},
    ])


def test_validator_accepts_a_well_formed_history():
    assert validate_events(valid_history()) == []


def _mutate(events, i, **changes):
    events[i] = {**events[i], **changes}
    return events


@pytest.mark.parametrize(
    "mutation, complaint",
    [
        (lambda h: _mutate(h, 3, index=1), "index"),
        (lambda h: _mutate(h, 3, time=-5), "time"),
        (lambda h: _mutate(h, 0, type="done"), "type"),
        (lambda h: _mutate(h, 0, f="produce"), "f 'produce'"),
        (lambda h: _mutate(h, 0, process=-1), "process"),
        (lambda h: _mutate(h, 2, value={"key": 3, "value": 11}), "offset and epoch"),
        (lambda h: _mutate(h, 2, value={"key": "3", "value": 11, "offset": 0, "epoch": 1}), "send value"),
        (lambda h: _mutate(h, 7, value={"records": [{"key": 3, "offset": "0", "value": 11}]}), "offset"),
        (lambda h: _mutate(h, 4, value={"keys": [2], "seek": "latest"}), "seek"),
        (lambda h: _mutate(h, 8, type="ok"), "nemesis"),
        (lambda h: _mutate(h, 6, value={"x": 1}), "poll invoke value"),
        (lambda h: [e for i, e in enumerate(h) if i != 6], "without an open poll"),
        (lambda h: [e for i, e in enumerate(h) if i != 1], "without an open invoke"),
        (lambda h: [{k: v for k, v in e.items() if k != "value"} if i == 0 else e for i, e in enumerate(h)], "missing field"),
        (lambda h: _mutate(h, 0, error=3), "error must be a string"),
    ],
)
def test_validator_rejects_malformed_events(mutation, complaint):
    problems = validate_events(mutation(valid_history()))
    assert problems, "the malformed history was accepted"
    assert any(complaint in p for p in problems), problems


def test_recorder_refuses_events_after_close(tmp_path: Path):
    rec = Recorder(tmp_path / "h.jsonl")
    rec.close(parquet=False)
    with pytest.raises(RuntimeError, match="closed"):
        rec.record(0, "invoke", "poll")


def test_send_fast_path_writes_exactly_what_json_would(tmp_path: Path):
    rec = Recorder(tmp_path / "h.jsonl")
    rec.send(3, "invoke", 1, 10)
    rec.send(3, "ok", 1, 10, 42, None)
    rec.send(3, "invoke", 2, 11)
    rec.send(3, "info", 2, 11, None, 7, 'REQUEST_TIMED_OUT: "quoted" \\ and ünïcode')
    rec.send_invoke(3, 4, 12)
    rec.send_ok(3, 4, 12, 43, 5)
    assert rec.counts == {"invoke": 3, "ok": 2, "fail": 0, "info": 1}
    rec.close(parquet=False)
    lines = (tmp_path / "h.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert [json.dumps(e, separators=(",", ":"), ensure_ascii=False) for e in events] == lines
    assert events[1]["value"] == {"key": 1, "value": 10, "offset": 42, "epoch": None}
    assert events[3]["error"] == 'REQUEST_TIMED_OUT: "quoted" \\ and ünïcode' and events[3]["value"]["epoch"] == 7
    assert validate_events(events) == []


# ------------------------------------------------------------------ the run record (config.json)
from harness.errors import HarnessError  # noqa: E402
from harness.history.record import (EMPTY, RECORD_VERSION, VERSION_KEY, RecordError, as_record, read_record,  # noqa: E402
                                    write_record)

STORE_RUN = Path(__file__).resolve().parents[1] / "store" / "20261125T162743-338f12"
# A record as `harness run` wrote it before record version 2 (2026-11-22): no config_format, the
# profile spelled three ways at once, a schedule without resolved targets, no phases_s.
VERSION_1 = {
    "history_format": 1, "run_id": "20261122T071629-46a816", "status": "completed", "seed": 3, "kafka_version": "4.3.1",
    "brokers": 3, "workload": "queue", "rate": 1000.0, "time_limit_s": 60.0, "partitions": 8, "replication_factor": 3,
    "producers": 2, "consumers": 2, "subscribe": False, "abort_probability": None, "drain_timeout_s": 60.0, "topic": "queue",
    "profile": {"name": "acks1", "acks": "1", "enable_idempotence": False, "min_insync_replicas": 2,
                "producer": {"acks": "1", "enable.idempotence": False}, "topic": {"unclean.leader.election.enable": "false"}},
    "nemesis": ["kill"], "nemesis_config": {"packages": ["kill"], "interval_s": 10.0, "seed": 3, "options": {"kill": {}},
                                            "schedule": [{"at_s": 4.2, "package": "kill", "action": "start"}]},
    "command_line": "python -m harness run --profile acks1 --nemesis kill", "drain": {"complete": True, "high_watermarks": {"0": 12}},
    "seconds": {"cluster_ready": 30.1, "workload": 60.0}, "counts": {"invoke": 10, "ok": 9, "fail": 0, "info": 1},
}


def test_a_record_written_today_reads_back_typed(tmp_path: Path):
    data = {**VERSION_1, "profile": {"name": "safe", "description": "acks=all", "acks": "all"}, "history_start_utc": "2026-11-25T16:27:43.768980+00:00",
            "phases_s": {"workload": 35.7, "heal": 65.8, "drain": 115.0}, "heal": {"isr_full": True, "waited_s": 40.2, "errors": []},
            "worker_errors": [], "unresponsive": {"at_s": 50.5, "reason": "no broker answered"}, "some_future_key": {"x": 1}}
    write_record(tmp_path, data)
    on_disk = json.loads((tmp_path / "config.json").read_text())
    assert on_disk == {**data, VERSION_KEY: RECORD_VERSION}  # plain JSON, every key as given: old readers still read it
    record = read_record(tmp_path)
    assert (record.version, record.seed, record.kafka_version, record.profile_name, record.profile.description) == (
        RECORD_VERSION, 3, "4.3.1", "safe", "acks=all")
    assert record.drain.complete is True and record.drain.high_watermarks == {"0": 12} and record.drain.undrained is None
    assert (record.phases_s.workload, record.seconds.cluster_ready, record.seconds.heal) == (35.7, 30.1, None)
    assert record.heal.isr_full and record.unresponsive.as_json() == {"at_s": 50.5, "reason": "no broker answered"}
    assert record.extra == {"some_future_key": {"x": 1}} and record.raw == on_disk and not record.problems
    assert record.replay_schedule == [{"at_s": 4.2, "package": "kill", "action": "start"}]
    assert read_record(tmp_path / "config.json") == record  # the run directory or its file
    assert record.source == tmp_path / "config.json"


def test_an_older_record_is_upgraded_in_the_one_reading_function(tmp_path: Path):
    (tmp_path / "config.json").write_text(json.dumps(VERSION_1))
    record = read_record(tmp_path)
    assert record.version == 1 and record.profile_name == "acks1"
    assert record.profile.keys["producer"] == {"acks": "1", "enable.idempotence": False}  # kept as written
    assert record.replay_schedule == []  # its events did not record the targets they resolved
    assert record.packages == ("kill",) and record.nemesis_config.schedule[0].at_s == 4.2
    assert record.drain.timed_out_partitions is None and record.phases_s.workload is None
    bare = as_record({"seed": 1, "workload": "queue", "profile": "unsafe"})  # a profile given by name alone
    assert bare.profile_name == "unsafe" and bare.profile.keys == {"name": "unsafe"}
    assert as_record({"nemesis_config": {"packages": ["disk"]}}).packages == ("disk",)
    assert as_record(None) is EMPTY and as_record(record) is record


def test_the_stored_runs_load_and_a_bad_record_names_its_problem(tmp_path: Path):
    if STORE_RUN.is_dir():  # a real run of 2026-11-25, when the checkout has its store
        record = read_record(STORE_RUN)
        assert record.version == 2 and record.status == "completed" and record.drain.complete and not record.problems
        assert len(record.replay_schedule) == len(record.nemesis_config.schedule) > 0
    assert read_record(tmp_path) is None  # no config.json: no record
    (tmp_path / "config.json").write_text("{nope")
    with pytest.raises(RecordError, match="not valid JSON") as bad:
        read_record(tmp_path)
    assert isinstance(bad.value, HarnessError) and bad.value.hint and str(tmp_path / "config.json") in bad.value.message
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(RecordError, match="JSON object"):
        read_record(tmp_path)
    odd = as_record({"seed": "three", "drain": {"complete": "yes", "high_watermarks": {"0": 1}}, "profile": [1]})
    assert odd.seed is None and odd.drain.complete is None and odd.profile is None  # read as absent ...
    assert len(odd.problems) == 3 and "seed should be an integer" in odd.problems[0]  # ... and named
