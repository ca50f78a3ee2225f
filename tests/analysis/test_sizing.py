"""analysis/checking/sizing.py: a small history is checked on the small plan (cores' partitions, no
adaptive execution), a large one on the session's settings, and either way the session's own
settings come back and the counts are the reference's."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.checking import checker, sizing
from analysis.checking.checker import check_history
from analysis.reference import checker as reference
from tests.analysis.histories import mutate, valid_history, write_run

KEYS = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled")


def test_the_small_plan_is_for_small_histories_only(monkeypatch):
    monkeypatch.delenv(sizing.ENV, raising=False)
    assert sizing.small_plan(None) is None  # size unknown: the session's settings
    assert sizing.small_plan(sizing.SMALL_EVENTS + 1) is None
    plan = sizing.small_plan(60_000)
    assert plan is not None and plan["spark.sql.adaptive.enabled"] == "false" and int(plan[KEYS[0]]) >= 2
    monkeypatch.setenv(sizing.ENV, "0")
    assert sizing.small_plan(60_000) is None


def test_the_size_is_read_from_the_file(tmp_path):
    pq.write_table(pa.table({"index": list(range(1234))}), tmp_path / "history.parquet")
    assert sizing.estimated_events(tmp_path / "history.parquet", "parquet") == 1234  # the footer's row count
    (tmp_path / "history.jsonl").write_bytes(b"x" * 3000)
    assert sizing.estimated_events(tmp_path / "history.jsonl", "jsonl") == 3000 // sizing.JSONL_BYTES_PER_EVENT
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    assert sizing.estimated_events(tmp_path / "bad.parquet", "parquet") is None
    assert sizing.estimated_events(tmp_path / "missing.jsonl", "jsonl") is None


@pytest.mark.slow
def test_a_check_runs_on_the_small_plan_and_gives_the_session_its_settings_back(spark, tmp_path, monkeypatch):
    monkeypatch.delenv(sizing.ENV, raising=False)
    before = {k: spark.conf.get(k) for k in KEYS}
    seen = {}
    steps = checker._steps

    def spy(*args, **kwargs):
        seen.update({k: spark.conf.get(k) for k in KEYS})
        return steps(*args, **kwargs)

    monkeypatch.setattr(checker, "_steps", spy)
    check_history(spark, write_run(tmp_path / "run", valid_history(5).events), None)
    assert seen == sizing.small_plan(1)
    assert {k: spark.conf.get(k) for k in KEYS} == before


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 23])
def test_the_sessions_own_plan_counts_the_same(spark, tmp_path_factory, monkeypatch, seed):
    """Every other test's history is small, so checked on the small plan: this one holds the large
    histories' plan (8 partitions, adaptive execution) to the reference on the same corrupted history."""
    events = mutate(valid_history(seed, keys=2, steps=80), seed, 8).events
    want = reference.counts(events)
    assert check_history(spark, write_run(tmp_path_factory.mktemp("run"), events), None)["counts"] == want
    monkeypatch.setenv(sizing.ENV, "0")
    partitions = spark.conf.get(KEYS[0])
    spark.conf.set(KEYS[0], "8")  # the embedded session's on 2 cores (the suite's has 2)
    try:
        assert spark.conf.get(KEYS[1]) == "true"
        assert check_history(spark, write_run(tmp_path_factory.mktemp("run"), events), None)["counts"] == want
    finally:
        spark.conf.set(KEYS[0], partitions)
