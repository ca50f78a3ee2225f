"""replica-divergence joins the verdict: forbidden unless unclean leader election is on."""

from __future__ import annotations

import json

import pytest

from analysis.checking.checker import check_history
from analysis.explain.replica_evidence import read_replica_divergence
from harness.history.record import read_record
from tests.analysis.histories import valid_history, write_run

pytestmark = pytest.mark.slow


def replicas(diverged: bool) -> dict:
    divergence = {"diverged": diverged, "first_offset": 11 if diverged else None, "diverged_offsets": 5 if diverged else 0,
                  "log_end_offsets": {"1": 23, "3": 16}, "differences": [{"offset": 11, "values": {"1": 12, "3": 22}}] if diverged else []}
    return {"topic": "scenario", "tool": "kafka.tools.DumpLogSegments", "partitions": {"0": {"replicas": {}, "divergence": divergence}}}


@pytest.mark.parametrize("unclean,diverged,verdict", [(False, True, "invalid"), (True, True, "valid"), (False, False, "valid")])
def test_replica_divergence_verdict(spark, tmp_path, unclean, diverged, verdict):
    events = valid_history(seed=5).events
    profile = {"name": "p", "acks": "1", "unclean_leader_election": unclean, "min_insync_replicas": 1}
    run = write_run(tmp_path / "run", events, {"profile": profile, "workload": "queue", "drain": {"complete": True, "high_watermarks": {}}})
    (run / "replicas.json").write_text(json.dumps(replicas(diverged)))
    results = check_history(spark, run, read_record(run))
    assert results["verdict"] == verdict, results["reasons"]
    assert results["replica_divergence"]["diverged"] is diverged
    assert ("replica-divergence" in results["forbidden"]) == (verdict == "invalid")
    if diverged and unclean:
        assert "replica-divergence" in results["allowed"]


def test_runs_without_replica_evidence_have_none(tmp_path):
    assert read_replica_divergence(tmp_path) is None
