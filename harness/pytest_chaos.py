"""pytest plugin: the nightly chaos matrix, selected with `pytest -m chaos`.

Loaded by the root conftest.py (`pytest_plugins = ["harness.pytest_chaos"]`), or anywhere with
`-p harness.pytest_chaos`. A test that takes the `chaos_case` fixture (tests/chaos/test_nightly.py)
is parametrised over workload x nemesis set x profile x Kafka version x seed; each item is one
real run on its own cluster, id `<workload>-<nemeses>-<profile>-<version>-seed<N>`.

The per-test runner is pluggable: `--chaos-runner module:function` names a callable
`(case: ChaosCase, settings: ChaosSettings, spark: Callable[[], SparkSession]) -> ChaosOutcome`.
The default, `harness.pytest_chaos:real_runner`, starts a cluster, runs, heals, drains, checks
(Spark) and writes report.html. The plugin's own tests use a runner that writes a small run
directory checked by the reference checker, to test the failure report without Kafka.
"""

from __future__ import annotations

import importlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from harness.chaos_matrix import (DEFAULT_NEMESES, DEFAULT_PROFILES, DEFAULT_RUNNER, DEFAULT_TIME_LIMIT_S,
                                  DEFAULT_WORKLOADS, ChaosCase, ChaosSettings, parse_seeds, parse_settings, split_list)
from harness.provision.settings import NIGHTLY_KAFKA_VERSIONS
from harness.experiments.regression import DEFAULT_VERSIONS as REGRESSION_VERSIONS
from harness.experiments.regression import recipe_for

__all__ = ["ChaosCase", "ChaosOutcome", "ChaosSettings", "DEFAULT_NEMESES", "DEFAULT_PROFILES", "DEFAULT_TIME_LIMIT_S",
           "DEFAULT_WORKLOADS", "parse_seeds", "parse_settings", "real_runner", "split_list"]
EXAMPLES_SHOWN = 3  # per anomaly kind, in a failure report

SETTINGS_KEY = pytest.StashKey["ChaosSettings"]()
RUNS_KEY = pytest.StashKey[list["RunLine"]]()
DASHBOARD_KEY = pytest.StashKey[str]()
OWN_SPARK_KEY = pytest.StashKey[Any]()


@dataclass
class ChaosOutcome:
    """What a runner returns. `error` is set when the run or its check could not complete."""

    run_dir: Path | None
    results: dict[str, Any] | None = None
    report: Path | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    earlier: list["ChaosOutcome"] = field(default_factory=list)  # attempts that ended with no verdict, retried

    @property
    def retryable(self) -> bool:
        """The harness could not finish the run or its check: no verdict says anything about Kafka.
        A verdict (valid, invalid or unknown) is never retried away."""
        return self.error is not None and (self.results or {}).get("verdict") not in ("valid", "invalid", "unknown")


@dataclass
class RunLine:
    case_id: str
    verdict: str
    seconds: float
    run_dir: str
    phases: str = ""


# --- options ------------------------------------------------------------------------------

def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("chaos", "nightly chaos matrix (select with -m chaos)")
    g.addoption("--kafka-versions", default=",".join(NIGHTLY_KAFKA_VERSIONS),
                help=f"Comma-separated Kafka versions (default {','.join(NIGHTLY_KAFKA_VERSIONS)}).")
    g.addoption("--chaos-time-limit", default=DEFAULT_TIME_LIMIT_S, type=float, help="Seconds of workload per run (default 60).")
    g.addoption("--chaos-seeds", default="1", help="A count N (seeds 1..N), a list '3,7' or a range '5..8' (default 1).")
    g.addoption("--chaos-store", default="store/nightly", help="Store folder for the run directories and index.html (default store/nightly).")
    g.addoption("--spark-master", default=None, metavar="URL", help="Spark master for the checker (default: the session's local Spark).")
    g.addoption("--chaos-workloads", default=",".join(DEFAULT_WORKLOADS), help="Comma-separated workloads: queue, txn, eos.")
    g.addoption("--chaos-nemeses", default=",".join(DEFAULT_NEMESES),
                help="Comma-separated nemesis sets, packages joined by '+' (e.g. partition,kill+pause), or none.")
    g.addoption("--chaos-profiles", default=",".join(DEFAULT_PROFILES), help="Comma-separated client profiles (workloads/profiles.py).")
    g.addoption("--chaos-nemesis-interval", default=10.0, type=float, help="Mean seconds between a fault's start and stop (default 10).")
    g.addoption("--chaos-regression", action="store_true",
                help="Also run the old-version regression set, the suite's positive control: each version's seeds run "
                     "the random recipe measured to find its bug (harness/experiments/regression.py); it passes if one finds it.")
    g.addoption("--chaos-regression-versions", default=",".join(REGRESSION_VERSIONS),
                help=f"Versions of the regression set (default {','.join(REGRESSION_VERSIONS)}).")
    g.addoption("--chaos-runner", default=DEFAULT_RUNNER, metavar="MODULE:FUNCTION", help="Per-test runner (for the plugin's own tests).")
    g.addoption("--chaos-retries", default=1, type=int, metavar="N",
                help="Run a case again, up to N times, when it ended with no verdict for the harness's own reasons "
                     "(a cluster that did not start, a check that failed); every attempt stays in the store and in "
                     "the JUnit XML. A verdict, even invalid or unknown, is never retried (default 1; 0: never).")
    g.addoption("--chaos-shard", default=None, metavar="I/N",
                help="Run only share I of N of the matrix (round-robin over its cases and regression versions), "
                     "for a CI matrix of N jobs; each job keeps its own store, and `dashboard` merges them.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: fault-injection runs against real Kafka (the nightly matrix; select with -m chaos)")
    config.stash[SETTINGS_KEY] = parse_settings(config)
    config.stash[RUNS_KEY] = []


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "regression_version" in metafunc.fixturenames:
        settings = metafunc.config.stash[SETTINGS_KEY]
        versions = settings.mine(list(settings.regression_versions))  # this shard's share
        # Without --chaos-regression: one placeholder, dropped at collection (pytest_collection_modifyitems).
        metafunc.parametrize("regression_version", [pytest.param(v, id=f"regression-{v}", marks=pytest.mark.chaos)
                                                    for v in versions] or [pytest.param(None, id="regression-off")])
    if "chaos_case" not in metafunc.fixturenames:
        return
    cases = metafunc.config.stash[SETTINGS_KEY].cases()
    metafunc.parametrize("chaos_case", [pytest.param(c, id=c.id, marks=pytest.mark.chaos) for c in cases])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = [i for i in items if not i.nodeid.endswith("[regression-off]")]


# --- running one case -----------------------------------------------------------------------

@pytest.fixture
def chaos_settings(request: pytest.FixtureRequest) -> ChaosSettings:
    return request.config.stash[SETTINGS_KEY]


def assert_regression(version: str, runs: list[tuple[ChaosCase, ChaosOutcome]]) -> None:
    """The suite's positive control: at least one seed of a version with a known replication bug
    finds a forbidden loss or divergence (as `harness detect` counts it). A seed whose run could
    not complete proves nothing either way, and says so."""
    from harness.experiments.detection import results_find_loss

    found = [c for c, o in runs if results_find_loss(o.results)]
    if found:
        return
    r = recipe_for(version)
    lines = [f"no seed of Kafka {version} found a forbidden loss or divergence under {r.label}: the suite may no longer "
             f"find the bugs it was built for (or {len(runs)} seed(s) were too few; measured: {r.measured or 'no rate'})"]
    lines += [describe(c, o) for c, o in runs]
    pytest.fail("\n".join(lines), pytrace=False)


def load_runner(spec: str) -> Callable[..., ChaosOutcome]:
    module, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise pytest.UsageError(f"--chaos-runner {spec}: cannot load it ({exc})") from None


@pytest.fixture
def chaos_run(request: pytest.FixtureRequest) -> Callable[[ChaosCase], ChaosOutcome]:
    """Run a case with the configured runner; record JUnit properties and a report section."""
    config = request.config
    settings = config.stash[SETTINGS_KEY]

    def spark() -> Any:
        # One session per pytest session: --spark-master, else the root conftest's `spark`, else our own.
        if settings.spark_master is None:
            try:
                return request.getfixturevalue("spark")
            except pytest.FixtureLookupError:
                pass
        if OWN_SPARK_KEY not in config.stash:
            from analysis.checking.spark import get_session

            config.stash[OWN_SPARK_KEY] = (get_session(settings.spark_master) if settings.spark_master
                                           else get_session("local[2]", driver_memory="1g", shuffle_partitions=4))
        return config.stash[OWN_SPARK_KEY]

    def attempt(case: ChaosCase) -> ChaosOutcome:
        began = time.monotonic()
        outcome = load_runner(settings.runner)(case, settings, spark)
        outcome.seconds.setdefault("total", round(time.monotonic() - began, 1))
        return outcome

    def run_case(case: ChaosCase) -> ChaosOutcome:
        # A nightly that fails only for Kafka: a run the harness could not finish (a broker that did not
        # start under CPU starvation, a check that failed) runs again with the same seed. The first
        # attempt stays in the store (its FAILED marker says why) and in the JUnit XML (attemptN_*).
        earlier: list[ChaosOutcome] = []
        outcome = attempt(case)
        while outcome.retryable and len(earlier) < settings.retries:
            earlier.append(outcome)
            config.stash[RUNS_KEY].append(RunLine(f"{case.id} (attempt {len(earlier)})", "FAILED", outcome.seconds["total"],
                                                  str(outcome.run_dir or ""), f"retried: {outcome.error}"))
            outcome = attempt(case)
        outcome.earlier = earlier
        for n, e in enumerate(earlier, 1):
            request.node.user_properties += [(f"attempt{n}_run_dir", str(e.run_dir or "")), (f"attempt{n}_error", e.error or "")]
        results = outcome.results or {}
        head = results.get("headline") or {}
        props = {"run_id": outcome.run_dir.name if outcome.run_dir else "", "run_dir": str(outcome.run_dir or ""),
                 "verdict": results.get("verdict", "error"), **{k: head.get(k, "") for k in ("lost", "duplicated", "reordered", "diverged")},
                 "report": str(outcome.report or ""), "seconds": outcome.seconds["total"]}
        for key, value in props.items():
            request.node.user_properties.append((key, value))
        request.node.add_report_section("call", "chaos run", describe(case, outcome))
        phases = " ".join(f"{k} {v}" for k, v in outcome.seconds.items() if k != "total")
        config.stash[RUNS_KEY].append(RunLine(case.id, props["verdict"], outcome.seconds["total"], props["run_dir"], phases))
        return outcome

    return run_case


def describe(case: ChaosCase, outcome: ChaosOutcome) -> str:
    """Run directory, headline, reasons, first examples and the report's path, for humans."""
    results = outcome.results or {}
    lines = [f"{case.id}: verdict {results.get('verdict', 'none')} (expected {'valid' if case.expect_valid else 'any verdict'})",
             f"run directory: {outcome.run_dir}", f"report: {outcome.report or 'none written'}"]
    if outcome.error:
        lines.append(f"error: {outcome.error}")
    for n, e in enumerate(outcome.earlier, 1):
        lines.append(f"attempt {n} ended with no verdict and was retried: {e.error} (run directory {e.run_dir})")
    head = results.get("headline")
    if head:
        lines.append("headline: " + "  ".join(f"{k} {head.get(k)}" for k in ("lost", "duplicated", "reordered", "diverged")))
    lines += [f"  - {r}" for r in results.get("reasons") or []]
    allowed = set(results.get("allowed") or [])
    for name, examples in (results.get("examples") or {}).items():
        if examples:
            lines.append(f"first examples of {name}{' (allowed)' if name in allowed else ''}:")
            lines += [f"  {json.dumps(e, default=str)[:400]}" for e in examples[:EXAMPLES_SHOWN]]
    if outcome.run_dir is not None:
        lines.append(f"reproduce: python -m harness run --replay {outcome.run_dir / 'config.json'}")
    return "\n".join(lines)


def assert_outcome(case: ChaosCase, outcome: ChaosOutcome) -> None:
    """Safe profiles must be valid; other profiles must complete (any verdict) with a report."""
    results = outcome.results or {}
    verdict = results.get("verdict")
    problem = None
    if outcome.error or verdict not in ("valid", "invalid", "unknown"):
        problem = "the run or its check did not complete"
    elif case.expect_valid and verdict not in ("valid", "invalid"):
        problem = f"verdict {verdict}, expected valid for profile {case.profile}"
    elif outcome.report is None or not Path(outcome.report).exists():
        problem = "no report.html was written"
    if problem:
        pytest.fail(f"{problem}\n{describe(case, outcome)}", pytrace=False)
    if case.expect_valid and verdict == "invalid":
        # Only duplicates, with the brokers' OutOfOrderSequenceExceptions as evidence: librdkafka's
        # epoch-bump bug, not Kafka's. Shown as xfail with the evidence, never as a pass.
        from analysis.explain.producer_evidence import known_client_duplicates

        known = known_client_duplicates(results)
        if known:
            pytest.xfail(f"{known}\n{describe(case, outcome)}")
        pytest.fail(f"verdict invalid, expected valid for profile {case.profile}\n{describe(case, outcome)}", pytrace=False)


def real_runner(case: ChaosCase, settings: ChaosSettings, spark: Callable[[], Any]) -> ChaosOutcome:
    """One real run: fresh cluster, workload with faults, heal, drain, Spark check, report.html."""
    from harness.errors import HarnessError
    from harness.run.finish import Finisher
    from harness.run.steps import run
    from harness.run.directory import prepare_store
    from harness.run.settings import make_faults, run_config

    # Only what the case sets; every other setting takes its default from RunConfig (run_settings.DEFAULTS).
    values = dict(store=str(settings.store), workload=case.workload, profile=case.profile, kafka_version=case.kafka_version,
                  seed=case.seed, time_limit=settings.time_limit_s, nemesis=",".join(split_list(case.nemesis.replace("+", ","))),
                  nemesis_interval=settings.nemesis_interval_s, compare_replicas=case.compare_replicas,
                  crash_clients=case.crash_clients_s)
    command = ["python", "-m", "harness", "run", "--workload", case.workload, "--profile", case.profile,
               "--kafka-version", case.kafka_version, "--seed", str(case.seed), "--time-limit", str(settings.time_limit_s),
               "--nemesis", values["nemesis"], "--nemesis-interval", str(settings.nemesis_interval_s)]
    command += (["--compare-replicas"] if case.compare_replicas else []) + (
        ["--crash-clients", str(case.crash_clients_s)] if case.crash_clients_s else [])
    store = prepare_store(settings.store)
    before = {p.name for p in store.iterdir()}
    seconds: dict[str, float] = {}
    began = time.monotonic()
    try:
        config = run_config(values, command_line=command)
        result = run(config, faults=make_faults(config))
    except HarnessError as exc:
        new = sorted(p for p in store.iterdir() if p.name not in before and p.is_dir())
        return ChaosOutcome(exc.run_dir or (new[-1] if new else None), error=str(exc))
    seconds["run"] = round(time.monotonic() - began, 1)
    seconds.update({k: round(v, 1) for k, v in result.seconds.items()})  # cluster_ready, workload, heal, drain
    began = time.monotonic()
    try:
        finished = Finisher(session=spark).check_and_report(result.run_dir)
    except Exception as exc:  # the run is kept; say why it could not be checked
        return ChaosOutcome(result.run_dir, seconds=seconds, error=f"check failed: {type(exc).__name__}: {exc}")
    seconds["check"] = round(time.monotonic() - began, 1)
    from harness.history.files import compact_history

    compact_history(result.run_dir)  # a nightly store keeps one form of a checked run's history
    return ChaosOutcome(result.run_dir, finished.results, finished.report, seconds)


# --- session end ------------------------------------------------------------------------------

def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    spark = config.stash.get(OWN_SPARK_KEY, None)
    if spark is not None:
        spark.stop()
    if not config.stash.get(RUNS_KEY, []):
        return
    store = config.stash[SETTINGS_KEY].store
    try:
        from analysis.report.dashboard import render_dashboard

        config.stash[DASHBOARD_KEY] = str(render_dashboard(store)) if store.is_dir() else f"not written: no store at {store}"
    except Exception as exc:  # the runs' verdicts matter more than the overview page
        config.stash[DASHBOARD_KEY] = f"not written: {type(exc).__name__}: {exc}"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    runs = config.stash.get(RUNS_KEY, [])
    if not runs:
        return
    terminalreporter.section("chaos runs")
    for r in runs:
        terminalreporter.write_line(f"{r.case_id:<48} {r.verdict:<8} {r.seconds:>7.1f} s  ({r.phases})  {r.run_dir}")
    total = sum(r.seconds for r in runs)
    terminalreporter.write_line(f"{len(runs)} run(s) in {total:.0f} s ({total / 60:.1f} min)")
    terminalreporter.write_line(f"dashboard: {config.stash.get(DASHBOARD_KEY, 'not written')}")
