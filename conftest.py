"""Root pytest configuration: shared fixtures and the figures printed at the end of a run."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

pytest_plugins = ["harness.pytest_chaos"]  # the nightly matrix: pytest -m chaos

FIGURES_KEY = pytest.StashKey[list[str]]()


CHECKER_KEY = pytest.StashKey[tuple[str, dict[str, str | None]]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[FIGURES_KEY] = []
    # A local checker (analysis/checking/spark_server.py) that a test starts, in-process or through a
    # `harness run`/`check` subprocess, is this session's own: its folder is ours, and
    # pytest_unconfigure stops it. It idles out after 10 minutes, the tool's default: with 2 (until
    # 2026-11-26) it was gone between most real runs, which lie further apart than that in the suite,
    # and each check started it cold again (a small history: cold 33.1 s, warm 13.7 s, in CI's run).
    # A killed pytest leaves it at most those 10 minutes.
    folder = tempfile.mkdtemp(prefix="kafka-chaos-test-checker-")
    saved = {k: os.environ.get(k) for k in ("KAFKA_CHAOS_CHECKER_DIR", "KAFKA_CHAOS_CHECKER_IDLE")}
    os.environ.update(KAFKA_CHAOS_CHECKER_DIR=folder, KAFKA_CHAOS_CHECKER_IDLE="600")
    config.stash[CHECKER_KEY] = (folder, saved)


def pytest_unconfigure(config: pytest.Config) -> None:
    if CHECKER_KEY not in config.stash:
        return
    folder, saved = config.stash[CHECKER_KEY]
    from pathlib import Path

    from analysis.checking.spark_server import stop

    stop(Path(folder))  # never leave a checker JVM behind
    shutil.rmtree(folder, ignore_errors=True)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def report_figure(request: pytest.FixtureRequest):
    """Record a measured figure (e.g. cluster start-up time) to print in the terminal summary."""

    def record(text: str) -> None:
        request.config.stash[FIGURES_KEY].append(f"{request.node.name}: {text}")

    return record


@pytest.fixture(scope="session")
def prepared():
    """Docker engine, base image and Kafka jars, prepared once per session (idempotent)."""
    from harness.provision.bootstrap import prepare

    return prepare()


@pytest.fixture(scope="session")
def spark():
    """One Spark session for the whole test session: starting a JVM costs ~10 s.

    A 2 GB driver, not 1 GB: a check of even a 30-event history holds 600-900 MB of live heap just
    after it ends (query executions the listener bus has not yet drained; 270 MB 20 s later,
    measured on 2026-11-24). With 1 GB the collector thrashed, the listener fell further behind,
    and CI stalled in test_edge_cases until its 90-minute limit."""
    from analysis.checking.spark import get_session

    session = get_session("local[2]", driver_memory="2g", shuffle_partitions=2)
    # Tiny inputs: let AQE collapse partitions.
    session.conf.set("spark.sql.adaptive.coalescePartitions.initialPartitionNum", "4")
    yield session
    session.stop()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    figures = config.stash.get(FIGURES_KEY, [])
    if figures:
        terminalreporter.section("measured figures")
        for line in figures:
            terminalreporter.write_line(line)
