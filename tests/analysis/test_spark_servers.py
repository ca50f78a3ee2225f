"""The check gives the same results on a real standalone Spark cluster and through Spark Connect
as embedded (issue 19, item 9): `--spark-master spark://...` and `SPARK_REMOTE=sc://...` work from
a fresh install (PySpark's connect extra brings grpcio), on servers started from PySpark's jars."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from analysis.checking.checker import check_run
from tests.analysis.histories import inject, mutate, valid_history, write_run
from tests.spark_servers import connect_server, standalone_cluster

pytestmark = [pytest.mark.slow]
DRAINED = {"drain": {"complete": True, "high_watermarks": {}}}


def runs(root):
    """A run where several anomalies overlap (one is enough: each check there costs 1-3 minutes
    on a busy 2-core machine)."""
    return {"broken": write_run(root / "broken", inject(mutate(valid_history(12), seed=3), "lost-write").events, DRAINED)}


def check_elsewhere(run_dir, out, *args, env=None) -> dict:
    """`python -m analysis check --json` in a fresh process (one SparkContext per JVM: the test
    session already holds the embedded one)."""
    # A handful of shuffle partitions: Spark's default of 200 outside local mode turns each of the
    # check's shuffles over a few hundred events into 200 tasks.
    proc = subprocess.run([sys.executable, "-m", "analysis", "check", "--json", "--shuffle-partitions", "4",
                           "--output", str(out), *args, str(run_dir)],
                          capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})
    assert proc.returncode in (0, 1, 3), proc.stderr[-3000:]
    return json.loads(proc.stdout)


def same(a: dict, b: dict) -> tuple:
    return (a["verdict"], a["counts"], a["headline"], a["forbidden"]), (b["verdict"], b["counts"], b["headline"], b["forbidden"])


@pytest.mark.chaos  # the nightly's: two extra Spark JVMs for 86 s under load; the default suite keeps the embedded checker's tests
def test_standalone_cluster_and_spark_connect_agree_with_embedded(spark, tmp_path, report_figure):
    began = time.perf_counter()
    local = {name: check_run(run, spark, output=tmp_path / "local" / name) for name, run in runs(tmp_path).items()}
    assert local["broken"]["verdict"] == "invalid"
    with standalone_cluster(tmp_path / "standalone") as master:
        for name, run in runs(tmp_path).items():
            got = check_elsewhere(run, tmp_path / "standalone-out" / name, "--spark-master", master)
            left, right = same(local[name], got)
            assert left == right, f"{name} on {master}"
    with connect_server(tmp_path / "connect") as remote:
        for name, run in runs(tmp_path).items():
            got = check_elsewhere(run, tmp_path / "connect-out" / name, env={"SPARK_REMOTE": remote})
            left, right = same(local[name], got)
            assert left == right, f"{name} through {remote}"
    report_figure(f"{time.perf_counter() - began:.0f} s: standalone and Connect: same verdicts and counts as embedded ({sum(local['broken']['counts'].values())} anomalies)")


def test_the_local_checkers_heap_is_a_quarter_of_the_machine_from_2_to_8_gb(monkeypatch):
    from analysis.checking import spark_conf

    monkeypatch.delenv(spark_conf.MEMORY_ENV, raising=False)
    pages = {"SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(spark_conf.os, "sysconf", lambda name: pages.get(name, 24 * 2**30 // 4096))
    assert spark_conf.driver_memory() == "6g"  # this machine's 24 GB
    monkeypatch.setattr(spark_conf.os, "sysconf", lambda name: pages.get(name, 4 * 2**30 // 4096))
    assert spark_conf.driver_memory() == "2g"  # never below what 50M events were checked with
    monkeypatch.setattr(spark_conf.os, "sysconf", lambda name: pages.get(name, 256 * 2**30 // 4096))
    assert spark_conf.driver_memory() == "8g"
    monkeypatch.setenv(spark_conf.MEMORY_ENV, "3g")
    assert spark_conf.driver_memory() == "3g"
