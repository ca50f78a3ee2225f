"""The reference checker against the definitions, on many random histories (fast, no Spark)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.reference import checker as reference
from analysis.rules.registry import ANOMALIES
from tests.analysis.histories import ZERO, inject, valid_history

params = st.fixed_dictionaries({
    "seed": st.integers(0, 2**32 - 1),
    "keys": st.integers(1, 4),
    "producers": st.integers(1, 3),
    "consumers": st.integers(1, 3),
    "steps": st.integers(0, 120),
})


@settings(max_examples=200, deadline=None)
@given(params)
def test_valid_histories_have_no_findings(p):
    assert reference.counts(valid_history(**p).events) == ZERO


# The eos kinds need a pipeline history: their injections are in test_eos_anomalies.py.
@pytest.mark.parametrize("anomaly", [a for a in ANOMALIES if not a.startswith("eos-")])
@settings(max_examples=40, deadline=None)
@given(p=params)
def test_each_injection_is_found_exactly(anomaly, p):
    got = reference.counts(inject(valid_history(**p), anomaly).events)
    assert got == {**ZERO, anomaly: 1}
