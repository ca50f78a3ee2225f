"""The power-loss scenarios (harness/scenarios/power_scenarios.py): the parsers of Kafka's tool
output offline, and KIP-101 scenario 2 once against real Kafka on lossy disks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.scenarios import get_scenario, scenarios
from harness.scenarios.power_scenarios import parse_features, parse_partition_line

ROOT = Path(__file__).resolve().parents[1]

# kafka-topics --describe and kafka-features describe as 4.3.1 prints them (tabs kept).
DESCRIBE = ("Topic: scenario\tTopicId: 2q\tPartitionCount: 1\tReplicationFactor: 3\tConfigs: min.insync.replicas=2\n"
            "\tTopic: scenario\tPartition: 0\tLeader: none\tReplicas: 1,2,3\tIsr: \tElr: 3,1\tLastKnownElr: \n")
FEATURES = ("Feature: eligible.leader.replicas.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\tEpoch: 7\n"
            "Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\tEpoch: 7\n"
            "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.3-IV0\tFinalizedVersionLevel: 4.3-IV0\tEpoch: 7\n")


def test_partition_line_keeps_empty_isr_and_the_elr():
    fields = parse_partition_line(DESCRIBE)
    assert fields["Leader"] == "none" and fields["Isr"] == "" and fields["Elr"] == "3,1" and fields["LastKnownElr"] == ""
    assert parse_partition_line("Error while executing topic command") == {}


def test_features_read_numeric_levels_only():
    assert parse_features(FEATURES) == {"eligible.leader.replicas.version": 1, "kraft.version": 0}
    assert parse_features("") == {}


def test_power_scenarios_are_registered_with_lossy_disks_and_a_separate_controller():
    found = scenarios()
    for name in ("kip101-power-loss-divergence", "kip966-last-replica-standing", "kip966-last-replica-standing-elr-off"):
        s = found[name]
        assert s.runnable and s.lossy_data and s.controller_apart, name
    assert found["kip966-last-replica-standing"].min_insync_replicas == 2
    assert found["kip966-last-replica-standing"].replication_factor == 3


def test_kip966_scenarios_are_refused_on_zookeeper_era_versions_before_anything_starts(tmp_path):
    """ELR is KRaft-only. The scenario used to start a 0.10/1.1 cluster and fail inside; the matrix
    now writes a 'not applicable' row, and a direct run is exit 2 with nothing created."""
    from harness.scenarios.matrix import run_matrix
    from harness.scenarios.runner import run_scenario

    kip966 = get_scenario("kip966-last-replica-standing")
    assert kip966.serves(kraft=False) and kip966.serves(kraft=True) is None
    assert get_scenario("kip101-power-loss-divergence").serves(kraft=False) is None
    store = tmp_path / "store"
    with pytest.raises(HarnessError, match="needs KRaft") as err:
        run_scenario(kip966, "1.1.1", store)
    assert err.value.exit_code == 2 and not store.exists()
    table = run_matrix([kip966], ["0.10.2.2", "1.1.1"], store, use_checker=False, echo=lambda _: None)
    assert table.count("not applicable") == 2 and not store.exists()


@pytest.mark.docker
@pytest.mark.slow
def test_power_loss_divergence_converges_with_leader_epochs():
    """KIP-101 scenario 2 on the default Kafka (~2-3 min): after the power cut A's disk holds
    m1, m2 and B's m1 alone; B leads and takes m3 at offset 1; A, back, truncates m2 by the
    leader epoch (not to its high watermark, 2) and fetches m3: identical replicas, m2 lost."""
    # A short store: lossyfs's control socket, <run dir>/power/<node>/control.sock, must fit in a
    # unix socket address (108 bytes); pytest's tmp_path is too deep for the controller's node 101.
    tmp_path = Path(tempfile.mkdtemp(prefix="kh-p-", dir="/tmp"))
    code = "import sys; from harness.scenario_commands import scenario; sys.exit(scenario.main(sys.argv[1:], standalone_mode=True))"
    out = subprocess.run([sys.executable, "-c", code, "run", "kip101-power-loss-divergence", "--store", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, env={**os.environ}, timeout=900)
    _check_power_loss_divergence(out, tmp_path)
    shutil.rmtree(tmp_path, ignore_errors=True)  # kept when the test fails: the run directory is the evidence


def _check_power_loss_divergence(out: subprocess.CompletedProcess, tmp_path: Path) -> None:
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = next(p for p in tmp_path.iterdir() if (p / "scenario.json").exists())
    s = json.loads((run_dir / "scenario.json").read_text())
    assert s["status"] == "completed", s["incomplete_reason"]
    acked = {w["label"]: w["offset"] for w in s["writes"] if w["acked"]}
    assert acked == {"m1": 0, "m2": 1, "m3": 1}, s["writes"]
    disks = s["observations"]["on_disk_after_cut"]
    assert [v for _, v in disks["A"]["records"]] == [1, 2] and [v for _, v in disks["B"]["records"]] == [1], disks
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    off = next(e["value"] for e in events if e["f"] == "power-off")
    assert off["dropped"][str(s["roles"]["B"])]["dropped_bytes"] > 0 and off["model"].startswith("worst case")
    assert s["replica_divergence"]["diverged"] is False and s["bug_shown"] is False, s["replica_divergence"]
    assert s["headline"]["lost"] == 1  # m2
    a_log = (run_dir / "brokers" / str(s["roles"]["A"]) / "server.log").read_text()
    assert "due to leader epoch and offset EpochEndOffset(errorCode=0, partition=0, leaderEpoch=0, endOffset=1)" in a_log
    assert f"lossyfs:{run_dir.name}:" not in Path("/proc/self/mountinfo").read_text(), "a lossy mount of the run remains"
