"""The abstract state of a run's cluster: a short string per workload partition, built from three
sources, and what a run has seen of them (distinct states, distinct transitions).

- the brokers' logs (nemesis/guided/loglines.py): truncations, ISR shrink and expand, ELR changes,
  leader elections, unclean elections, fencing, controller changes, start-ups and shut-downs, each
  marking a partition (or the cluster) for `WINDOW_S` seconds after the line was read;
- the metadata (nemesis/targets.py Roles): each partition's leader and ISR, the active controller;
- the history: which faults are active now (told by the fault runner as it strikes), and whether
  any send to the partition was acknowledged since the previous tick (its history.jsonl, tailed).

A partition's state reads e.g. `kill|L:hit|isr2|trunc-hw,shrink|w0`: a kill is active; the metadata
still names as leader a broker that a fault holds down; two replicas are in sync; a follower
truncated to its high watermark and the ISR shrank within the last 5 s; no acknowledged write
since the last tick. KIP-101's window, the one `heir` scripts, is `kill×2|L:hit|isr2|trunc-hw|w0`
and kin: a state the scheduler can be rewarded for reaching without being told it matters.

Why these pieces and not more: the state must be small enough to be seen twice. Offsets, epochs and
broker ids are left out (every run would be new); the window is 5 s because a ZooKeeper-era
controller needs its 6 s session timeout to notice a SIGKILL, so a truncation and the election it
leads to usually fall within one window.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from nemesis.guided.loglines import CLUSTER_KINDS, QUIET_KINDS, Fact

WINDOW_S = 5.0
# The flags a cluster-wide fact gives every partition's state.
CLUSTER_FLAGS = {"fenced": "fenced", "controller": "ctl-change", "startup": "restart", "shutdown": "shutdown",
                 "fatal": "fatal", "unclean": "unclean"}
ACKED = re.compile(rb'"type":"ok","f":"send","value":\{"key":(\d+)(?:,"value":-?\d+,"offset":(\d+))?')


def faults_text(active: dict[str, int]) -> str:
    """kill×2+partition: the packages holding a fault now, with how many starts each holds."""
    parts = [p if n == 1 else f"{p}×{n}" for p, n in sorted(active.items()) if n > 0]
    return "+".join(parts) or "-"


@dataclass
class Look:
    """What the metadata said at one tick (a Roles reduced to what the state needs)."""

    leaders: dict[int, int] = field(default_factory=dict)  # partition -> leader id (-1: none)
    isrs: dict[int, list[int]] = field(default_factory=dict)
    controller: int | None = None
    answered: bool = True  # False: no majority answered; the partitions' metadata is unknown

    @classmethod
    def of(cls, roles: Any) -> "Look":
        return cls(dict(roles.leaders), {p: list(i) for p, i in roles.isrs.items()}, roles.controller,
                   bool(roles.leaders) and roles.error is None)


class Abstraction:
    """Turns facts, looks, active faults and acknowledgements into partition states. Pure: no
    cluster, no clock of its own (every call is given `now`), so a test can feed it real lines."""

    def __init__(self, partitions: Iterable[int] = (), window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self.partitions = set(partitions)
        self._marks: dict[int | None, dict[str, float]] = {}  # partition (None: cluster) -> flag -> last seen
        self.fact_counts: Counter[str] = Counter()

    def add(self, facts: Iterable[Fact], now: float) -> None:
        for f in facts:
            self.fact_counts[f.kind] += 1
            if f.kind in QUIET_KINDS:
                continue
            if f.kind in CLUSTER_KINDS:
                self._marks.setdefault(None, {})[CLUSTER_FLAGS[f.kind]] = now
            else:
                self.partitions.add(f.partition)  # type: ignore[arg-type]
                flag = f.kind.replace("truncate", "trunc").replace("isr-", "")
                self._marks.setdefault(f.partition, {})[flag] = now

    def flags(self, partition: int, now: float) -> list[str]:
        recent = {**self._marks.get(None, {}), **self._marks.get(partition, {})}
        return sorted(k for k, at in recent.items() if now - at <= self.window_s)

    def states(self, now: float, look: Look | None, active: dict[str, int], hit: set[int],
               acked: dict[int, int] | None) -> dict[int, str]:
        faults = faults_text(active)
        out = {}
        for p in sorted(self.partitions | set(look.leaders if look else ())):
            if look is None or not look.answered:
                leader, isr = "?", "?"
            else:
                lid = look.leaders.get(p, -1)
                leader = ("none" if lid is None or lid < 0 else "hit" if lid in hit
                          else "ctl" if lid == look.controller else "ok")
                isr = str(len(look.isrs.get(p, [])))
            writes = "" if acked is None else ("|w" if acked.get(p, 0) > 0 else "|w0")
            out[p] = f"{faults}|L:{leader}|isr{isr}|{','.join(self.flags(p, now)) or '-'}{writes}"
        return out


class Seen:
    """What one run has seen: each distinct state and transition with how often, in order of first sight."""

    def __init__(self) -> None:
        self.states: Counter[str] = Counter()
        self.transitions: Counter[str] = Counter()
        self.last: dict[int, str] = {}
        self.fresh: list[str] = []  # new to this run since the scheduler last took them (take_fresh)

    def update(self, states: dict[int, str]) -> dict[int, tuple[str | None, str]]:
        """Count this tick's states; return the partitions whose state changed: (old, new)."""
        changed = {}
        for p, s in states.items():
            old = self.last.get(p)
            if old == s:
                continue
            changed[p] = (old, s)
            if self.states[s] == 0:
                self.fresh.append(s)
            self.states[s] += 1
            if old is not None:
                t = transition(old, s)
                if self.transitions[t] == 0:
                    self.fresh.append(t)
                self.transitions[t] += 1
            self.last[p] = s
        return changed

    def take_fresh(self) -> list[str]:
        fresh, self.fresh = self.fresh, []
        return fresh


def transition(old: str, new: str) -> str:
    return f"{old} -> {new}"


def decision_state(look: Look | None, states: dict[int, str], active: dict[str, int], hit: set[int]) -> str:
    """The coarse state the scheduler learns over (its Q table's rows): the active faults, the
    smallest ISR, whether a leader is gone or held down, and the log flags seen on any partition.
    Coarser than a partition's state so that a row is visited often enough to learn in one run."""
    if look is None or not look.answered:
        shape = "isr?"
    else:
        smallest = min((len(i) for i in look.isrs.values()), default=0)
        leaders = set(look.leaders.values())
        shape = f"isr{smallest}" + ("|leaderless" if -1 in leaders else "") + ("|leader-hit" if leaders & hit else "")
    flags = sorted({f for s in states.values() for f in s.split("|")[3].split(",") if f != "-"}
                   & {"trunc", "trunc-hw", "trunc-epoch", "truncation-refused", "shrink", "expand", "unclean", "elr",
                      "restart"})
    return f"{faults_text(active)}|{shape}|{','.join(flags) or '-'}"


class Acks:
    """Acknowledged sends per partition since the last read, from the run's history.jsonl (a regex
    over the new bytes, no JSON parsing: at 1000 sends/s that is ~150 KB a second)."""

    def __init__(self, path: Any) -> None:
        self.path, self.offset = path, 0
        self.top: dict[int, int] = {}  # partition -> the highest offset acknowledged (nemesis/guided/risk.py)

    def start_at_end(self) -> None:
        try:
            with open(self.path, "rb") as f:
                self.offset = f.seek(0, 2)
        except OSError:
            self.offset = 0

    def read(self) -> dict[int, int] | None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return None
        cut = data.rfind(b"\n") + 1
        self.offset += cut
        counts: Counter[int] = Counter()
        for key, offset in ACKED.findall(data[:cut]):
            p = int(key)
            counts[p] += 1
            if offset and int(offset) > self.top.get(p, -1):
                self.top[p] = int(offset)
        return counts


def now() -> float:
    return time.monotonic()
