"""Disk faults: one broker's data directory fails for a while, and what Kafka does about it.

The data directories sit on the lossy mounts that power loss uses (native/lossyfs; a run asks
for them when `disk` is among its nemeses). A start sets one error on the target's mount:

- `eio-write`: EIO on every write, fsync, create, rename and delete (a disk whose writes fail);
- `eio-read`: EIO on every read (the mount's page cache is dropped first, or reads of recent
  data would be served from memory and never see the fault);
- `enospc`: ENOSPC on writes, reservations and new names (a full disk; statfs says 0 free).

Kafka (KIP-112, 1.0+) takes a log directory offline at its first I/O error there and halts when
no log directory is left, which is every broker here: one log directory each, holding the KRaft
metadata log too. Before 1.0 an I/O error while appending halts the broker outright. The nemesis
does not assume either: the heal (`disk-healed`) records, per broker, what the mount refused
(per operation, and when first), whether the JVM was still running, and Kafka's own log lines
since the fault (errors, offline log directories, halts); then it restarts the JVM if it died,
and a `disk-recovered` event follows with the restart's recovery lines once the broker says it
started (or after RECOVERY_WAIT_S without). docs/disk.md has what was observed.
Targets: one, leader, controller (one broker's disk, as the fault is meant).
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from typing import TYPE_CHECKING, Any

from harness.cluster.lossy_mount import DISK_ERRORS
from harness.errors import HarnessError
from harness.history.faults import DISK_EIO_READ, DISK_EIO_WRITE, DISK_FULL
from nemesis import supervisor
from nemesis.power import lossy_disks
from nemesis.process import ProcessNemesis
from nemesis.registry import Package, Setting

if TYPE_CHECKING:
    from harness.cluster import KafkaCluster
    from nemesis.base import NemesisRecorder

log = logging.getLogger("nemesis")

DISK_TARGETS = ("one", "leader", "controller")
KIND_OF = {"eio-write": DISK_EIO_WRITE, "eio-read": DISK_EIO_READ, "enospc": DISK_FULL}
HEALED = DISK_EIO_WRITE.stop
RECOVERED = "disk-recovered"  # a point in time: the restarted broker's recovery, with its log lines
RECOVERY_WAIT_S = 90.0  # a 4.x broker restarting under load logged "started" 10-20 s after the exec
MAX_LINES = 30

# What in a broker's log tells what it did about its disk (matched per line, case-insensitive).
EVIDENCE = {
    "io_error": r"Input/output error|No space left on device|IOException|KafkaStorageException",
    "log_dir_offline": r"offline|Stopping serving logs in dir|log ?dir(ectory)?s? .*fail|LogDirFailure",
    # A failed log dir halts through LogManager; a failed metadata log (KRaft: the same directory)
    # through the fault handler of the raft IO thread, seen for ENOSPC and EIO on reads (docs/disk.md).
    "halted": r"Shutdown broker because|Halting|halt\(|Exiting Kafka|shutting down|Encountered fatal fault|ProcessTerminatingFaultHandler",
}
STARTED = re.compile(r"started \(kafka\.server|Kafka Server started|Transition from STARTING to STARTED|\[KafkaServer id=\d+\] started")
RECOVERY = re.compile(r"recover|unclean|Loading producer state|Completed load of log|Loaded \d+ logs|Skipping recovery", re.I)
NOTEWORTHY = re.compile(r"\b(WARN|ERROR|FATAL)\b|Exception|Caused by|" + "|".join(EVIDENCE.values()), re.I)


def log_lines(node: Any, offset: int, keep: re.Pattern[str]) -> tuple[list[str], int]:
    """The lines of `node`'s server.log after byte `offset` that `keep` matches (stack frames
    left out), at most MAX_LINES, each cut to 300 characters; and the new offset."""
    text, end = node.read_log(offset)
    lines = [ln[:300] for ln in text.splitlines() if keep.search(ln) and not ln.startswith(("\tat ", "\t... "))]
    if len(lines) > MAX_LINES:  # the first ones say what happened, the last ones how it ended
        lines = lines[:MAX_LINES - 5] + [f"... {len(lines) - MAX_LINES + 5} more lines ..."] + lines[-5:]
    return lines, end


def what_kafka_did(lines: list[str]) -> dict[str, bool]:
    """Per EVIDENCE key, whether any line shows it."""
    return {key: any(re.search(pattern, ln, re.I) for ln in lines) for key, pattern in EVIDENCE.items()}


class DiskNemesis(ProcessNemesis):
    name, faults = "disk", (DISK_EIO_WRITE, DISK_EIO_READ, DISK_FULL)
    stop_f = HEALED
    option_names = ("targets", "errors")
    replay_keys = ("target", "targets", "partition", "error")

    def __init__(self, targets: tuple[str, ...] = DISK_TARGETS, errors: tuple[str, ...] = DISK_ERRORS) -> None:
        bad = [t for t in targets if t not in DISK_TARGETS]
        if bad or not targets:
            raise HarnessError(f"unknown disk target(s) {bad or list(targets)}",
                               hint=f"disk faults strike one broker at a time: use any of {', '.join(DISK_TARGETS)}")
        super().__init__(targets)
        unknown = [e for e in errors if e not in DISK_ERRORS]
        if unknown or not errors:
            raise HarnessError(f"unknown disk error(s) {unknown or list(errors)}", hint=f"use any of: {', '.join(DISK_ERRORS)}")
        self.errors = tuple(errors)
        self.struck: dict[int, dict[str, Any]] = {}  # node id -> error, server.log offset, when
        self.watchers: list[threading.Thread] = []

    def setup(self, cluster: "KafkaCluster", recorder: "NemesisRecorder | None" = None, topic: str | None = None) -> "DiskNemesis":
        super().setup(cluster, recorder, topic)
        disks = lossy_disks(cluster, "disk")
        for node_id, disk in disks.items():
            missing = [e for e in self.errors if e not in disk.fault_presets()]
            if missing:
                raise HarnessError(f"the lossy filesystem helper of broker {node_id} cannot inject {missing}: it was built before disk faults.",
                                   hint="rebuild it with `./chaos bootstrap` (the build is keyed by native/lossyfs's sources)")
        return self

    def plan(self, params: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        if params.get("targets") is not None and not params.get("error"):  # brokers given, not the error
            params = {**params, "error": rng.choice(self.errors)}
        return super().plan(params, rng)

    def decide(self, look: Any, rng: random.Random, given: dict[str, Any]) -> dict[str, Any]:
        error = given.get("error") or rng.choice(self.errors)  # drawn before the broker, as ever
        return {**super().decide(look, rng, given), "error": error}

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        error = plan.get("error")
        if error not in KIND_OF:
            raise HarnessError(f"unknown disk error {error!r}", hint=f"use any of: {', '.join(DISK_ERRORS)}")
        kind = KIND_OF[error]
        nodes, value, nobody = self.aim(plan)
        value["error"] = error
        if nobody is not None:
            return self.skip(kind.start, value, nobody)
        value["pids"], value["fault"] = {}, {}
        for node in nodes:
            self.struck[node.node_id] = {"error": error, "offset": node.log_size()}
            pid = node.pid_on_file()
            value["pids"][str(node.node_id)] = self.victims[node.node_id] = pid
            answer = self.cluster.disks[node.node_id].fault(error)
            value["fault"][str(node.node_id)] = {k: answer["fault"][k] for k in ("errno", "ops")}
        self.record(kind.start, value)
        return value

    def teardown(self) -> dict[str, Any]:
        """Clear every fault, record what each broker did meanwhile, restart the JVMs that died."""
        assert self.cluster is not None
        value: dict[str, Any] = {"targets": sorted(self.victims), "brokers": {}}
        for node_id in sorted(self.victims):
            node, struck = self.cluster.node(node_id), self.struck.pop(node_id, {})
            cleared = self.cluster.disks[node_id].clear_fault() or {}
            lines, offset = log_lines(node, struck.get("offset", 0), NOTEWORTHY)
            alive = node.pid() is not None
            seen = {"error": struck.get("error"), "errno": cleared.get("errno"), "active_s": cleared.get("active_s"),
                    "injected": cleared.get("injected", {}), "first_hit_s": cleared.get("first_hit_s"),
                    "jvm": "running" if alive else "exited", **what_kafka_did(lines), "lines": lines}
            seen["restarted_pid"] = None if alive else supervisor.restart(self, node, "disk: healed")
            value["brokers"][str(node_id)] = seen
            if not alive:
                self.watch_recovery(node, offset)
        self.victims.clear()
        self.record(self.stop_f, value)
        return value

    def watch_recovery(self, node: Any, offset: int) -> None:
        """Record `disk-recovered` once the restarted broker logs that it started (its recovery
        lines with it), or after RECOVERY_WAIT_S saying it did not; in the background, so that the
        schedule goes on meanwhile."""
        began = time.monotonic()

        def watch() -> None:
            started, lines = None, []
            while time.monotonic() - began < RECOVERY_WAIT_S:
                found, _ = log_lines(node, offset, re.compile(f"{STARTED.pattern}|{RECOVERY.pattern}", re.I))
                lines = found
                started = next((ln for ln in found if STARTED.search(ln)), None)
                if started:
                    break
                time.sleep(1.0)
            try:
                self.record(RECOVERED, {"targets": [node.node_id], "started": started is not None,
                                        "seconds": round(time.monotonic() - began, 1), "lines": lines})
            except Exception as exc:  # the run ended and closed its history meanwhile: only logged
                log.warning("disk-recovered of broker %s not recorded: %s", node.node_id, exc)

        thread = threading.Thread(target=watch, name=f"disk-recovery-{node.node_id}", daemon=True)
        self.watchers.append(thread)
        thread.start()

    def join_watchers(self, timeout_s: float = RECOVERY_WAIT_S) -> None:
        """Wait for the recovery events still pending (a test, or a run's end, wants them in)."""
        deadline = time.monotonic() + timeout_s
        for thread in self.watchers:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.watchers = [t for t in self.watchers if t.is_alive()]


DISK_TARGETS_SETTING = Setting("disk_targets", DISK_TARGETS, recorded="targets",
                               help=f"Disk-fault targets: {', '.join(DISK_TARGETS)} (nemesis disk; one broker's data directory at a time).")
DISK_ERRORS_SETTING = Setting("disk_errors", DISK_ERRORS, recorded="errors",
                              help=f"Disk errors to draw from: {', '.join(DISK_ERRORS)} (nemesis disk).")
PACKAGES = (Package("disk", make=lambda s: DiskNemesis(s["disk_targets"], s["disk_errors"]),
                    settings=(DISK_TARGETS_SETTING, DISK_ERRORS_SETTING), heal_rank=45,
                    requires=frozenset({"signals", "restart", "lossy_data", "log_files"}),
                    summary="one broker's data directory fails: EIO on writes or reads, ENOSPC"),)
