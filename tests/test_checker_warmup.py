"""Issue 34, item 4: the local checker warms itself up on a synthetic history as soon as it listens,
gives way the moment a real check claims it, and hands its warm session on to the next check
(analysis/checking/warmup.py, analysis/checking/sessions.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter

import pytest

from analysis.checking import sessions, spark_server, warmup
from analysis.reference.checker import counts
from harness.history.faults import BY_START
from harness.history.files import read_parquet_events
from tests.analysis.histories import valid_history, write_run

DRAINED = {"drain": {"complete": True, "high_watermarks": {}}}


def test_the_synthetic_history_is_a_faulted_run_that_the_reference_checker_finds_clean(tmp_path):
    run = warmup.synthetic_run(tmp_path / "w")
    events = read_parquet_events(run / "history.parquet")
    assert not (run / "history.jsonl").exists(), "only the form the checks read is kept"
    assert not any(counts(events).values()), {k: v for k, v in counts(events).items() if v}
    kinds = Counter(e["f"] for e in events)
    assert kinds["send"] > 7000 and kinds["poll"] > 800, kinds
    assert {"kill", "start-partition", "pause"} <= set(BY_START) & set(kinds), "faults, so the fault-band code runs too"
    config = json.loads((run / "config.json").read_text())
    drain = config["drain"]
    assert events[drain["first_index"]]["process"] in drain["processes"], "the drain starts where the config says"
    read = {(r["key"], r["offset"]) for e in events[drain["first_index"]:] if e["f"] == "poll" and e["type"] == "ok"
            for r in e["value"]["records"]}
    assert len(read) == sum(drain["high_watermarks"].values()), "the drain reads every log to its end"


def test_two_processes_never_share_a_slot_and_a_slot_outlives_no_process(tmp_path):
    state = {"token": "t" * 32}
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from analysis.checking import sessions; "
        f"print(sessions.take(Path({str(tmp_path)!r}), {state!r}), flush=True); time.sleep(30)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "0"
        assert sessions.take(tmp_path, state) == 1, "slot 0 is held by the other process"
        assert sessions.url("sc://localhost:1/;token=x", state, tmp_path).endswith(f"session_id={sessions.session_id(state, 1)}")
    finally:
        holder.kill()
        holder.wait()
        sessions._held.pop(tmp_path)[0].close()
    assert sessions.take(tmp_path, state) == 0, "a killed holder's slot is free again"
    assert sessions.take(tmp_path, {"token": "u" * 32}) == 0, "a new server: the old slot is let go and taken afresh"
    assert sessions.session_id(state, 0) != sessions.session_id({"token": "u" * 32}, 0)
    sessions._held.pop(tmp_path)[0].close()


@pytest.mark.slow
def test_the_warmup_gives_way_to_a_check_that_then_takes_its_session(tmp_path, report_figure):
    folder = tmp_path / "checker"
    env = {**os.environ, "KAFKA_CHAOS_CHECKER_DIR": str(folder), "KAFKA_CHAOS_CHECKER_IDLE": "600"}
    old = {k: os.environ.get(k) for k in ("KAFKA_CHAOS_CHECKER_DIR", "KAFKA_CHAOS_CHECKER_WARMUP")}
    os.environ["KAFKA_CHAOS_CHECKER_DIR"] = str(folder)
    os.environ.pop("KAFKA_CHAOS_CHECKER_WARMUP", None)
    run = write_run(tmp_path / "run", valid_history(7).events, DRAINED)
    try:
        state = spark_server.ensure()  # as `./chaos run` starts it: no check waiting
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (spark_server.warmup_status(folder) or {}).get("state") != "running":
            time.sleep(0.2)
        assert (spark_server.warmup_status(folder) or {}).get("state") == "running", spark_server.warmup_status(folder)
        status = subprocess.run([sys.executable, "-m", "harness", "status"], capture_output=True, text=True, env=env, timeout=60)
        assert "warming up" in status.stdout, status.stdout
        began = time.monotonic()
        check = subprocess.run([sys.executable, "-m", "harness", "check", "--output", str(tmp_path / "out"), str(run)],
                               capture_output=True, text=True, env=env, timeout=600)
        assert check.returncode == 0, check.stderr[-3000:]
        took = time.monotonic() - began
        ended = spark_server.warmup_status(folder)
        assert ended["state"] == "stopped" and ended["reason"] == "a check claimed the checker", ended
        assert spark_server.read_state(folder)["pid"] == state["pid"], "the check ran on the warmed server"
        status = subprocess.run([sys.executable, "-m", "harness", "status"], capture_output=True, text=True, env=env, timeout=60)
        assert "warm-up: stopped" in status.stdout, status.stdout
        report_figure(f"warm-up stopped after {ended['checks']} check(s) when a check came; that check took {took:.1f} s")
    finally:
        spark_server.stop(folder)
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
