"""`cleanup` removes only what dead harness processes own: a live run is never touched.

The fast tests judge owners against a real /proc (this process, an exited child, a reused PID)
and a fake one (a command name with spaces and parentheses). The Docker test holds a real
cluster open in a child process, cleans up with no run id, and checks that the cluster
survives; then SIGKILLs the child and checks that the same cleanup removes it all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.provision.cleanup import RunLeftovers, decide, leftovers
from harness.provision.owner import ALIVE, DEAD, UNKNOWN, Owner, judge, process_state, this_process


def test_this_process_is_alive_and_an_exited_child_is_dead():
    me = this_process()
    assert judge(me).state == ALIVE
    child = subprocess.Popen(["true"])
    child.wait()
    gone = judge(Owner(me.host, child.pid, 1, me.space))
    assert gone.state == DEAD and f"pid {child.pid}" in gone.reason


def test_a_reused_pid_is_not_the_owner():
    me = this_process()
    reused = judge(Owner(me.host, me.pid, me.start + 1, me.space))  # same PID, another start time
    assert reused.state == DEAD and "started later" in reused.reason


def test_another_host_or_pid_space_or_no_owner_cannot_be_proven_dead():
    me = this_process()
    assert judge(Owner("elsewhere", me.pid, me.start, me.space)).state == UNKNOWN
    assert "another boot or PID namespace" in judge(Owner(me.host, me.pid, me.start, "other-boot/pid:[1]")).reason
    assert judge(None).state == UNKNOWN


def test_stat_fields_are_counted_after_the_last_parenthesis(tmp_path: Path):
    fields = ["S"] + ["0"] * 18 + ["4242"] + ["0"] * 30  # fields 3 .. 52; field 22 is 4242
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "stat").write_text("77 (odd) name (x) " + " ".join(fields) + "\n")
    assert process_state(77, tmp_path) == ("S", 4242)
    assert process_state(78, tmp_path) is None
    me = this_process()
    zombie = Owner(me.host, 77, 4242, me.space)
    (tmp_path / "77" / "stat").write_text("77 (z) Z " + " ".join(fields[1:]) + "\n")
    assert judge(zombie, proc=tmp_path).state == DEAD


@pytest.mark.parametrize("state_owner, named, force, removed", [
    ("dead", False, False, True), ("alive", False, False, False), ("alive", True, False, False),
    ("alive", False, True, True), ("unknown", False, False, False), ("unknown", True, False, True),
])
def test_what_goes_by_owner_and_flags(state_owner, named, force, removed):
    me = this_process()
    owner = {"alive": me, "dead": Owner(me.host, me.pid, me.start + 1, me.space), "unknown": None}[state_owner]
    run = RunLeftovers("r", owners=[owner])
    decide(run, named=named, force=force)
    assert run.state == state_owner and run.remove is removed, run.reason


def test_a_run_with_one_live_owner_among_its_resources_is_kept():
    me = this_process()
    run = RunLeftovers("r", owners=[Owner(me.host, me.pid, me.start + 1, me.space), me, None])
    decide(run, named=False, force=False)
    assert run.state == ALIVE and not run.remove
    run = RunLeftovers("r", owners=[Owner(me.host, me.pid, me.start + 1, me.space), None])  # a folder without owner.json
    decide(run, named=False, force=False)
    assert run.state == DEAD and run.remove


HOLDER = """
from harness.cluster import KafkaCluster
import sys, time
c = KafkaCluster(brokers=1).start()
print(c.run_id, c.work_dir, flush=True)
time.sleep(600)
"""


def harness_cleanup(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "cleanup", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.docker
@pytest.mark.slow
def test_cleanup_keeps_a_live_run_and_removes_it_once_its_owner_is_killed():
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        run_id, work_dir = holder.stdout.readline().split()
        found = leftovers(run_id)
        assert found.containers and found.networks and found.folders == [work_dir]

        dry = harness_cleanup("--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert f"keep {run_id}: owner pid {holder.pid} on" in dry.stdout and "still runs" in dry.stdout
        swept = harness_cleanup()  # no run id: every run's, and this one is alive
        assert swept.returncode == 0, swept.stderr
        assert leftovers(run_id).containers == found.containers and Path(work_dir).is_dir()
        named = harness_cleanup("--run-id", run_id)
        assert named.returncode == 2 and "still runs" in named.stderr and "--all" in named.stderr
        assert leftovers(run_id).containers == found.containers
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)

    swept = harness_cleanup()
    assert swept.returncode == 0, swept.stderr
    assert f"remove {run_id}: owner pid {holder.pid} on" in swept.stdout and "has exited" in swept.stdout
    after = leftovers(run_id)
    assert after.containers == [] and after.networks == [] and after.folders == []
    assert not Path(work_dir).exists()
