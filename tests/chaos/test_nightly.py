"""The nightly matrix: one real run per item (`pytest -m chaos`; options in harness/pytest_chaos.py).

Plain `pytest` deselects these (pyproject's addopts has `-m 'not chaos'`)."""

from __future__ import annotations

import pytest

from harness.pytest_chaos import assert_outcome, assert_regression

pytestmark = pytest.mark.chaos


def test_nightly(chaos_case, chaos_run):
    assert_outcome(chaos_case, chaos_run(chaos_case))


def test_regression(regression_version, chaos_settings, chaos_run):
    """--chaos-regression: the suite still finds the bugs it was built for (old versions, every seed)."""
    assert_regression(regression_version, [(c, chaos_run(c)) for c in chaos_settings.regression_cases(regression_version)])
