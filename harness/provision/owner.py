"""Who owns a run's resources, and whether that owner still lives.

Every container, network and temporary folder the harness creates carries its owner: the host
name, the PID of the process that created it, that process's start time (field 22 of
/proc/<pid>/stat, clock ticks after boot) and the "PID space" (boot id and PID namespace) in
which the PID means something. `cleanup` removes what belongs to a dead owner only:

- dead: the PID is gone from this PID space, is a zombie, or now belongs to a process that
  started at another time (a reused PID is not the owner);
- alive: the same PID with the same start time still runs; never touched without --all;
- unknown: another host or PID space (a container, another boot) where the PID cannot be
  checked from here, or no owner recorded (a harness before owner labels, or not the harness).
  Such a resource cannot be proven dead, so it is kept unless named by --run-id or --all.
"""

from __future__ import annotations

import functools
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from harness.provision.settings import RUN_LABEL

HOST_LABEL = "io.kafka-harness.owner.host"
PID_LABEL = "io.kafka-harness.owner.pid"
START_LABEL = "io.kafka-harness.owner.start"  # /proc/<pid>/stat field 22 (starttime, clock ticks after boot)
SPACE_LABEL = "io.kafka-harness.owner.pid-space"  # boot id + PID namespace: where PID and start time are comparable

DEAD, ALIVE, UNKNOWN = "dead", "alive", "unknown"


def process_state(pid: int, proc: Path = Path("/proc")) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks after boot) of `pid`, or None when no such process.

    The command name (field 2) is in parentheses and may itself hold spaces and ')': the fields
    are counted after the last ')'."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    rest = text[text.rindex(")") + 1:].split()
    return rest[0], int(rest[19])  # fields 3 (state) and 22 (starttime)


def pid_space() -> str:
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # e.g. "pid:[4026531836]"
    except OSError:
        namespace = "pid:?"
    return f"{boot}/{namespace}"


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start: int
    space: str

    def labels(self) -> dict[str, str]:
        return {HOST_LABEL: self.host, PID_LABEL: str(self.pid), START_LABEL: str(self.start), SPACE_LABEL: self.space}

    @classmethod
    def from_labels(cls, labels: Mapping[str, str] | None) -> "Owner | None":
        labels = labels or {}
        try:
            return cls(labels[HOST_LABEL], int(labels[PID_LABEL]), int(labels[START_LABEL]), labels[SPACE_LABEL])
        except (KeyError, ValueError):
            return None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


@functools.lru_cache(maxsize=None)
def _owner_of(pid: int) -> Owner:
    state = process_state(pid)
    assert state is not None, "this process has no /proc entry"
    return Owner(socket.gethostname(), pid, state[1], pid_space())


def this_process() -> Owner:
    """The owner to record on what this process creates (cached per PID: a fork gets its own)."""
    return _owner_of(os.getpid())


@dataclass(frozen=True)
class Judgement:
    state: str  # DEAD, ALIVE or UNKNOWN
    reason: str


def judge(owner: Owner | None, here: Owner | None = None, proc: Path = Path("/proc")) -> Judgement:
    """Whether `owner` is dead, alive or cannot be known from this process; see the module docstring."""
    if owner is None:
        return Judgement(UNKNOWN, "no owner recorded (made before owner labels, or not by the harness)")
    here = here or this_process()
    if owner.host != here.host or owner.space != here.space:
        where = "another host" if owner.host != here.host else "another boot or PID namespace of this host name"
        return Judgement(UNKNOWN, f"owner {owner.describe()} is on {where}: its life cannot be checked from here")
    state = process_state(owner.pid, proc)
    if state is None:
        return Judgement(DEAD, f"owner {owner.describe()} has exited")
    letter, start = state
    if start != owner.start:
        return Judgement(DEAD, f"owner {owner.describe()} has exited (the PID now belongs to a process started later)")
    if letter in ("Z", "X"):
        return Judgement(DEAD, f"owner {owner.describe()} has exited (a zombie not yet reaped)")
    return Judgement(ALIVE, f"owner {owner.describe()} still runs")


def run_labels(run_id: str) -> dict[str, str]:
    """The labels of every container and network of a run: its id and its owner (this process)."""
    return {RUN_LABEL: run_id, **this_process().labels()}


OWNER_FILE = "owner.json"  # in a cluster's temporary folder: the same labels, for a folder has none


def write_owner(folder: Path, run_id: str) -> None:
    (folder / OWNER_FILE).write_text(json.dumps({RUN_LABEL: run_id, **this_process().labels()}, indent=1) + "\n")


def read_owner(folder: Path) -> dict[str, str]:
    """The labels that `write_owner` left in `folder`, or {} (none, or unreadable)."""
    try:
        data = json.loads((folder / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
