"""Runners for the plugin's own tests (`--chaos-runner tests.chaos.synthetic_runner:clean` or
`:lossy`): each writes a small synthetic run directory (tests/reports/synth.py) with the case's
real profile, checks it with the plain-Python reference checker (a real results.json, no
Spark, no Kafka) and renders the real report.html."""

from __future__ import annotations

import json
from typing import Any, Callable

from analysis.report.page import render_report
from harness.pytest_chaos import ChaosCase, ChaosOutcome, ChaosSettings
from tests.reports.synth import make_results, make_run
from workloads.profiles import get_profile


def _run(case: ChaosCase, settings: ChaosSettings, anomaly: str | None) -> ChaosOutcome:
    settings.store.mkdir(parents=True, exist_ok=True)
    run_dir = make_run(settings.store, f"20260101T0000{len(list(settings.store.iterdir())):02d}-{case.id}", anomaly,
                       seed=case.seed, seconds=6, rate=40, keys=2, parquet=False, kafka_version=case.kafka_version)
    config = json.loads((run_dir / "config.json").read_text())
    config.update(profile=get_profile(case.profile).for_brokers(3).as_dict(), nemesis=case.nemesis.split("+"))
    (run_dir / "config.json").write_text(json.dumps(config, indent=2))
    results = make_results(run_dir, anomaly)
    return ChaosOutcome(run_dir, results, render_report(run_dir), {"run": 0.1})


def clean(case: ChaosCase, settings: ChaosSettings, spark: Callable[[], Any]) -> ChaosOutcome:
    return _run(case, settings, None)


def lossy(case: ChaosCase, settings: ChaosSettings, spark: Callable[[], Any]) -> ChaosOutcome:
    """One acknowledged write lost (reads went past its offset)."""
    return _run(case, settings, "lost-write")


def broken(case: ChaosCase, settings: ChaosSettings, spark: Callable[[], Any]) -> ChaosOutcome:
    """A run that could not complete (no results)."""
    run_dir = settings.store / f"broken-{case.id}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "FAILED").write_text("cluster did not start\n")
    return ChaosOutcome(run_dir, error="cluster did not start")


def client_duplicates(case: ChaosCase, settings: ChaosSettings, spark: Callable[[], Any]) -> ChaosOutcome:
    """One duplicate, with a broker's OutOfOrderSequenceException as evidence (librdkafka #4953)."""
    from analysis.explain.producer_evidence import ISSUE

    outcome = _run(case, settings, "duplicate")
    assert outcome.results is not None
    outcome.results["out_of_order_sequences"] = {
        "count": 1, "explanation": ISSUE, "duplicates_matched": {"duplicates": 1, "explained": 1},
        "examples": [{"broker": "1", "line": "OutOfOrderSequenceException: Out of order sequence number for producer 1"}]}
    return outcome


def client_duplicates_elsewhere(case: ChaosCase, settings: ChaosSettings, spark: Callable[[], Any]) -> ChaosOutcome:
    """One duplicate, and a broker's OutOfOrderSequenceException that falls outside its send's
    window (or on another partition): not evidence for that duplicate."""
    outcome = client_duplicates(case, settings, spark)
    assert outcome.results is not None
    outcome.results["out_of_order_sequences"]["duplicates_matched"] = {"duplicates": 1, "explained": 0, "unexplained": [1]}
    return outcome


def duplicates(case: ChaosCase, settings: ChaosSettings, spark: Callable[[], Any]) -> ChaosOutcome:
    """One duplicate and no evidence of a client bug."""
    return _run(case, settings, "duplicate")


def flaky(case: ChaosCase, settings: ChaosSettings, spark: Callable[[], Any]) -> ChaosOutcome:
    """The first attempt of each case cannot complete (as a broker that did not start); the next one runs."""
    settings.store.mkdir(parents=True, exist_ok=True)
    if not (settings.store / f"broken-{case.id}").exists():
        return broken(case, settings, spark)
    return _run(case, settings, None)


def flaky_lossy(case: ChaosCase, settings: ChaosSettings, spark: Callable[[], Any]) -> ChaosOutcome:
    """Fails to complete once, then finds a lost write: the retry's verdict is the case's."""
    settings.store.mkdir(parents=True, exist_ok=True)
    if not (settings.store / f"broken-{case.id}").exists():
        return broken(case, settings, spark)
    return _run(case, settings, "lost-write")
