"""Synthetic run directories shared by the report tests (built once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reports.synth import injectable, make_results, make_run


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with one run per anomaly kind (checked), a clean run, and one not checked yet."""
    root = tmp_path_factory.mktemp("report-store")
    for i, a in enumerate(injectable()):
        make_results(make_run(root, f"2026010{1 + i % 3}T07000{i}-{a}", a, seed=i, kafka_version="4.3.1" if i % 2 else "3.9.1"), a)
    make_results(make_run(root, "20260104T070000-clean", None, seed=9), None)
    make_run(root, "20260104T080000-unchecked", None, seed=10)
    return root


def run_of(store: Path, suffix: str) -> Path:
    # The whole name after the timestamp: "nonmonotonic-send" must not find "...-int-nonmonotonic-send".
    return next(p for p in store.iterdir() if p.name.split("-", 1)[-1] == suffix)
