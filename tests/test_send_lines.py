"""The compiled batch formatter writes exactly what Python would, and the recorder built on it
keeps every event, in index and time order, whatever the mix of threads and event kinds."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from harness.history import send_lines
from harness.history import Recorder, read_history, validate_history
from harness.history.send_lines import OTHER, SEND_INVOKE, SEND_OK, python_send_line

I64 = st.integers(-(2**63), 2**63 - 1)
row = st.tuples(st.sampled_from([SEND_INVOKE, SEND_OK, OTHER]), st.integers(0, 2**62), I64, I64, I64,
                st.one_of(st.just(-1), st.just(-1001), I64), st.one_of(st.just(-1), I64))


def python_reference(rows: list[tuple], first_index: int, t0: int, last_ns: int) -> tuple[bytes, list[int], int]:
    out, times = [], []
    for i, (kind, ns, *fields) in enumerate(rows):
        last_ns = max(last_ns, ns)
        times.append(last_ns - t0)
        if kind != OTHER:
            out.append(python_send_line(first_index + i, last_ns - t0, kind, *fields))
    return "".join(out).encode(), times, last_ns


@settings(max_examples=300, deadline=None)
@given(st.lists(row, min_size=1, max_size=30), st.integers(0, 2**40), st.integers(0, 2**20), st.integers(0, 2**62))
def test_compiled_lines_are_byte_for_byte_pythons(rows, first_index, t0, last_ns):
    rows = [(k, max(ns, t0), *rest) for k, ns, *rest in rows]  # times are never before the recorder's start
    last_ns = max(last_ns, t0)
    expected = python_reference(rows, first_index, t0, last_ns)
    compiled = send_lines.format_rows(np.array(rows, dtype=np.int64), first_index, t0, last_ns)
    assert "CPUDispatcher" in repr(send_lines._format_rows), "numba should be installed: the test runs the compiled loop"
    compiled_loop, send_lines._format_rows = send_lines._format_rows, send_lines._format_rows_python
    try:  # the fallback where numba is missing: same contract
        fallback = send_lines.format_rows(np.array(rows, dtype=np.int64), first_index, t0, last_ns)
    finally:
        send_lines._format_rows = compiled_loop
    for lines, ends, times, last in (compiled, fallback):
        assert bytes(lines[:ends[-1]]) == expected[0]
        assert times.tolist() == expected[1]
        assert last == expected[2]


def test_compiled_lines_parse_as_the_v1_send_events():
    rows = np.array([[SEND_INVOKE, 105, 3, 7, 42, -1, -1], [SEND_OK, 100, 3, 7, 42, 9, -1], [SEND_OK, 110, 3, 7, 43, -1001, 5]],
                    dtype=np.int64)
    lines, ends, times, last = send_lines.format_rows(rows, 10, 100, 0)
    events = [json.loads(line) for line in bytes(lines[:ends[-1]]).decode().splitlines()]
    assert events == [
        {"index": 10, "time": 5, "process": 3, "type": "invoke", "f": "send", "value": {"key": 7, "value": 42}},
        # a row whose clock reading is older than the one before it keeps the later time (5, not 0)
        {"index": 11, "time": 5, "process": 3, "type": "ok", "f": "send",
         "value": {"key": 7, "value": 42, "offset": 9, "epoch": None}},
        {"index": 12, "time": 10, "process": 3, "type": "ok", "f": "send",
         "value": {"key": 7, "value": 43, "offset": None, "epoch": 5}},
    ]
    assert times.tolist() == [5, 5, 10] and last == 110 and ends.tolist() == np.cumsum([len(x) for x in
                                                                                          bytes(lines[:ends[-1]]).splitlines(keepends=True)]).tolist()


def test_other_events_keep_their_place_between_sends(tmp_path: Path):
    rec = Recorder(tmp_path / "h.jsonl")
    rec.send_invoke(0, 1, 10)
    rec.record(1, "invoke", "poll")
    rec.send_ok(0, 1, 10, 0, None)
    rec.record(1, "ok", "poll", {"records": [{"key": 1, "offset": 0, "value": 10, "epoch": 2}]})
    rec.send_invoke(0, 2, 11)
    rec.send(0, "info", 2, 11, None, None, "_MSG_TIMED_OUT: Local: Message timed out")
    rec.nemesis("kill", {"targets": [1]})
    assert rec.events_recorded == 7
    counts = rec.counts
    assert counts == {"invoke": 3, "ok": 2, "fail": 0, "info": 2}
    rec.close(parquet=False)
    events = read_history(tmp_path / "h.jsonl")
    assert [(e["index"], e["process"], e["type"], e["f"]) for e in events] == [
        (0, 0, "invoke", "send"), (1, 1, "invoke", "poll"), (2, 0, "ok", "send"), (3, 1, "ok", "poll"),
        (4, 0, "invoke", "send"), (5, 0, "info", "send"), (6, "nemesis", "info", "kill")]
    assert events[5]["value"] == {"key": 2, "value": 11, "offset": None, "epoch": None}
    assert events[5]["error"] == "_MSG_TIMED_OUT: Local: Message timed out"
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    assert validate_history(tmp_path / "h.jsonl") == []


def test_hot_path_from_many_threads_loses_and_reorders_nothing(tmp_path: Path):
    rec = Recorder(tmp_path / "h.jsonl", flush_interval_s=0.002)  # many small batches: flushes race the appends
    per_thread = 20_000

    def producer(p: int) -> None:
        for n in range(per_thread):
            v = p * per_thread + n
            rec.send_invoke(p, n % 8, v)
            rec.send_ok(p, n % 8, v, n, None)
            if n % 997 == 0:
                rec.record(p + 100, "invoke", "poll")
                rec.record(p + 100, "ok", "poll", {"records": []})

    threads = [threading.Thread(target=producer, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rec.close(parquet=False)
    events = read_history(tmp_path / "h.jsonl")
    sends = [e for e in events if e["f"] == "send"]
    assert len(sends) == 4 * per_thread * 2
    assert [e["index"] for e in events] == list(range(len(events)))
    assert validate_history(tmp_path / "h.jsonl") == []  # includes: times never go backwards, invoke before ok
    for p in range(4):  # each thread's events in its own program order
        values = [e["value"]["value"] for e in sends if e["process"] == p and e["type"] == "invoke"]
        assert values == list(range(p * per_thread, (p + 1) * per_thread))


def test_a_row_that_does_not_fit_int64_is_refused_before_anything_is_appended(tmp_path: Path):
    rec = Recorder(tmp_path / "h.jsonl")
    rec.send_invoke(0, 1, 1)
    try:
        rec.send_invoke(0, 1, 2**64)
    except Exception as exc:  # struct.error: the row is packed before it is appended
        assert "format requires" in str(exc) or "out of range" in str(exc)
    else:
        raise AssertionError("an out-of-range value was accepted")
    rec.send_ok(0, 1, 1, 0, None)
    rec.close(parquet=False)
    assert [e["type"] for e in read_history(tmp_path / "h.jsonl")] == ["invoke", "ok"]


def test_rows_made_elsewhere_join_the_history_in_order_never_earlier_than_they_arrive(tmp_path: Path):
    """The Java feed's rows (Recorder.append_rows): whole rows of sends only, times kept unless an
    earlier-recorded event is later, in which case they take its time (never backwards)."""
    import time

    from harness.history.send_lines import ROW

    with Recorder(tmp_path / "h.jsonl") as rec:
        t = time.monotonic_ns()
        rec.record(0, "invoke", "poll", None)
        late = ROW.pack(SEND_INVOKE, t - 10_000_000, 3, 1, 42, -1, -1)  # made 10 ms before the poll was recorded
        ok = ROW.pack(SEND_OK, time.monotonic_ns() + 1_000_000, 3, 1, 42, 7, -1)
        assert rec.append_rows(late + ok) == 2
        with pytest.raises(ValueError, match="whole number"):
            rec.append_rows(late[:-1])
        with pytest.raises(ValueError, match="send invokes and acknowledgements"):
            rec.append_rows(ROW.pack(OTHER, t, 0, 0, 0, 0, 0))
    events = read_history(tmp_path / "h.jsonl")
    assert [(e["f"], e["type"]) for e in events] == [("poll", "invoke"), ("send", "invoke"), ("send", "ok")]
    assert events[1]["time"] == events[0]["time"] and events[2]["time"] > events[1]["time"]
    assert events[2]["value"] == {"key": 1, "value": 42, "offset": 7, "epoch": None}
    assert validate_history(tmp_path / "h.jsonl") == []
