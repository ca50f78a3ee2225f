"""Issue 36: killing the harness in the middle of an operation, then `cleanup`, leaves nothing behind.

The operation here is `membership`'s add-broker, the one that creates a container while the run goes
on (harness/cluster/grow.py): the harness is SIGKILLed once that broker's container exists, so no
teardown runs, and `cleanup --run-id` must find and remove every container (the added one too), the
network and the run's folders by their labels. Throttles and dynamic configs live inside the brokers
and go with them. One real cluster: 16 s on 2026-11-26 (the broker is added within seconds of the
workload's start), so it runs in the default suite."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import docker
import pytest

from harness.provision.cleanup import leftovers
from harness.provision.settings import RUN_LABEL


def _added_broker(client: docker.DockerClient, store) -> tuple[str, str] | None:  # type: ignore[no-untyped-def]
    """(run id, container name) of this test's run's added broker (kafka-4 on), once its container runs.
    The run id is its run directory's name in the test's own store: other runs' containers never count."""
    runs = [d.name for d in store.iterdir()] if store.exists() else []
    for run_id in runs:
        for c in client.containers.list(filters={"label": f"{RUN_LABEL}={run_id}"}):
            suffix = c.name.rsplit("-", 1)[-1]
            if "-kafka-" in c.name and suffix.isdigit() and int(suffix) >= 4:
                return run_id, c.name
    return None


@pytest.mark.docker
@pytest.mark.slow
def test_a_harness_killed_during_an_operation_leaves_nothing_after_cleanup(prepared, tmp_path):
    client = docker.from_env()
    cmd = [sys.executable, "-m", "harness", "run", "--nemesis", "membership", "--membership-ops", "add-broker",
           "--nemesis-interval", "4", "--time-limit", "120", "--store", str(tmp_path / "store"), "--seed", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found = None
    try:
        deadline = time.monotonic() + 240
        while found is None and time.monotonic() < deadline and proc.poll() is None:
            found = _added_broker(client, tmp_path / "store")
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert found is not None, f"no broker was added within 240 s (exit {proc.returncode}): {proc.stderr.read()[-2000:]}"
    run_id, name = found
    left = leftovers(run_id)
    assert name in left.containers and len(left.containers) >= 4  # a SIGKILLed run cannot tear down
    out = subprocess.run([sys.executable, "-m", "harness", "cleanup", "--run-id", run_id],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    after = leftovers(run_id)
    assert (after.containers, after.networks, after.mounts, after.folders) == ([], [], [], []), after
    assert name in out.stdout + out.stderr  # it says what it removed, the added broker included
