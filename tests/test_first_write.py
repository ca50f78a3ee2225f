"""Faults begin once the workload's first write is acknowledged (harness/run/steps.py
await_first_write), bounded: the recorder marks the first acknowledged send or committed txn, and
the wait gives up after its bound or when the cluster stops answering."""

from __future__ import annotations

import logging
import threading
import time
from types import SimpleNamespace

from harness.history import Recorder
from harness.run.steps import RunSteps


def test_the_recorder_marks_the_first_acknowledged_send_not_an_invoke_or_a_poll(tmp_path):
    rec = Recorder(tmp_path / "history.jsonl", flush_interval_s=0.02)
    try:
        rec.send_invoke(0, 1, 7)
        rec.record(1, "invoke", "poll")
        rec.record(1, "ok", "poll", {"records": []})
        rec.flush()
        assert not rec.first_write.is_set()
        rec.send_ok(0, 1, 7, 0, 0)
        assert rec.first_write.wait(2.0)  # the flusher writes the batch within its interval
    finally:
        rec.close()


def test_the_recorder_marks_a_committed_txn_as_a_write(tmp_path):
    rec = Recorder(tmp_path / "history.jsonl")
    try:
        rec.record(0, "fail", "txn", {"sends": [], "records": []})
        assert not rec.first_write.is_set()
        rec.record(0, "ok", "txn", {"sends": [], "records": []})
        assert rec.first_write.is_set()
    finally:
        rec.close()


def _steps(recorder: Recorder, time_limit_s: float, unresponsive: str | None = None) -> RunSteps:
    steps = object.__new__(RunSteps)  # only what await_first_write reads
    steps.config = SimpleNamespace(time_limit_s=time_limit_s)
    steps.recorder = recorder
    steps.watch = SimpleNamespace(failure=None, unresponsive=unresponsive)
    steps.workload = SimpleNamespace()
    steps.notify = lambda phase, rec: None
    return steps


def test_the_faults_wait_for_the_first_acknowledged_write(tmp_path):
    rec = Recorder(tmp_path / "history.jsonl", flush_interval_s=0.02)
    try:
        steps = _steps(rec, time_limit_s=60)
        threading.Timer(0.6, lambda: rec.send_ok(0, 1, 7, 0, 0)).start()
        began = time.monotonic()
        steps.await_first_write(began)
        assert 0.5 <= time.monotonic() - began < 5.0
    finally:
        rec.close()


def test_the_wait_is_bounded_by_half_the_time_limit_and_says_so(tmp_path, caplog):
    rec = Recorder(tmp_path / "history.jsonl")
    try:
        began = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="harness.run.steps"):
            _steps(rec, time_limit_s=1.0).await_first_write(began)
        waited = time.monotonic() - began
        assert 0.5 <= waited < 2.0, waited
        assert "no write was acknowledged" in caplog.text
    finally:
        rec.close()


def test_the_wait_ends_when_the_cluster_stops_answering(tmp_path):
    rec = Recorder(tmp_path / "history.jsonl")
    try:
        began = time.monotonic()
        _steps(rec, time_limit_s=120, unresponsive="no broker answered for 61 s").await_first_write(began)
        assert time.monotonic() - began < 2.0
    finally:
        rec.close()
