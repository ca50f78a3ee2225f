"""`python -m harness`: every command has --help; `run --config` (TOML) and `run --replay`
(config.json) build the RunConfig and nemesis they describe, flags winning. No Kafka: `run` is
replaced by a stub that captures what it was given."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.run.settings import make_faults, run_config
from workloads.profiles import get_profile

COMMANDS = ["run", "check", "report", "dashboard", "trends", "scenario", "cleanup", "bootstrap", "smoke"]


class Captured(Exception):
    pass


@pytest.fixture
def captured(monkeypatch, tmp_path):
    """Invoke `harness run ...` and return (RunConfig, nemesis) instead of running."""
    import harness.run.steps

    def fake_run(config, faults=None, progress=None):
        raise Captured(config, faults)

    monkeypatch.setattr(harness.run.steps, "run", fake_run)
    monkeypatch.delenv("KAFKA_HARNESS_RUN_DEFAULTS", raising=False)  # ./chaos run's defaults (harness/run/defaults.py)

    def invoke(*args: str):
        result = CliRunner().invoke(cli, ["run", *args])
        assert isinstance(result.exception, Captured), result.output
        return result.exception.args

    return invoke


def test_every_command_has_help():
    top = CliRunner().invoke(cli, ["--help"])
    for name in COMMANDS:
        assert name in top.output
        result = CliRunner().invoke(cli, [name, "--help"])
        assert result.exit_code == 0 and "Usage" in result.output, name


def test_toml_file_describes_a_run_and_flags_override(captured, tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('time-limit = 30\nprofile = "unsafe"\nnemesis = ["kill", "partition"]\nseed = 4\n'
                    'db_targets = "leader"\nnemesis-interval = 5\nstore = "%s"\n' % (tmp_path / "s"))
    config, nemesis = captured("--config", str(toml), "--seed", "9")
    assert (config.time_limit_s, config.profile, config.seed, config.store) == (30.0, "unsafe", 9, tmp_path / "s")
    assert list(nemesis.nemeses) == ["kill", "partition"] and nemesis.interval_s == 5.0 and nemesis.seed == 9
    assert nemesis.nemeses["kill"].targets == ("leader",)


@pytest.mark.parametrize("text, message", [
    ("time-limit = 30\nbogus = 1\n", "unknown key 'bogus'"),
    ("time-limit = \"soon\"\n", "bad value 'soon' for 'time-limit'"),
    ("time-limit = \n", "is not valid TOML"),
])
def test_bad_toml_is_exit_2_naming_the_key(tmp_path, text, message):
    toml = tmp_path / "run.toml"
    toml.write_text(text)
    out = subprocess.run([sys.executable, "-m", "harness", "run", "--config", str(toml)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and message in " ".join(out.stderr.split()), out.stderr


def config_json(tmp_path: Path) -> Path:
    """A config.json as harness.run.steps writes it, for a run with nemesis settings off the defaults."""
    values = {"store": str(tmp_path / "store"), "workload": "queue", "profile": "unsafe", "brokers": 3, "kafka_version": "3.9.2",
              "time_limit": 45.0, "rate": 500.0, "seed": 11, "partitions": 4, "producers": 3, "consumers": 1, "subscribe": True,
              "abort_probability": 0.2, "drain_timeout": 30.0, "nemesis": "partition,kill,loss", "nemesis_interval": 7.0,
              "partition_targets": "halves,bridge", "db_targets": "controller", "one_way": True, "loss_probability": 0.3}
    config = run_config(values, command_line=[])
    nemesis = make_faults(config)
    record = {"run_id": "r1", "seed": config.seed, "kafka_version": config.kafka_version, "brokers": config.brokers,
              "workload": config.workload, "profile": get_profile(config.profile).for_brokers(3).as_dict(), "rate": config.rate,
              "time_limit_s": config.time_limit_s, "partitions": config.partitions, "producers": config.producers,
              "consumers": config.consumers, "subscribe": config.subscribe, "abort_probability": None,
              "drain_timeout_s": config.drain_timeout_s, "nemesis": list(nemesis.nemeses), "nemesis_config": nemesis.describe()}
    path = tmp_path / "store" / "r1" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    return path


def same_run(a, b) -> bool:
    skip = ("command_line",)
    return {k: v for k, v in vars(a).items() if k not in skip} == {k: v for k, v in vars(b).items() if k not in skip}


def test_replay_builds_the_same_run(captured, tmp_path):
    path = config_json(tmp_path)
    original = json.loads(path.read_text())
    config, nemesis = captured("--replay", str(path))
    assert (config.seed, config.kafka_version, config.profile, config.rate, config.time_limit_s) == (11, "3.9.2", "unsafe", 500.0, 45.0)
    assert (config.partitions, config.producers, config.consumers, config.subscribe, config.drain_timeout_s) == (4, 3, 1, True, 30.0)
    assert config.store == (tmp_path / "store").resolve()
    assert json.loads(json.dumps(nemesis.describe())) == original["nemesis_config"]  # same packages, options, schedule


def test_replay_flags_override(captured, tmp_path):
    config, nemesis = captured("--replay", str(config_json(tmp_path)), "--seed", "12", "--nemesis", "none")
    assert config.seed == 12 and nemesis is None


def test_replay_of_a_non_config_is_exit_2(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{}")
    out = subprocess.run([sys.executable, "-m", "harness", "run", "--replay", str(bad)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "not a run's config.json" in out.stderr


@pytest.mark.parametrize("args, names", [
    (["--profile", "safe", "--kafka-version", "0.10.2.2"], ["idempotent producer", "--profile no-idempotence"]),
    (["--workload", "txn", "--profile", "no-idempotence", "--kafka-version", "0.10.2.2"], ["txn workload", "0.11.0"]),
])
def test_a_profile_the_version_cannot_serve_is_refused_before_anything_starts(tmp_path, args, names):
    """Idempotence and transactions need Kafka 0.11 (KIP-98). Before this check the cluster
    started and every producer then died with _UNSUPPORTED_FEATURE (issue 21's first try)."""
    store = tmp_path / "store"
    out = subprocess.run([sys.executable, "-m", "harness", "run", *args, "--no-check", "--store", str(store)],
                         capture_output=True, text=True, timeout=60)
    said = " ".join(out.stderr.split())
    assert out.returncode == 2 and all(n in said for n in names), out.stderr
    assert not store.exists() or not any(store.iterdir()), "nothing is created for a refused run"


def test_which_profiles_each_version_can_serve():
    from workloads.profiles import PROFILES, refuse_unsupported
    from harness.errors import HarnessError

    def served(version: str, workload: str = "queue") -> set[str]:
        ok = set()
        for name, profile in PROFILES.items():
            try:
                refuse_unsupported(profile, workload, version)
                ok.add(name)
            except HarnessError:
                pass
        return ok

    assert served("0.11.0.3") == served("4.3.1") == set(PROFILES)
    assert served("0.10.2.2") == {n for n, p in PROFILES.items() if not p.enable_idempotence} == {"no-idempotence", "acks1", "acks0", "unsafe"}
    assert served("0.10.2.2", "txn") == set() and served("1.1.1", "txn") == set(PROFILES)


def test_disk_targets_and_errors_reach_the_nemesis_and_its_replay(captured, tmp_path):
    config, nemesis = captured("--nemesis", "disk", "--disk-targets", "leader", "--disk-errors", "enospc,eio-read",
                               "--store", str(tmp_path / "store"))
    disk = nemesis.nemeses["disk"]
    assert (disk.targets, disk.errors) == (("leader",), ("enospc", "eio-read"))
    from harness.run.settings import read_replay

    path = tmp_path / "store" / "r" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"seed": 1, "workload": "queue", "nemesis_config": nemesis.describe()}))
    values = read_replay(path)
    assert (values["disk_targets"], values["disk_errors"]) == ("leader", "enospc,eio-read")


@pytest.mark.parametrize("flag, value, said", [
    ("--disk-targets", "all", "disk target"), ("--disk-errors", "eio-everything", "unknown disk error")])
def test_a_disk_fault_that_cannot_be_served_is_exit_2_before_anything_starts(tmp_path, flag, value, said):
    store = tmp_path / "store"
    out = subprocess.run([sys.executable, "-m", "harness", "run", "--nemesis", "disk", flag, value, "--no-check",
                          "--store", str(store)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and said in out.stderr, out.stderr
    assert not store.exists() or not any(store.iterdir())


def test_compare_replicas_comes_from_the_flag_the_toml_file_and_a_replayed_run(captured, tmp_path):
    """Off by default; on from --compare-replicas, from `compare-replicas = true` in a TOML file, and
    from the config.json of a run that compared its replicas, so that its replay compares them too."""
    assert captured()[0].compare_replicas is False
    assert captured("--compare-replicas")[0].compare_replicas is True
    toml = tmp_path / "run.toml"
    toml.write_text("compare-replicas = true\n")
    assert captured("--config", str(toml))[0].compare_replicas is True
    from harness.run.settings import read_replay

    path = tmp_path / "store" / "r" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"seed": 1, "workload": "queue", "compare_replicas": True}))
    assert read_replay(path)["compare_replicas"] is True
    assert captured("--replay", str(path))[0].compare_replicas is True


def test_crash_clients_comes_from_the_flag_the_toml_file_and_a_replayed_run(captured, tmp_path):
    """Never by default; a mean life in seconds from --crash-clients, from `crash-clients = 5` in a
    TOML file, and from a replayed run's config.json (crash_clients_s), so its replay crashes too."""
    assert captured()[0].crash_clients_s is None
    assert captured("--crash-clients", "7.5")[0].crash_clients_s == 7.5
    toml = tmp_path / "run.toml"
    toml.write_text("crash-clients = 5\n")
    assert captured("--config", str(toml))[0].crash_clients_s == 5.0
    from harness.run.settings import read_replay

    path = tmp_path / "store" / "r" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"seed": 1, "workload": "queue", "crash_clients_s": 3.0}))
    assert read_replay(path)["crash_clients"] == 3.0
    assert captured("--replay", str(path))[0].crash_clients_s == 3.0


@pytest.mark.parametrize("args, said", [(["--crash-clients", "0"], "--crash-clients"),
                                        (["--crash-clients", "5", "--workload", "txn"], "queue workload")])
def test_crash_clients_that_cannot_be_served_is_exit_2_before_anything_starts(tmp_path, args, said):
    store = tmp_path / "store"
    out = subprocess.run([sys.executable, "-m", "harness", "run", *args, "--no-check", "--store", str(store)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and said in out.stderr, out.stderr
    assert not store.exists() or not any(store.iterdir())
