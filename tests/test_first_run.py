"""`./chaos run`'s defaults (issue 34: 30 s of kill, partition and pause): they apply only where
nothing else chose, so --nemesis, --time-limit, --replay and --config keep their meaning; and the
lines that say what was injected and healed. No cluster: `harness.run.steps.run` is replaced by a
stand-in that keeps the config."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import harness.run.steps
from harness.cli import cli
from harness.errors import HarnessError
from harness.run.defaults import RUN_DEFAULTS_ENV, fault_lines

REPO = Path(__file__).resolve().parent.parent
SAFE = "kill,partition,pause"
CHAOS = f"time-limit=30 nemesis={SAFE}"  # what ./chaos run sets


class Captured(Exception):
    pass


@pytest.fixture
def started(monkeypatch):
    """Invoke `run` with args (and the environment default, if given); return (config, faults)."""
    def fake_run(config, faults=None, progress=None):
        raise Captured(config, faults)

    monkeypatch.setattr(harness.run.steps, "run", fake_run)

    def invoke(args, default=CHAOS):
        monkeypatch.setattr("sys.argv", ["harness", "run", "--no-check", *args])  # what the recorded command line starts from
        env = {RUN_DEFAULTS_ENV: default} if default is not None else {}
        if default is None:
            monkeypatch.delenv(RUN_DEFAULTS_ENV, raising=False)
        result = CliRunner().invoke(cli, ["run", "--no-check", *args], env=env)
        if isinstance(result.exception, Captured):
            return result.exception.args
        raise AssertionError(f"run did not start: {result.exception!r}\n{result.output}")

    return invoke


def replayable(tmp_path: Path, packages: list[str]) -> Path:
    run_dir = tmp_path / "store" / "20261125T000000-abcdef"
    run_dir.mkdir(parents=True)
    path = run_dir / "config.json"
    nemesis_config = {"packages": packages, "interval_s": 10.0, "schedule": [], "options": {}} if packages else None
    path.write_text(json.dumps({"seed": 7, "workload": "queue", "time_limit_s": 20, "nemesis": packages,
                                "nemesis_config": nemesis_config, "config_format": 2}))
    return path


def test_the_environment_defaults_apply_when_nothing_else_chose(started):
    config, faults = started(["--rate", "500"])
    assert config.nemesis == SAFE and sorted(faults.packages) == ["kill", "partition", "pause"]
    assert config.time_limit_s == 30 and config.rate == 500
    # The recorded command line alone reproduces the run, without the environment.
    assert config.command_line[-4:] == ["--time-limit", "30", "--nemesis", SAFE]


def test_a_flag_beats_the_environment_default(started):
    config, _ = started(["--time-limit", "5"])
    assert config.time_limit_s == 5 and config.nemesis == SAFE
    assert config.command_line == ["python", "-m", "harness", "run", "--no-check", "--time-limit", "5", "--nemesis", SAFE]


def test_nemesis_none_keeps_the_fault_free_run(started):
    config, faults = started(["--nemesis", "none"])
    assert config.nemesis == "none" and faults is None
    assert config.command_line == ["python", "-m", "harness", "run", "--no-check", "--nemesis", "none", "--time-limit", "30"]


def test_an_explicit_nemesis_wins(started):
    config, _ = started(["--nemesis", "clock"])
    assert config.nemesis == "clock"


@pytest.mark.parametrize("packages", [[], ["kill"]])
def test_a_replay_keeps_its_own_nemesis(started, tmp_path, packages):
    path = str(replayable(tmp_path, packages))
    config, faults = started(["--replay", path])
    assert config.command_line[-2:] == ["--replay", path], "the environment added nothing to a replay"
    assert config.nemesis == (",".join(packages) or "none")
    assert config.seed == 7 and (faults is None) == (not packages)
    # Its time limit too: a different one would drop the recorded fault schedule.
    assert config.time_limit_s == 20 and config.store == tmp_path / "store"


def test_a_config_file_is_the_whole_run(started, tmp_path):
    # A file without a nemesis key runs as `python -m harness run --config` would: fault-free.
    toml = tmp_path / "run.toml"
    toml.write_text("time-limit = 12\n")
    config, _ = started(["--config", str(toml)])
    assert config.nemesis == "none" and config.time_limit_s == 12
    toml.write_text('nemesis = ["pause"]\n')
    assert started(["--config", str(toml)])[0].nemesis == "pause"


def test_without_the_environment_the_harness_default_holds(started):
    config, faults = started([], default=None)
    assert config.nemesis == "none" and faults is None and config.time_limit_s == 60


@pytest.mark.parametrize("default, named", [("nemesis=kill,chaosmonkey", "chaosmonkey"), ("time-limit=soon", "soon"),
                                             ("colour=blue", "colour=blue"), ("nemesis", "nemesis")])
def test_a_bad_environment_default_is_bad_input(monkeypatch, default, named):
    monkeypatch.setattr(harness.run.steps, "run", lambda *a, **k: pytest.fail("started"))
    result = CliRunner().invoke(cli, ["run", "--no-check"], env={RUN_DEFAULTS_ENV: default})
    assert isinstance(result.exception, HarnessError) and result.exception.exit_code == 2
    assert named in result.exception.message and RUN_DEFAULTS_ENV in result.exception.message


def test_the_chaos_script_defaults_to_safe_packages():
    # Safe: no lossy data mounts (power, disk), no fault that a correct Kafka may lose data to.
    script = (REPO / "chaos").read_text()
    match = re.search(RUN_DEFAULTS_ENV + r'="\$\{' + RUN_DEFAULTS_ENV + r'-([^}]+)\}"', script)
    assert match and match.group(1) == CHAOS, "chaos sets the defaults of `./chaos run`"
    commands = [line for line in script.splitlines() if not line.lstrip().startswith("#")]
    run_line = next(c for c in commands if "-m harness run" in c)
    assert run_line.rstrip(" ;").endswith('-m harness run "$@"'), "flags would beat --replay's and --config's settings"


def test_fault_lines_name_the_faults_and_the_heal(tmp_path):
    schedule = [
        {"at_s": 1.0, "package": "kill", "action": "start", "params": {"target": "leader", "targets": [3]}},
        {"at_s": 6.0, "package": "kill", "action": "stop", "params": {}},
        {"at_s": 2.0, "package": "partition", "action": "start", "params": {"shape": "halves", "targets": [1, 2]}},
        {"at_s": 3.0, "package": "pause", "action": "start", "params": {"target": "controller", "targets": []}},
        {"at_s": 4.0, "package": "pause", "action": "start", "params": {}},
    ]
    (tmp_path / "config.json").write_text(json.dumps({
        "nemesis_config": {"packages": ["kill", "partition", "pause"], "schedule": schedule},
        "heal": {"isr_full": True, "waited_s": 4.25, "errors": []}}))
    faults, healed = fault_lines(tmp_path)
    assert faults.startswith("faults injected: 2 — kill ×1 (leader→3); partition ×1 (halves→1,2); pause ×0")
    assert faults.endswith("1 skipped, 1 not applied")
    assert healed == "healed: every fault undone, every ISR full again after 4.2 s"
    (tmp_path / "config.json").write_text(json.dumps({
        "nemesis_config": {"packages": ["kill"], "schedule": schedule[:1]},
        "heal": {"isr_full": False, "waited_s": 120.3, "lagging": {"queue-0": [2]}}}))
    assert "ISRs not full after 120 s" in fault_lines(tmp_path)[1]
    (tmp_path / "config.json").write_text(json.dumps({
        "nemesis_config": {"packages": ["kill"], "schedule": schedule[:1]},
        "heal": {"isr_full": False, "waited_s": 5.1, "lagging": {"queue-0": [2]},
                 "refused": {"2": "FATAL [ReplicaFetcherThread-0-1], Exiting because log truncation is not allowed"}}}))
    assert "broker(s) 2 refused to truncate and cannot rejoin the ISR" in fault_lines(tmp_path)[1]
    (tmp_path / "config.json").write_text(json.dumps({"nemesis": [], "nemesis_config": None}))
    assert fault_lines(tmp_path) == []
