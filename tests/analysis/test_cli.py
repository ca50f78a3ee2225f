"""The CLI: bad input is exit 2 naming the file, line and fix; verdicts map to exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from analysis.cli import main
from tests.analysis.histories import Builder, inject, valid_history, write_run


def run_cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.parametrize("cmd", [[], ["check"], ["trends"]])
def test_every_command_has_help(cmd):
    out = subprocess.run([sys.executable, "-m", "analysis", *cmd, "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "Usage" in out.stdout


def test_missing_run_dir_is_exit_2(tmp_path):
    r = run_cli("check", str(tmp_path / "nope"))
    assert r.exit_code == 2 and "not a directory" in r.output


def test_run_dir_without_history_is_exit_2(tmp_path):
    r = run_cli("check", str(tmp_path))
    assert r.exit_code == 2 and "no history.jsonl" in r.output


def test_bad_config_is_exit_2(tmp_path):
    write_run(tmp_path, Builder().events)
    (tmp_path / "config.json").write_text("{nope")
    r = run_cli("check", str(tmp_path))
    assert r.exit_code == 2 and "config.json" in r.output


@pytest.mark.slow
@pytest.mark.parametrize("line3, why", [
    ("{not json", "not valid JSON"),
    ('{"index": 2, "time": 2000, "process": 1, "type": "done", "f": "send", "value": {"key": 0, "value": 1}}',
     "field 'type'"),
    ('{"index": 2, "time": 2000, "process": 1, "type": "ok", "f": "send", "value": {"key": "a", "value": 1}}',
     "send's value"),
])
def test_malformed_line_is_exit_2_naming_the_line(spark, tmp_path, line3, why):
    events = valid_history(1, steps=3).events
    lines = [json.dumps(e) for e in events]
    lines[2] = line3
    tmp_path.joinpath("history.jsonl").write_text("\n".join(lines) + "\n")
    r = run_cli("check", str(tmp_path))
    assert r.exit_code == 2
    assert "line 3" in r.output and why in r.output and "history.jsonl" in r.output


@pytest.mark.slow
def test_exit_codes_follow_the_verdict(spark, tmp_path):
    clean = write_run(tmp_path / "clean", valid_history(3).events)
    dup = write_run(tmp_path / "dup", inject(valid_history(3), "duplicate").events)
    unseen = write_run(tmp_path / "unseen", inject(valid_history(3), "unseen").events)
    assert run_cli("check", str(clean)).exit_code == 0
    r = run_cli("check", str(dup))
    assert r.exit_code == 1 and "verdict: invalid" in r.output
    assert run_cli("check", str(unseen)).exit_code == 3  # no drain status: unknown
    assert json.loads((dup / "results.json").read_text())["counts"]["duplicate"] == 1
    r = run_cli("trends", str(tmp_path))
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "_trends" / "summary.json").read_text())
    assert summary["runs"] == 3 and summary["groups"][0]["invalid"] == 1


def test_bad_input_is_a_message_and_a_hint(tmp_path):
    r = run_cli("check", str(tmp_path / "nope"))
    assert r.exit_code == 2
    assert r.output.startswith("error: ") and "\nhint: " in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("cmd, blocked", [
    ("check", "config.json"),  # unreadable: read before any JVM starts
    ("report", "report.html"),  # unwritable
    ("dashboard", "index.html"),
])
def test_an_os_error_is_exit_2_without_a_traceback(tmp_path, cmd, blocked):
    write_run(tmp_path, Builder().events)
    (tmp_path / blocked).mkdir()  # a directory where a file is read or written: an OSError even as root
    r = run_cli(cmd, str(tmp_path), *(["--no-reports"] if cmd == "dashboard" else []))
    assert r.exit_code == 2, r.output
    assert f"error: {tmp_path / blocked}" in r.output and "\nhint: " in r.output and "Traceback" not in r.output


def test_history_and_trends_errors_are_harness_errors_with_their_fix():
    """Raised under `harness run` or the nightly plugin as well, not only under `analysis`'s CLI:
    every caller that maps HarnessError to exit 2 with a hint handles them."""
    from analysis.checking.history_load import HistoryError
    from analysis.report.trends import TrendsError
    from harness.errors import HarnessError

    for err, fix in ((HistoryError("run/history.jsonl line 3: no 'type'"), "docs/history.md"),
                     (TrendsError("store: no <run>/results.json found"), "python -m analysis check")):
        assert isinstance(err, HarnessError) and err.exit_code == 2
        assert str(err).splitlines()[0] == err.message and fix in err.hint
