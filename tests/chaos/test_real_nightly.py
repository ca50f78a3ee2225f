"""One real case of the nightly matrix, run the way CI runs it (`pytest -m chaos -k ...`), inside
the ordinary suite: a real cluster, a partition fault, the Spark check, report.html, and the
store's dashboard. Then its config.json replays to the same run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.explain.producer_evidence import known_client_duplicates

ROOT = Path(__file__).resolve().parents[2]
CASE = "queue-partition-safe-4.3.1-seed1"


# The nightly's own (it runs one of the nightly's cases through a second pytest with its own Spark):
# 92-197 s in the default suite's fresh-clone runs of 2026-11-26, which must stay near 30 min. The
# default suite keeps the plugin's tests (tests/chaos/test_plugin.py) and the replay test.
@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.chaos
def test_one_safe_case_of_the_nightly_matrix(tmp_path, prepared, report_figure):
    store = tmp_path / "store"
    command = [sys.executable, "-m", "pytest", "-m", "chaos", "-k", CASE, "tests/chaos/test_nightly.py",
               "--chaos-time-limit", "20", "--chaos-seeds", "1", "--chaos-nemeses", "partition", "--chaos-profiles", "safe",
               "--chaos-store", str(store), "--junitxml", str(tmp_path / "junit.xml"), "-p", "no:cacheprovider"]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "1 passed" in out.stdout or "1 xfailed" in out.stdout
    runs = [p for p in store.iterdir() if p.is_dir()]
    assert len(runs) == 1
    run_dir = runs[0]
    results = json.loads((run_dir / "results.json").read_text())
    # xfail only for librdkafka's epoch-bump duplicates with the brokers' evidence (harness/pytest_chaos.py).
    assert results["verdict"] == "valid" or known_client_duplicates(results), results["reasons"]
    assert (run_dir / "report.html").exists() and (store / "index.html").exists()
    assert f"dashboard: {store / 'index.html'}" in out.stdout
    line = next(line for line in out.stdout.splitlines() if line.startswith(CASE))
    report_figure(f"one nightly case (20 s workload), pytest -m chaos: {line.split()[2]} s")

    # Its config.json replays to the same run settings (run stubbed: no second cluster).
    from click.testing import CliRunner

    import harness.run.steps
    from harness.cli import cli

    captured = {}

    def fake_run(config, faults=None, progress=None):
        captured.update(config=config, nemesis=faults)
        raise SystemExit(0)

    original = harness.run.steps.run
    harness.run.steps.run = fake_run
    try:
        CliRunner().invoke(cli, ["run", "--replay", str(run_dir / "config.json")])
    finally:
        harness.run.steps.run = original
    config, nemesis = captured["config"], captured["nemesis"]
    recorded = json.loads((run_dir / "config.json").read_text())
    assert (config.seed, config.profile, config.time_limit_s, config.kafka_version) == (1, "safe", 20.0, "4.3.1")
    replayed = json.loads(json.dumps(nemesis.describe()))
    # The replay says it replays (the guided schedule's describe() names its scheduler); the rest is equal.
    assert replayed.pop("scheduler") == "replay" and recorded["nemesis_config"].pop("scheduler") == "random"
    assert replayed == recorded["nemesis_config"]
