"""The nightly plugin (harness/pytest_chaos.py) under pytester: the matrix and its ids, option
parsing, the failure report, JUnit properties and the dashboard. No Kafka: the runner is
tests/chaos/synthetic_runner.py (synthetic run dirs checked by the reference checker)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import analysis.report.dashboard  # noqa: F401  in-process pytester unloads modules first imported inside a run;
import tests.chaos.synthetic_runner  # noqa: F401  numpy cannot be loaded twice, so import them here
from harness.pytest_chaos import parse_seeds

pytest_plugins = ["pytester"]

NIGHTLY = (Path(__file__).parent / "test_nightly.py").read_text()
PLUGIN = ("-p", "harness.pytest_chaos")
DEFAULT_IDS = [f"queue-{n}-{p}-{v}-seed1" for n in ("partition", "kill", "pause", "clock", "loss", "partition+kill+pause+clock")
               for p in ("safe", "unsafe") for v in ("4.4.0", "4.3.1")]


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_nightly=NIGHTLY)
    return pytester


def collected_ids(result: pytest.RunResult) -> list[str]:
    return [line.split("[", 1)[1].rstrip("]") for line in result.outlines if "::test_nightly[" in line]


def run(suite: pytest.Pytester, runner: str, *args: str) -> pytest.RunResult:
    store = suite.path / "store"
    one_version = () if "--kafka-versions" in args else ("--kafka-versions", "4.4.0")  # -k picks one case, not one per version
    return suite.runpytest(*PLUGIN, "-m", "chaos", "--chaos-runner", f"tests.chaos.synthetic_runner:{runner}",
                           "--chaos-store", str(store), *one_version, *args)


def test_default_matrix_is_twenty_four_runs_on_the_newest_two_releases_with_readable_ids(suite):
    result = suite.runpytest(*PLUGIN, "-m", "chaos", "--collect-only", "-q")
    assert collected_ids(result) == DEFAULT_IDS


def test_choosing_from_the_matrix(suite):
    result = suite.runpytest(*PLUGIN, "-m", "chaos", "--collect-only", "-q", "--chaos-seeds", "2",
                             "--kafka-versions", "4.3.1,3.9.2", "--chaos-nemeses", "kill,partition+kill",
                             "--chaos-profiles", "safe", "--chaos-workloads", "queue,txn")
    ids = collected_ids(result)
    assert len(ids) == 2 * 2 * 2 * 2
    assert "txn-partition+kill-safe-3.9.2-seed2" in ids and "queue-kill-safe-4.3.1-seed1" in ids


def test_shards_split_the_matrix_into_disjoint_shares_that_cover_it(suite):
    shares = [collected_ids(suite.runpytest(*PLUGIN, "-m", "chaos", "--collect-only", "-q", "--chaos-shard", f"{i}/5"))
              for i in range(1, 6)]
    assert sorted(i for share in shares for i in share) == sorted(DEFAULT_IDS)  # each case once, in some share
    assert [len(share) for share in shares] == [5, 5, 5, 5, 4]
    assert shares[0][:2] == [DEFAULT_IDS[0], DEFAULT_IDS[5]]  # round-robin: a mix of the matrix in each


@pytest.mark.parametrize("shard", ["0/4", "5/4", "two/4", "3"])
def test_a_bad_shard_is_a_usage_error(suite, shard):
    result = suite.runpytest(*PLUGIN, "-m", "chaos", "--collect-only", "--chaos-shard", shard)
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "--chaos-shard" in result.stderr.str()


def test_k_selects_one_case(suite):
    result = suite.runpytest(*PLUGIN, "-m", "chaos", "--collect-only", "-q", "-k", "queue-kill-safe-4.3.1-seed1")
    assert collected_ids(result) == ["queue-kill-safe-4.3.1-seed1"]


def test_without_m_chaos_nothing_runs(suite):
    result = suite.runpytest(*PLUGIN, "-m", "not chaos")
    result.assert_outcomes(deselected=24)


@pytest.mark.parametrize("args, message", [
    (("--chaos-nemeses", "kill+flood"), "unknown package ['flood']"),
    (("--chaos-profiles", "safe,yolo"), "unknown ['yolo']"),
    (("--chaos-workloads", "stream"), "unknown ['stream']"),
    (("--chaos-seeds", "abc"), "--chaos-seeds 'abc'"),
    (("--chaos-time-limit", "0"), "must be greater than 0"),
    (("--chaos-runner", "nocolon"), "module:function"),
])
def test_bad_options_are_usage_errors_naming_the_problem(suite, args, message):
    result = suite.runpytest(*PLUGIN, "-m", "chaos", "--collect-only", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_parse_seeds():
    assert parse_seeds("3") == (1, 2, 3)
    assert parse_seeds("3,7") == (3, 7)
    assert parse_seeds("5..7") == (5, 6, 7)
    with pytest.raises(pytest.UsageError):
        parse_seeds("0")


def test_failure_report_shows_run_dir_headline_examples_and_report(suite):
    result = run(suite, "lossy", "-k", "queue-kill-safe")
    result.assert_outcomes(failed=1, deselected=11)
    out = result.stdout.str()
    run_dir = next((suite.path / "store").glob("*-queue-kill-safe-4.4.0-seed1"))
    assert "verdict invalid, expected valid for profile safe" in out
    assert f"run directory: {run_dir}" in out
    assert "headline: lost 1  duplicated 0  reordered 0  diverged 0" in out
    assert "first examples of lost-write:" in out and '"value": 1000000000' in out
    assert f"report: {run_dir / 'report.html'}" in out
    assert f"--replay {run_dir / 'config.json'}" in out
    assert (run_dir / "history.jsonl").exists()  # the run directory is kept


def test_a_safe_run_whose_only_fault_is_librdkafkas_duplicates_is_xfail_with_the_evidence(suite):
    result = run(suite, "client_duplicates", "-k", "queue-kill-safe", "-rx")
    result.assert_outcomes(xfailed=1, deselected=11)
    out = result.stdout.str()
    assert "known client bug: each of 1 duplicate(s) was sent while" in out and "issues/4953" in out


def test_an_out_of_order_sequence_outside_the_duplicates_send_window_does_not_excuse_it(suite):
    result = run(suite, "client_duplicates_elsewhere", "-k", "queue-kill-safe")
    result.assert_outcomes(failed=1, deselected=11)
    assert "verdict invalid, expected valid for profile safe" in result.stdout.str()


def test_duplicates_without_that_evidence_still_fail_a_safe_run(suite):
    result = run(suite, "duplicates", "-k", "queue-kill-safe")
    result.assert_outcomes(failed=1, deselected=11)
    assert "verdict invalid, expected valid for profile safe" in result.stdout.str()


def test_unsafe_profile_passes_with_what_was_found(suite):
    result = run(suite, "lossy", "-k", "queue-kill-unsafe")
    result.assert_outcomes(passed=1, deselected=11)


def test_a_run_that_did_not_complete_fails_with_its_dir(suite):
    result = run(suite, "broken", "-k", "queue-kill-unsafe")
    result.assert_outcomes(failed=1, deselected=11)
    assert "the run or its check did not complete" in result.stdout.str()
    assert "error: cluster did not start" in result.stdout.str()


def test_junit_properties_and_dashboard(suite):
    xml = suite.path / "junit.xml"
    result = run(suite, "clean", "--chaos-nemeses", "kill,partition", "--junitxml", str(xml))
    result.assert_outcomes(passed=4)
    cases = ET.parse(xml).getroot().iter("testcase")
    props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in cases}
    first = props["test_nightly[queue-kill-safe-4.4.0-seed1]"]
    assert first["verdict"] == "valid" and first["lost"] == "0" and first["duplicated"] == "0"
    assert first["run_id"].endswith("queue-kill-safe-4.4.0-seed1")
    assert Path(first["run_dir"]).name == first["run_id"] and first["report"].endswith("report.html")
    index = suite.path / "store" / "index.html"
    assert index.exists() and f"dashboard: {index}" in result.stdout.str()
    assert "4 run(s) in" in result.stdout.str()


@pytest.fixture
def stubbed_run(monkeypatch):
    """What real_runner hands `harness run` (config and faults), with no cluster behind it."""
    import harness.run.steps
    from harness.errors import HarnessError

    seen = {}

    def fake_run(config, faults=None, progress=None):
        seen.update(config=config, nemesis=faults)
        raise HarnessError("stub: no cluster")

    monkeypatch.setattr(harness.run.steps, "run", fake_run)
    return seen


def test_real_runner_builds_the_run_from_the_run_commands_defaults(stubbed_run, tmp_path):
    """The case's settings over `harness run`'s defaults (flags off: no subscribe, two-way cuts)."""
    from harness.pytest_chaos import ChaosCase, ChaosSettings, real_runner

    settings = ChaosSettings(tmp_path, 20.0, 5.0, (1,), ("4.3.1",), ("queue",), ("partition+kill",), ("safe",), None, "x")
    outcome = real_runner(ChaosCase("queue", "partition+kill", "unsafe", "3.9.2", 4), settings, lambda: None)
    config, nemesis = stubbed_run["config"], stubbed_run["nemesis"]
    assert outcome.error == "stub: no cluster"
    assert (config.subscribe, config.profile, config.kafka_version, config.seed, config.time_limit_s) == (False, "unsafe", "3.9.2", 4, 20.0)
    assert list(nemesis.nemeses) == ["partition", "kill"] and nemesis.interval_s == 5.0
    assert nemesis.nemeses["partition"].one_way_cuts is False


def test_a_regression_case_runs_its_recipes_options(stubbed_run, tmp_path):
    """1.1.1's recipe (harness/experiments/regression.py) reaches the run: replicas compared, clients crashed."""
    from harness.pytest_chaos import ChaosSettings, real_runner

    settings = ChaosSettings(tmp_path, 20.0, 5.0, (3,), ("4.3.1",), ("queue",), ("kill",), ("safe",), None, "x", ("1.1.1",))
    case, = settings.regression_cases("1.1.1")
    real_runner(case, settings, lambda: None)
    config = stubbed_run["config"]
    assert (config.kafka_version, config.seed, config.profile) == ("1.1.1", 3, "safe")
    assert config.compare_replicas is True and config.crash_clients_s == 5.0
    assert list(stubbed_run["nemesis"].nemeses) == ["transfer"]
    old, = settings.regression_cases("0.10.2.2")
    assert (old.nemesis, old.profile, old.compare_replicas, old.crash_clients_s) == (
        "heir", "no-idempotence", True, None)
    unlisted, = settings.regression_cases("2.0.1")  # the compound mix, measured on every old version
    assert (unlisted.nemesis, unlisted.compare_replicas) == ("kill+partition+pause+flap+rejoin", False)


def regression_ids(result: pytest.RunResult) -> list[str]:
    return [line.split("[", 1)[1].rstrip("]") for line in result.outlines if "::test_regression[" in line]


def test_regression_set_is_off_unless_asked(suite):
    result = suite.runpytest(*PLUGIN, "-m", "chaos", "--collect-only", "-q")
    assert regression_ids(result) == []
    on = suite.runpytest(*PLUGIN, "-m", "chaos", "--collect-only", "-q", "--chaos-regression")
    assert regression_ids(on) == ["regression-0.10.2.2", "regression-1.1.1"]
    bad = suite.runpytest(*PLUGIN, "-m", "chaos", "--collect-only", "--chaos-regression", "--chaos-regression-versions", "1.x")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR and "not a Kafka version" in "\n".join(bad.errlines)


@pytest.mark.parametrize("runner, passed", [("lossy", True), ("clean", False)])
def test_regression_passes_only_when_some_seed_finds_loss(suite, runner, passed):
    result = run(suite, runner, "--chaos-regression", "--chaos-regression-versions", "1.1.1", "--chaos-seeds", "2",
                 "-k", "regression")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == (1 if passed else 0) and outcomes.get("failed", 0) == (0 if passed else 1)
    if not passed:
        text = result.stdout.str()
        assert "no seed of Kafka 1.1.1 found a forbidden loss or divergence under transfer + compare-replicas + crash-clients 5" in text
        assert "measured: 1.1.1: 3 of 10 seeds found KIP-279's divergence" in text
        assert "queue-transfer-safe-1.1.1-cmp-crash5-seed1" in text and "seed2" in text  # 1.1.1's own recipe


def test_a_run_with_no_verdict_is_retried_once_and_both_attempts_are_kept(suite):
    xml = suite.path / "junit.xml"
    result = run(suite, "flaky", "-k", "queue-kill-safe", "--junitxml", str(xml))
    result.assert_outcomes(passed=1, deselected=11)
    case = next(ET.parse(xml).getroot().iter("testcase"))
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["verdict"] == "valid" and props["attempt1_error"] == "cluster did not start"
    assert (Path(props["attempt1_run_dir"]) / "FAILED").exists()  # the original stays in the store
    assert Path(props["run_dir"]).is_dir() and props["run_dir"] != props["attempt1_run_dir"]
    out = result.stdout.str()
    assert "queue-kill-safe-4.4.0-seed1 (attempt 1)" in out and "FAILED" in out and "2 run(s) in" in out


def test_a_verdict_is_never_retried_away(suite):
    # The retry's invalid verdict is the case's: it fails, and the first attempt is named beside it.
    result = run(suite, "flaky_lossy", "-k", "queue-kill-safe")
    result.assert_outcomes(failed=1, deselected=11)
    out = result.stdout.str()
    assert "verdict invalid, expected valid" in out
    assert "attempt 1 ended with no verdict and was retried: cluster did not start" in out
    # An invalid verdict on the first attempt runs once: no second run directory.
    result = run(suite, "lossy", "-k", "queue-kill-safe", "--chaos-store", str(suite.path / "store2"))
    result.assert_outcomes(failed=1, deselected=11)
    assert len([d for d in (suite.path / "store2").iterdir() if d.is_dir()]) == 1


def test_retries_zero_never_retries(suite):
    result = run(suite, "flaky", "-k", "queue-kill-safe", "--chaos-retries", "0")
    result.assert_outcomes(failed=1, deselected=11)
    assert "attempt 1" not in result.stdout.str()
