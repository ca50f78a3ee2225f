"""The disk nemesis's bookkeeping without Docker: what it refuses, what it records at the fault
and at the heal (Kafka's log lines since the fault), and that the history draws its bands."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from analysis.explain.timeline import faults_from
from harness.errors import HarnessError
from nemesis.disk import DiskNemesis, log_lines, what_kafka_did, NOTEWORTHY
from nemesis.runner import build_nemeses
from tests.power.fakes import Events, LogFolder

OFFLINE_LINES = [
    "[2026-11-24T00:07:26,859] ERROR Error while appending records to power-2 in dir /var/lib/kafka/data (org.apache.kafka.storage.internals.log.LogDirFailureChannel)",
    "java.io.IOException: Input/output error",
    "\tat java.base/sun.nio.ch.FileDispatcherImpl.write0(Native Method)",
    "[2026-11-24T00:07:26,922] WARN Stopping serving logs in dir /var/lib/kafka/data (kafka.log.LogManager)",
    "[2026-11-24T00:07:26,923] ERROR Shutdown broker because all log dirs in /var/lib/kafka/data have failed (kafka.log.LogManager)",
]


@dataclass
class FakeNode(LogFolder):
    node_id: int
    node_dir: Path
    running: bool = True
    starts: int = 0

    def pid_on_file(self) -> int:
        return 100 + self.node_id

    def pid(self) -> int | None:
        return 100 + self.node_id if self.running else None

    def start_process(self) -> int:
        self.starts += 1
        self.running = True
        return 200 + self.node_id


@dataclass
class FakeDisk:
    presets: tuple[str, ...] = ("eio-write", "eio-read", "enospc")
    fault_set: str | None = None

    def fault_presets(self) -> list[str]:
        return list(self.presets)

    def fault(self, error: str) -> dict:
        self.fault_set = error
        return {"fault": {"name": error, "errno": "ENOSPC" if error == "enospc" else "EIO", "ops": ["write"]}}

    def clear_fault(self) -> dict | None:
        was, self.fault_set = self.fault_set, None
        return None if was is None else {"name": was, "errno": "EIO", "injected": {"write": 3}, "first_hit_s": 0.1, "active_s": 5.0}


@dataclass
class FakeCluster:
    root: Path
    disks: dict = field(default_factory=dict)
    is_kraft: bool = True  # as the default cluster: the supervisor watches only ZooKeeper-era restarts

    def __post_init__(self) -> None:
        self.brokers = []
        for i in (1, 2, 3):
            (self.root / str(i)).mkdir()
            self.brokers.append(FakeNode(i, self.root / str(i)))
        self.disks = self.disks or {i: FakeDisk() for i in (1, 2, 3)}

    def node(self, node_id: int) -> FakeNode:
        return self.brokers[node_id - 1]

    def active_controller(self) -> FakeNode:
        return self.brokers[0]


def test_disk_needs_every_broker_on_a_lossy_mount(tmp_path: Path) -> None:
    cluster = FakeCluster(tmp_path)
    del cluster.disks[3]
    with pytest.raises(HarnessError) as caught:
        DiskNemesis().setup(cluster)  # type: ignore[arg-type]
    assert "[3]" in caught.value.message and "lossy_data=True" in caught.value.hint


def test_a_helper_built_before_disk_faults_is_refused_with_the_fix(tmp_path: Path) -> None:
    cluster = FakeCluster(tmp_path, disks={i: FakeDisk(presets=()) for i in (1, 2, 3)})
    with pytest.raises(HarnessError) as caught:
        DiskNemesis().setup(cluster)  # type: ignore[arg-type]
    assert "built before disk faults" in caught.value.message and "bootstrap" in caught.value.hint


def test_unknown_errors_are_refused() -> None:
    with pytest.raises(HarnessError):
        DiskNemesis(errors=("eio-everything",))
    with pytest.raises(HarnessError):
        DiskNemesis(errors=())


def test_a_fault_then_its_heal_records_what_kafka_logged_and_restarts_a_halted_broker(tmp_path: Path) -> None:
    cluster, events = FakeCluster(tmp_path), Events()
    disk = DiskNemesis(errors=("eio-write",)).setup(cluster, events)  # type: ignore[arg-type]
    victim = cluster.node(2)
    (victim.node_dir / "server.log").write_text("[t] INFO before the fault: not evidence\n")
    struck = disk.invoke("start", {"target": "one", "targets": [2]}, random.Random(0))
    assert struck["targets"] == [2] and struck["error"] == "eio-write" and struck["fault"]["2"]["errno"] == "EIO"
    assert cluster.disks[2].fault_set == "eio-write" and cluster.disks[1].fault_set is None
    with open(victim.node_dir / "server.log", "a") as log:
        log.write("\n".join(OFFLINE_LINES) + "\n")
    victim.running = False  # Kafka halted

    healed = disk.invoke("stop", {}, random.Random(0))
    seen = healed["brokers"]["2"]
    assert cluster.disks[2].fault_set is None and victim.starts == 1 and seen["restarted_pid"] == 202
    assert seen["jvm"] == "exited" and seen["io_error"] and seen["log_dir_offline"] and seen["halted"]
    assert seen["lines"] == [ln for ln in OFFLINE_LINES if not ln.startswith("\tat")], "only lines since the fault, no stack frames"
    assert seen["injected"] == {"write": 3}
    assert [f for f, _ in events.events] == ["disk-eio-write", "disk-healed"]
    disk.watchers.clear()  # the recovery watcher polls a log no JVM writes here


def test_a_broker_that_kept_running_is_not_restarted(tmp_path: Path) -> None:
    cluster, events = FakeCluster(tmp_path), Events()
    disk = DiskNemesis(errors=("eio-read",)).setup(cluster, events)  # type: ignore[arg-type]
    disk.invoke("start", {"target": "one", "targets": [1]}, random.Random(0))
    seen = disk.invoke("stop", {}, random.Random(0))["brokers"]["1"]
    assert seen["jvm"] == "running" and seen["restarted_pid"] is None and cluster.node(1).starts == 0
    assert not disk.watchers and seen["lines"] == []


def test_the_replayed_error_is_the_recorded_one(tmp_path: Path) -> None:
    cluster = FakeCluster(tmp_path)
    disk = DiskNemesis().setup(cluster, Events())  # type: ignore[arg-type]
    value = disk.invoke("start", {"target": "one", "targets": [3], "error": "enospc"}, random.Random(0))
    assert disk.replay_params(value) == {"target": "one", "targets": [3], "error": "enospc"}
    assert cluster.disks[3].fault_set == "enospc"


def test_the_timeline_draws_a_disk_band_until_its_heal() -> None:
    nemesis = [{"t": 1.0, "f": "disk-full", "value": {"targets": [2], "roles": {}}},
               {"t": 6.0, "f": "disk-healed", "value": {"targets": [2]}},
               {"t": 20.0, "f": "disk-recovered", "value": {"targets": [2], "started": True}}]
    faults, markers = faults_from(nemesis, end_s=30.0)
    assert [(f.f, f.start_s, f.end_s, f.ended_by) for f in faults] == [("disk-full", 1.0, 6.0, "disk-healed")]
    assert faults[0].label.startswith("disk full (ENOSPC) → broker 2")
    assert [m["f"] for m in markers] == ["disk-recovered"]


def test_log_lines_keep_the_first_and_last_of_a_long_story(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_text("".join(f"ERROR line {i}\n" for i in range(100)))
    node = FakeNode(1, path.parent)
    lines, end = log_lines(node, 0, NOTEWORTHY)
    assert len(lines) == 31 and lines[0] == "ERROR line 0" and lines[-1] == "ERROR line 99" and "more lines" in lines[25]
    assert end == path.stat().st_size and log_lines(node, end, NOTEWORTHY) == ([], end)
    assert what_kafka_did(["[x] ERROR Encountered fatal fault: Unexpected error in raft IO thread"])["halted"]


def test_disk_is_a_package() -> None:
    assert build_nemeses(["disk"])["disk"].targets == ("one", "leader", "controller")


def test_a_control_socket_path_too_long_for_unix_sockets_is_refused_naming_the_fix(tmp_path) -> None:
    from harness.cluster.lossy_mount import UNIX_PATH_MAX, LossyMount
    from harness.errors import HarnessError

    deep = tmp_path / ("d" * (UNIX_PATH_MAX - len(str(tmp_path))))
    with pytest.raises(HarnessError) as err:
        LossyMount(deep, "run:kafka-1")
    assert "control socket" in err.value.message and "shorter --store" in err.value.hint
    LossyMount(tmp_path / "p", "run:kafka-1")  # a short path is fine (nothing is mounted until mount())
