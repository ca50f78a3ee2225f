"""The detection sweep's bookkeeping (harness/experiments/detection.py): what counts as found, resuming from
the ledger, the table. The runs themselves are ordinary `harness run`s (tests/test_run_faults.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.experiments.detection import LEDGER, Detection, DetectionRun, nemesis_options, profile_for, read_ledger, run_detection
from nemesis.transfer import TransferNemesis

SETTINGS = {"time_limit_s": 120.0, "interval_s": 10.0, "rate": 500.0, "nemesis": ["kill", "partition", "pause"],
            "nemesis_options": nemesis_options(["kill", "partition", "pause"])}


def made(version: str, seed: int, verdict: str = "valid", **kw) -> DetectionRun:  # type: ignore[no-untyped-def]
    return DetectionRun(version, profile_for(version), seed, SETTINGS, f"/store/{version}/run-{seed}", verdict, **kw)


def test_profile_is_safe_except_before_idempotence() -> None:
    assert profile_for("0.10.2.2") == "no-idempotence"
    assert [profile_for(v) for v in ("0.11.0.3", "1.1.1", "3.9.2", "4.3.1")] == ["safe"] * 4


def test_found_means_invalid_by_loss_or_divergence() -> None:
    assert made("1.1.1", 1, "invalid", lost=3, forbidden=["lost-write"]).found
    assert made("1.1.1", 1, "invalid", forbidden=["replica-divergence"]).found
    assert not made("4.3.1", 1, "invalid", duplicated=2, forbidden=["duplicate"]).found  # a duplicate alone is not a loss
    assert not made("4.3.1", 1, "unknown", lost=0).found  # not drained: nothing proven
    assert not made("4.3.1", 1, "valid").found


def test_sweep_resumes_from_its_ledger_and_counts_first_finder(tmp_path: Path) -> None:
    calls: list[tuple[str, int]] = []

    def execute(store, version, profile, seed, settings, finisher):  # type: ignore[no-untyped-def]
        calls.append((version, seed))
        if version == "0.10.2.2" and seed in (2, 3):
            return made(version, seed, "invalid", lost=5, forbidden=["lost-write"])
        if seed == 3 and version == "4.3.1":
            return made(version, seed, "failed", failed="the cluster vanished")
        if seed == 2 and version == "4.3.1":
            return made(version, seed, "invalid", forbidden=["nonmonotonic-poll"])
        return made(version, seed)

    first = run_detection(tmp_path, ["0.10.2.2"], [1, 2], execute=execute, **_knobs())
    assert calls == [("0.10.2.2", 1), ("0.10.2.2", 2)]
    again = run_detection(tmp_path, ["0.10.2.2", "4.3.1"], [1, 2, 3], execute=execute, **_knobs())
    assert calls[2:] == [("0.10.2.2", 3), ("4.3.1", 1), ("4.3.1", 2), ("4.3.1", 3)]  # seeds 1 and 2 of 0.10.2.2 not rerun
    assert len(first.runs) == 2 and len(again.runs) == 6
    rows = {r["version"]: r for r in again.rows()}
    assert rows["0.10.2.2"] == {"version": "0.10.2.2", "profile": "no-idempotence", "schedule": "random (unwatched)", "seeds": 3,
                                "found": 2, "first": 2, "invalid_other": 0, "failed": 0, "unknown": 0, "states": [],
                                "transitions": []}
    assert rows["4.3.1"]["found"] == 0 and rows["4.3.1"]["failed"] == 1 and rows["4.3.1"]["invalid_other"] == 1
    text = again.markdown()
    assert "| 0.10.2.2 | no-idempotence | random (unwatched) | 3 | 2 | 2 | 0 | 0 | 0 | - | - |" in text
    assert "FAILED: the cluster vanished" in text


def test_a_failed_run_is_run_again_on_resume(tmp_path: Path) -> None:
    outcomes = iter(["failed", "valid"])

    def execute(store, version, profile, seed, settings, finisher):  # type: ignore[no-untyped-def]
        verdict = next(outcomes)
        return made(version, seed, verdict, failed="node 3 exited during start-up" if verdict == "failed" else None)

    assert Detection(run_detection(tmp_path, ["4.3.1"], [1], execute=execute, **_knobs()).runs).rows()[0]["failed"] == 1
    again = run_detection(tmp_path, ["4.3.1"], [1], execute=execute, **_knobs())
    assert [r.verdict for r in again.runs] == ["valid"]
    assert len(read_ledger(tmp_path)) == 2  # both rows kept in the ledger
    assert run_detection(tmp_path, ["4.3.1"], [1], execute=execute, **_knobs()).runs[0].verdict == "valid"  # not run a third time


def test_other_settings_are_another_measurement(tmp_path: Path) -> None:
    calls = []
    execute = lambda store, version, profile, seed, settings, finisher: calls.append(seed) or made(version, seed)  # noqa: E731
    run_detection(tmp_path, ["1.1.1"], [1], execute=execute, **_knobs())
    run_detection(tmp_path, ["1.1.1"], [1], execute=execute, **{**_knobs(), "time_limit_s": 60.0})
    assert calls == [1, 1]


@pytest.mark.parametrize("option, value, key", [("compare_replicas", True, "compare_replicas"),
                                               ("crash_clients_s", 5.0, "crash_clients_s"),
                                               ("controllers", 3, "controllers")])
def test_an_option_is_another_measurement_and_absent_from_the_key_when_off(tmp_path: Path, option, value, key) -> None:
    """Rows recorded before the option existed keep their key: the setting is there only when on."""
    seen = []

    def execute(store, version, profile, seed, settings, finisher):  # type: ignore[no-untyped-def]
        seen.append(dict(settings))
        return DetectionRun(version, profile, seed, settings, f"/store/{version}/run-{seed}", "valid")

    run_detection(tmp_path, ["1.1.1"], [1], execute=execute, **_knobs())
    run_detection(tmp_path, ["1.1.1"], [1], execute=execute, **_knobs(), **{option: value})
    run_detection(tmp_path, ["1.1.1"], [1], execute=execute, **_knobs(), **{option: value})  # resumed: not run again
    assert [s.get(key) for s in seen] == [None, value]


def test_db_targets_are_another_measurement_that_the_runs_get(tmp_path: Path) -> None:
    """detect --db-targets: the kill and pause options record the targets, so the runs with and
    without them never merge, and the setting reaches the run (its config's nemesis settings)."""
    seen = []

    def execute(store, version, profile, seed, settings, finisher):  # type: ignore[no-untyped-def]
        seen.append((settings.get("nemesis_settings"), settings["nemesis_options"]["kill"]["targets"]))
        return DetectionRun(version, profile, seed, settings, f"/store/{version}/run-{seed}", "valid")

    wide = {"db_targets": "one,leader,controller,follower,rejoined"}
    run_detection(tmp_path, ["1.1.1"], [1], execute=execute, **_knobs())
    run_detection(tmp_path, ["1.1.1"], [1], execute=execute, **_knobs(), nemesis_settings=wide)
    run_detection(tmp_path, ["1.1.1"], [1], execute=execute, **_knobs(), nemesis_settings=wide)  # resumed: not run again
    assert seen == [(None, ["one", "leader", "controller"]),
                    (wide, ["one", "leader", "controller", "follower", "rejoined"])]


def test_a_changed_package_default_is_another_measurement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The transfer's coins went from 0.5 to 0.75: the runs before and after must not merge."""
    seen = []

    def execute(store, version, profile, seed, settings, finisher):  # type: ignore[no-untyped-def]
        seen.append(settings["nemesis_options"]["transfer"]["cut_probability"])
        return DetectionRun(version, profile, seed, settings, f"/store/{version}/run-{seed}", "valid")

    knobs = {**_knobs(), "packages": ("transfer",)}
    run_detection(tmp_path, ["1.1.1"], [1], execute=execute, **knobs)
    run_detection(tmp_path, ["1.1.1"], [1], execute=execute, **knobs)  # resumed: not run again
    made_before = TransferNemesis.__init__
    monkeypatch.setattr(TransferNemesis, "__init__", lambda self, **kw: made_before(self, **{"cut_probability": 0.1, **kw}))
    run_detection(tmp_path, ["1.1.1"], [1], execute=execute, **knobs)
    assert seen == [0.75, 0.1]


def test_a_named_profile_runs_on_every_version_and_is_another_measurement(tmp_path: Path) -> None:
    seen = []

    def execute(store, version, profile, seed, settings, finisher):  # type: ignore[no-untyped-def]
        seen.append((version, profile))
        return DetectionRun(version, profile, seed, settings, f"/store/{version}/run-{seed}", "valid")

    run_detection(tmp_path, ["1.1.1"], [1], execute=execute, **_knobs())
    run_detection(tmp_path, ["1.1.1", "4.3.1"], [1], execute=execute, **_knobs(), profile="acks1")
    run_detection(tmp_path, ["1.1.1"], [1], execute=execute, **_knobs(), profile="acks1")  # resumed: not run again
    assert seen == [("1.1.1", "safe"), ("1.1.1", "acks1"), ("4.3.1", "acks1")]
    assert {(r["version"], r["profile"]) for r in Detection(read_ledger(tmp_path)).rows()} == {
        ("1.1.1", "safe"), ("1.1.1", "acks1"), ("4.3.1", "acks1")}


def test_a_torn_last_line_is_run_again(tmp_path: Path) -> None:
    good = made("1.1.1", 1)
    (tmp_path / LEDGER).write_text(json.dumps(good.__dict__) + "\n" + '{"version": "1.1.1", "se')
    assert [r.seed for r in read_ledger(tmp_path)] == [1]
    assert Detection(read_ledger(tmp_path)).rows()[0]["seeds"] == 1


def _knobs() -> dict:
    return {"time_limit_s": SETTINGS["time_limit_s"], "interval_s": SETTINGS["interval_s"], "rate": SETTINGS["rate"],
            "packages": tuple(SETTINGS["nemesis"])}


@pytest.mark.parametrize("args, named", [(["--seeds", "x"], "--seeds"), (["--kafka-versions", "1.x"], "not a Kafka version"),
                                         (["--nemesis", "boom"], "boom"), (["--bogus"], "--bogus"),
                                         (["--profile", "nope"], "unknown profile 'nope'"),
                                         (["--profile", "safe", "--kafka-versions", "0.10.2.2"], "no-idempotence"),
                                         (["--recipes", "--nemesis", "kill"], "drop --nemesis"),
                                         (["--schedule", "guided", "--nemesis", "kill,heir"], "generic fault packages only"),
                                         (["--schedule", "wild"], "--schedule"),
                                         (["--db-targets", "one,leeder"], "leeder")])
def test_bad_input_exits_2_before_anything_runs(tmp_path: Path, args: list[str], named: str) -> None:
    done = subprocess.run([sys.executable, "-m", "harness", "detect", "--store", str(tmp_path / "s"), *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert named in done.stderr
    assert not (tmp_path / "s" / LEDGER).exists()


def test_recipes_run_each_version_under_its_measured_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`detect --recipes`: issue 21's measurement in one command, each version under the recipe of
    harness/experiments/regression.py, each a measurement of its own in the ledger."""
    from click.testing import CliRunner

    import harness.experiments.detection
    from harness.experiments.commands import detect

    def fake(store, version, profile, seed, settings, finisher):  # type: ignore[no-untyped-def]
        return DetectionRun(version, profile, seed, settings, f"{store}/{version}/{seed}", "valid")

    monkeypatch.setattr(harness.experiments.detection, "_execute", fake)
    monkeypatch.setattr("harness.run.finish.Finisher", lambda **kw: None)
    done = CliRunner().invoke(detect, ["--recipes", "--kafka-versions", "0.10.2.2,1.1.1,2.0.1", "--seeds", "1",
                                       "--store", str(tmp_path / "s")])
    assert done.exit_code == 0, done.output
    ran = {r.version: r.settings for r in read_ledger(tmp_path / "s")}
    assert ran["0.10.2.2"]["nemesis"] == ["heir"] and ran["0.10.2.2"]["compare_replicas"] is True
    assert "crash_clients_s" not in ran["0.10.2.2"]
    assert ran["1.1.1"]["nemesis"] == ["transfer"] and ran["1.1.1"]["crash_clients_s"] == 5.0
    assert ran["2.0.1"]["nemesis"] == ["kill", "partition", "pause", "flap", "rejoin"]
    assert "3 run(s) × seeds 1, 120 s each: 0.10.2.2 (no-idempotence) under heir + compare-replicas" in " ".join(done.output.split())


def test_a_schedule_is_another_measurement_whose_rows_count_states(tmp_path: Path) -> None:
    """detect --schedule guided|random: the ledger keys the schedule and each row holds the run's
    distinct states and transitions; the table shows both, per schedule."""
    def execute(store, version, profile, seed, settings, finisher):  # type: ignore[no-untyped-def]
        run = made(version, seed)
        run.settings, run.states, run.transitions, run.at_risk = settings, 10 * seed, 20 * seed, seed - 1
        return run

    run_detection(tmp_path, ["0.10.2.2"], [1, 2], execute=execute, schedule="guided", **_knobs())
    run_detection(tmp_path, ["0.10.2.2"], [1], execute=execute, schedule="random", **_knobs())
    runs = read_ledger(tmp_path)
    assert [r.settings.get("schedule") for r in runs] == ["guided", "guided", "random"]
    rows = {r["schedule"]: r for r in Detection(runs).rows()}
    assert rows["guided"]["states"] == [10, 20] and rows["random"]["transitions"] == [20]
    text = Detection(runs).markdown()
    assert "| 0.10.2.2 | no-idempotence | guided | 2 | 0 | - | 0 | 0 | 0 | 15.0 | 30.0 |" in text
    assert "| 0.10.2.2 | random | 1 | valid |" in text
    assert " | 20 | 40 | 1 | " in text  # guided seed 2: states, transitions, writes at risk (AtRisk)


def test_detect_refuses_the_quorum_package_without_dedicated_controllers(tmp_path: Path) -> None:
    """A campaign with every generic package once stopped at its first run: quorum needs a quorum of
    dedicated controllers. detect now says so before any cluster starts, and names --controllers."""
    from click.testing import CliRunner

    from harness.experiments.commands import detect

    out = CliRunner().invoke(detect, ["--kafka-versions", "4.4.0", "--nemesis", "kill,quorum", "--seeds", "1",
                                    "--store", str(tmp_path / "store")])
    assert out.exit_code == 2 and "add --controllers 3" in out.output
    assert not (tmp_path / "store").exists()
