"""`harness status` names the local checkers of other checkouts too (analysis/checking/spark_server.py
`elsewhere`): each checkout has its own, and one left by a removed worktree stops only when idle."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from analysis.checking import spark_server
from harness.checker_commands import status


def test_status_names_a_running_checker_of_another_checkout_and_drops_a_stale_one(tmp_path, monkeypatch):
    monkeypatch.setattr(spark_server.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.delenv("KAFKA_CHAOS_CHECKER_DIR", raising=False)
    monkeypatch.setattr(spark_server, "_is_ours", lambda pid: pid == 4242)
    monkeypatch.setattr(spark_server, "checks_running", lambda state, folder=None: 0)
    uid = os.getuid()
    for tag, pid in (("other001", 4242), ("stale002", 999)):
        folder = tmp_path / f"kafka-chaos-checker-{uid}-{tag}"
        folder.mkdir()
        (folder / "state.json").write_text(json.dumps({"pid": pid, "jvm_pid": pid + 1, "port": 1, "ready": True,
                                                       "started": 0, "idle_s": 600.0, "python": "/x/.venv/bin/python"}))
    found = spark_server.elsewhere()
    assert [f.name for f, _ in found] == [f"kafka-chaos-checker-{uid}-other001"]
    assert not (tmp_path / f"kafka-chaos-checker-{uid}-stale002" / "state.json").exists()  # a dead one's file goes
    out = CliRunner().invoke(status, []).output
    assert "local checker of another checkout: running, idle for" in out and "pid 4242, JVM pid 4243" in out
    assert "local checker: not running" in out  # this checkout's own
