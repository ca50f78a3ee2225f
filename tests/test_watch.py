"""A vanished cluster fails its run within seconds, with FAILED naming the cause and exit code 2.

Fast tests drive `ClusterWatch.check` with a stand-in Docker client and clock. The Docker tests
remove a real run's containers from outside mid-run and time the failure, and pause a real
broker's JVM to see the ApiVersions probe notice that no broker answers."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import docker
import pytest

from harness.cluster.watch import ClusterWatch, api_versions_request, broker_answers
from harness.provision.cleanup import leftovers

ROOT = Path(__file__).resolve().parents[1]


class FakeApi:
    def __init__(self) -> None:
        self.listed: list[dict] | Exception = []

    def containers(self, **_: object) -> list[dict]:
        if isinstance(self.listed, Exception):
            raise self.listed
        return self.listed


def fake_watch(unreachable_after_s: float = 60.0) -> tuple[ClusterWatch, FakeApi]:
    nodes = [SimpleNamespace(hostname=f"kafka-{i}", node_id=i, host_port=1,  # port 1: nothing listens there
                             container=SimpleNamespace(get_wrapped_container=lambda i=i: SimpleNamespace(name=f"kh-r-kafka-{i}")))
             for i in (1, 2)]
    cluster = SimpleNamespace(run_id="r", nodes=nodes, brokers=nodes)
    api = FakeApi()
    return ClusterWatch(cluster, unreachable_after_s=unreachable_after_s, client=SimpleNamespace(api=api)), api


def listing(**states: str) -> list[dict]:
    return [{"Names": [f"/{name}"], "State": state} for name, state in states.items()]


def test_removed_or_stopped_containers_fail_at_once_and_paused_ones_do_not():
    watch, api = fake_watch()
    now = watch._last_answer
    api.listed = listing(**{"kh-r-kafka-1": "running"})
    assert "removed from outside the harness: kh-r-kafka-2" in watch.containers_gone(now)
    api.listed = listing(**{"kh-r-kafka-1": "running", "kh-r-kafka-2": "exited"})
    assert "stopped: kh-r-kafka-2 (exited)" in watch.containers_gone(now)
    api.listed = listing(**{"kh-r-kafka-1": "paused", "kh-r-kafka-2": "running"})
    assert watch.containers_gone(now) is None


def test_a_silent_docker_engine_fails_only_after_its_bound():
    watch, api = fake_watch()
    api.listed = RuntimeError("engine busy")
    start = watch._last_docker
    assert watch.containers_gone(start + 5) is None
    assert "has not answered for 25 s" in watch.containers_gone(start + 25)


def test_no_broker_answering_is_unresponsive_after_the_bound_not_a_failure():
    watch, api = fake_watch(unreachable_after_s=30)
    api.listed = listing(**{"kh-r-kafka-1": "running", "kh-r-kafka-2": "running"})
    start = watch._last_answer
    assert watch.check(start + 10) is None and watch.unresponsive is None
    assert watch.check(start + 31) is None  # Kafka's behaviour (hung brokers), not the harness's failure
    assert watch.unresponsive and "no broker has answered for 31 s (bound 30 s)" in watch.unresponsive
    api.listed = listing(**{"kh-r-kafka-1": "running"})
    assert "removed" in watch.check(start + 32)  # containers that vanish still fail the run


def test_a_target_watch_shares_the_bound_and_names_the_listeners_that_went_silent():
    from harness.target.watch import TargetWatch

    target = SimpleNamespace(run_id="r", addresses={1: "127.0.0.1:1"}, target=SimpleNamespace(security=SimpleNamespace(tls=True)),
                             bootstrap_servers=lambda: "127.0.0.1:1")
    watch = TargetWatch(target, unreachable_after_s=30)
    start = watch._last_answer
    assert watch.check(start + 10) is None and watch.unresponsive is None  # nothing listens on port 1
    watch.check(start + 31)
    assert watch.unresponsive == "no broker has answered for 31 s (bound 30 s): the target's listeners 127.0.0.1:1"
    assert watch.failure is None  # a target has no containers to vanish


def test_the_probe_is_an_api_versions_v0_request():
    request = api_versions_request(7, b"me")
    size, key, version, correlation, length = struct.unpack(">ihhih", request[:14])
    assert (size, key, version, correlation, length, request[14:]) == (len(request) - 4, 18, 0, 7, 2, b"me")
    assert broker_answers(1, timeout_s=0.5) is False  # nothing listens on port 1


def test_a_cluster_that_vanishes_during_a_long_step_fails_the_run_at_once():
    from harness.errors import ClusterError
    from harness.run.steps import watched

    watch, stopped = SimpleNamespace(failure=None), []
    workload = SimpleNamespace(stop=lambda timeout_s=60.0: stopped.append(timeout_s))
    release = threading.Event()
    threading.Timer(0.3, lambda: setattr(watch, "failure", "the cluster's containers were removed")).start()
    began = time.monotonic()
    with pytest.raises(ClusterError, match="vanished during the run: the cluster's containers were removed"):
        watched(watch, workload, lambda: release.wait(20))  # a heal waiting for full ISRs
    release.set()
    assert time.monotonic() - began < 3 and stopped == [2.0]


def test_a_step_returns_its_value_or_raises_its_error_when_the_cluster_stays():
    from harness.run.steps import watched

    watch, workload = SimpleNamespace(failure=None), SimpleNamespace(stop=lambda timeout_s=60.0: None)
    assert watched(watch, workload, lambda: 42) == 42
    with pytest.raises(ZeroDivisionError):
        watched(watch, workload, lambda: 1 / 0)


@pytest.mark.docker
@pytest.mark.slow
def test_a_paused_broker_jvm_is_unreachable_and_the_watch_says_so(prepared):
    from harness.cluster import KafkaCluster

    with KafkaCluster(brokers=1) as cluster:
        assert broker_answers(cluster.brokers[0].host_port)  # a real Kafka answers the probe
        with ClusterWatch(cluster, unreachable_after_s=3, period_s=0.5) as watch:
            cluster.brokers[0].send_signal(signal.SIGSTOP)
            deadline = time.monotonic() + 20
            while watch.unresponsive is None and time.monotonic() < deadline:
                time.sleep(0.2)
            cluster.brokers[0].send_signal(signal.SIGCONT)
        assert watch.failure is None and watch.unresponsive and "no broker has answered" in watch.unresponsive


@pytest.mark.docker
@pytest.mark.slow
def test_a_run_whose_containers_are_removed_fails_within_seconds(prepared, tmp_path: Path, report_figure):
    store = tmp_path / "store"
    run = subprocess.Popen([sys.executable, "-m", "harness", "run", "--brokers", "1", "--time-limit", "120", "--rate", "100",
                            "--nemesis", "none", "--store", str(store)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env={**os.environ, "COLUMNS": "200"})
    try:
        deadline, run_dir = time.monotonic() + 240, None
        while time.monotonic() < deadline and run.poll() is None:  # until the workload has acknowledged a send
            dirs = list(store.glob("*/history.jsonl")) if store.exists() else []
            if dirs and '"type":"ok"' in dirs[0].read_text().replace(" ", ""):
                run_dir = dirs[0].parent
                break
            time.sleep(0.5)
        assert run_dir is not None, f"the run never reached its workload: {run.poll()}"
        client = docker.from_env()
        label = {"label": f"io.kafka-harness.run.steps-id={run_dir.name}"}
        for container in client.containers.list(all=True, filters=label):
            container.remove(force=True)
        removed, marked_after = time.monotonic(), None
        while marked_after is None and time.monotonic() < removed + 120 and run.poll() is None:
            marked_after = time.monotonic() - removed if (run_dir / "FAILED").exists() else None
            time.sleep(0.1)
        _, stderr = run.communicate(timeout=120)
        failed_after = time.monotonic() - removed
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)
    assert run.returncode == 2, stderr[-2000:]
    failed = (run_dir / "FAILED").read_text()
    assert "removed from outside the harness" in failed and f"kh-{run_dir.name}-kafka-1" in failed
    assert "removed from outside the harness" in stderr
    assert failed_after < 30, f"the run took {failed_after:.1f} s to fail after its containers were removed"
    assert leftovers(run_dir.name).containers == [] and leftovers(run_dir.name).networks == []  # its teardown still ran
    marked = f"FAILED written {marked_after:.1f} s, " if marked_after is not None else ""
    report_figure(f"containers removed mid-run: {marked}exit 2 {failed_after:.1f} s after the removal")
