"""A seeded, Jepsen-like fault schedule: each package alternates start and stop.

Every package (nemesis/registry.py) has its own random stream
derived from the seed and its name, so adding a package never changes when
another one fires, and the same seed always gives the same schedule. Gaps are
uniform in [interval/2, 3*interval/2] (mean `interval_s`); each package starts
at a random offset within its first interval, so packages are staggered.
"""

from __future__ import annotations

import random
import threading
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol


GAP_RANGE = (0.5, 1.5)  # × the interval: a package's gap between faults (mean 1.0); the guided schedule draws its delays alike


def __getattr__(name: str) -> Any:
    """PACKAGES: every registered package's name (nemesis/registry.py), read when asked for."""
    if name == "PACKAGES":
        from nemesis import registry

        return registry.names()
    raise AttributeError(f"module 'nemesis.schedule' has no attribute {name!r}")


@dataclass(frozen=True)
class FaultEvent:
    at_s: float  # seconds after the fault phase starts
    package: str
    action: str  # "start" or "stop"
    # What the nemesis resolved when it ran (targets, shape, grudge, offsets): empty in a fresh
    # schedule, filled in by the runner, and given back to the nemesis by a replay.
    params: dict[str, Any] = field(default_factory=dict, compare=False)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def recorded_schedule(events: list[dict[str, Any]]) -> list[FaultEvent]:
    """A schedule as config.json recorded it (nemesis_config.schedule), to replay."""
    return sorted((FaultEvent(float(e["at_s"]), str(e["package"]), str(e["action"]), dict(e.get("params") or {}))
                   for e in events), key=lambda e: (e.at_s, e.package))


def package_rng(seed: int, package: str, purpose: str) -> random.Random:
    return random.Random(f"{seed}:{package}:{purpose}")


def build_schedule(packages: list[str], time_limit_s: float, interval_s: float, seed: int) -> list[FaultEvent]:
    """Every start/stop of every package within the fault phase, in time order."""
    events: list[FaultEvent] = []
    for package in sorted(set(packages)):
        rng = package_rng(seed, package, "timing")
        at, action = rng.uniform(0, interval_s), "start"
        while at < time_limit_s:
            events.append(FaultEvent(round(at, 3), package, action))
            action = "stop" if action == "start" else "start"
            at += rng.uniform(GAP_RANGE[0] * interval_s, GAP_RANGE[1] * interval_s)
    return sorted(events, key=lambda e: (e.at_s, e.package))


class Scheduler(Protocol):
    """Decides the fault phase's next action: `next(package, now_s, observer)` is the package's
    next event (due at or after now_s), or None when it has no more. Each package asks on its own
    thread. `planned()` is what is known ahead, for config.json before the run. The seeded random
    schedule and the replay are the first two; a scheduler that steers by what the run's observer
    saw (nemesis/observer.py) plugs in here."""

    name: str

    def planned(self) -> list[FaultEvent]: ...

    def next(self, package: str, now_s: float, observer: Any) -> FaultEvent | None: ...


# A package asking for its next event this late (seconds past the event's moment) was busy: its
# last action, an operation such as a rolling upgrade, outran the gaps drawn after it.
LATE_S = 1.0


class EventList:
    """A schedule decided ahead of time, handed out package by package in time order.

    keep_gaps (the random schedule): when a package asks late because its last action outran the
    events after it, that event and the package's later ones move by the delay, so they keep their
    drawn gaps instead of firing back to back. Before, a 4.1.1 → 4.4.0 upgrade that ran 115 s left
    six overdue starts that all fired within 0.7 s of its end (run 20261126T061516-5f09b2). A
    replay never moves: its events are the times the run actually struck.

    horizon_s: a moved event that falls past it (the time limit the schedule was drawn for) is
    dropped, as a drawn one never falls there, and nothing is handed out once the clock is past it. Fired, it struck only if the workload
    happened to outlast its limit, so its replay might not: CI saw two kills moved to 25.7 and
    26.4 s of a 24 s run, fired in the original and not in its replay (test_replay)."""

    def __init__(self, name: str, events: list[FaultEvent], keep_gaps: bool = False, horizon_s: float | None = None) -> None:
        self.name, self.keep_gaps, self.horizon_s = name, keep_gaps, horizon_s
        self.events = sorted(events, key=lambda e: (e.at_s, e.package))
        self._left = {p: [e for e in self.events if e.package == p] for p in dict.fromkeys(e.package for e in self.events)}
        self._lock = threading.Lock()

    def planned(self) -> list[FaultEvent]:
        return list(self.events)

    def next(self, package: str, now_s: float, observer: Any = None) -> FaultEvent | None:
        with self._lock:
            left = self._left.get(package)
            if not left:
                return None
            event = left.pop(0)
            late = now_s - event.at_s
            if self.horizon_s is not None and now_s > self.horizon_s:
                # Asked for past the limit, late by any amount: CI saw a kill drawn before 24 s fire
                # at 24.15 s and a partition at 24.80 s, 0.2 s late each (under LATE_S, so not moved);
                # they struck only because the workload outlasted its limit, and not in the replay.
                self._left[package] = []
                return None
            if self.keep_gaps and late > LATE_S:
                moved = [replace(e, at_s=round(e.at_s + late, 3)) for e in left]
                self._left[package] = [e for e in moved if self.horizon_s is None or e.at_s <= self.horizon_s]
                event = replace(event, at_s=round(now_s, 3))
            return event


def random_schedule(packages: list[str], time_limit_s: float, interval_s: float, seed: int) -> EventList:
    """Today's default: each package alternates start and stop at seeded random gaps (build_schedule)."""
    return EventList("random", build_schedule(packages, time_limit_s, interval_s, seed), keep_gaps=True, horizon_s=time_limit_s)


def replay_schedule(events: list[FaultEvent]) -> EventList:
    """A run's executed schedule given back (`run --replay`): the same times, the recorded params."""
    return EventList("replay", events)
