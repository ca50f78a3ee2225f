"""analysis/checking/spark.py fit_partitions: a small history is checked with a partition per core
and without adaptive execution, a large one with the defaults, and a user's --shuffle-partitions
is left alone; either plan counts what the reference checker counts."""

from __future__ import annotations

import os

import pytest

from analysis.checking import spark as S
from analysis.checking.checker import check_history
from analysis.reference import checker as reference
from tests.analysis.histories import mutate, valid_history, write_run

pytestmark = pytest.mark.slow
KEYS = ("spark.sql.shuffle.partitions", "spark.sql.adaptive.enabled", "spark.sql.files.openCostInBytes")


@pytest.fixture
def conf(spark):
    """The suite's session settings, given back after the test (every other test shares the session)."""
    before = {k: spark.conf.get(k) for k in KEYS}
    yield spark
    for k, v in before.items():
        spark.conf.set(k, v)


def plan(spark) -> dict[str, str]:
    return {k: spark.conf.get(k) for k in KEYS}


@pytest.mark.parametrize("large", [False, True])
def test_each_plan_counts_what_the_reference_counts(conf, tmp_path, monkeypatch, large):
    events = mutate(valid_history(31, keys=2, steps=80), 31, 8).events
    run = write_run(tmp_path / "run", events)
    if large:  # every history over the line, so this small one takes the large histories' plan
        monkeypatch.setattr(S, "SMALL_HISTORY_BYTES", {".jsonl": 0, ".parquet": 0})
    S.fit_partitions(conf, run)
    want = ({"spark.sql.shuffle.partitions": str(S.default_partitions()), "spark.sql.adaptive.enabled": "true",
             "spark.sql.files.openCostInBytes": str(4 << 20)} if large else
            {"spark.sql.shuffle.partitions": str(max(2, os.cpu_count() or 2)), "spark.sql.adaptive.enabled": "false",
             "spark.sql.files.openCostInBytes": str(S.SMALL_OPEN_COST)})
    assert plan(conf) == want
    assert check_history(conf, run, None)["counts"] == reference.counts(events)


def test_a_users_partitions_are_left_alone(conf, tmp_path):
    run = write_run(tmp_path / "run", valid_history(3).events)
    conf.conf.set("spark.sql.shuffle.partitions", "7")
    before = plan(conf)
    S.fit_partitions(conf, run, given=7)
    assert plan(conf) == before
