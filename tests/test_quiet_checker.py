"""Issue 34, items 3 and 4: a check prints no line of Spark's, the JVM's or log4j's; the local
checker (a reused Spark Connect server) gives the embedded check's results, shows in `harness
status`, stops by itself when idle, and is gone when stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.checking import spark_server
from tests.analysis.histories import valid_history, write_run

pytestmark = [pytest.mark.slow]
DRAINED = {"drain": {"complete": True, "high_watermarks": {}}}
# What reached the terminal before (issue 34): the JVM's launcher, Spark's shell banner, log4j.
NOISE = ("WARNING:", "Setting default log level", "sc.setLogLevel", "log4j", "SLF4J", "WARN ", "INFO ", "Exception")


def harness(*args: str, env: dict[str, str] | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def gone(pid: int) -> bool:
    return not spark_server._alive(pid)


def noise(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if any(n in line for n in NOISE)]


def comparable(path: Path) -> dict:
    results = json.loads(path.read_text())
    results.pop("checked_at")
    results.pop("timings", None)
    results["history"].pop("path")  # absolute on the server
    return results


def test_the_local_checker_is_quiet_reused_visible_and_stops(tmp_path, report_figure):
    folder = tmp_path / "checker"
    env = {"KAFKA_CHAOS_CHECKER_DIR": str(folder), "KAFKA_CHAOS_CHECKER_IDLE": "600"}
    run = write_run(tmp_path / "run", valid_history(5).events, DRAINED)
    try:
        assert "not running" in harness("status", env=env).stdout
        seconds = []
        for name in ("cold", "warm"):
            began = time.perf_counter()
            proc = harness("check", "--output", str(tmp_path / name), str(run), env=env)
            seconds.append(time.perf_counter() - began)
            assert proc.returncode == 0, proc.stderr[-3000:]
            assert proc.stderr.strip() == "", f"the terminal got: {noise(proc.stderr) or proc.stderr[:2000]}"
        state = spark_server.read_state(folder)
        assert state is not None and state["ready"], "the server outlives the check, for the next one"
        assert spark_server.warmup_status(folder) is None, "a server started by a check is warmed by that check, not by a warm-up"
        status = harness("status", env=env).stdout
        assert "running" in status and str(state["jvm_pid"]) in status, status
        # The embedded checker (a Spark of the command's own) is as quiet. It had a test of its own, whose
        # cold Spark cost 37-80 s of the default suite; this check of the same history is that test.
        embedded = harness("check", "--output", str(tmp_path / "embedded"), str(run), env={**env, "KAFKA_CHAOS_CHECKER": "embedded"})
        assert embedded.returncode == 0, embedded.stderr[-3000:]
        assert "verdict: valid" in embedded.stdout
        assert embedded.stderr.strip() == "", f"the terminal got: {noise(embedded.stderr) or embedded.stderr[:2000]}"
        assert comparable(tmp_path / "warm" / "results.json") == comparable(tmp_path / "embedded" / "results.json")
        assert comparable(tmp_path / "cold" / "results.json") == comparable(tmp_path / "embedded" / "results.json")
        report_figure(f"small history: cold {seconds[0]:.1f} s, warm {seconds[1]:.1f} s (one server, same results as embedded)")
        assert harness("status", "--stop", env=env).returncode == 0
        assert gone(state["jvm_pid"]), "the JVM is gone once stopped"
        assert gone(state["pid"]), "and so is its supervisor"
    finally:
        spark_server.stop(folder)


def test_an_idle_checker_stops_by_itself(tmp_path, monkeypatch):
    folder = tmp_path / "checker"
    monkeypatch.setenv("KAFKA_CHAOS_CHECKER_DIR", str(folder))
    monkeypatch.setenv("KAFKA_CHAOS_CHECKER_IDLE", "3")
    monkeypatch.setenv("KAFKA_CHAOS_CHECKER_WARMUP", "0")  # a warm-up keeps it busy (tests/test_checker_warmup.py)
    try:
        state = spark_server.ensure()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not gone(state["pid"]):
            time.sleep(0.5)
        assert gone(state["pid"]), "idle for 3 s, the supervisor stops"
        time.sleep(1)
        assert gone(state["jvm_pid"]), "and its JVM with it"
        assert spark_server.read_state(folder) is None
    finally:
        spark_server.stop(folder)
