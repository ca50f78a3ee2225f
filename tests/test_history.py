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
