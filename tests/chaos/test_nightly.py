"""The nightly matrix: one real run per item (`pytest -m chaos`; options in harness/pytest_chaos.py).

Plain `pytest` deselects these (pyproject's addopts has `-m 'not chaos'`)."""

from __future__ import annotations

import pytest

from harness.pytest_chaos import assert_outcome

pytestmark = pytest.mark.chaos


def test_nightly(chaos_case, chaos_run):
    assert_outcome(chaos_case, chaos_run(chaos_case))
