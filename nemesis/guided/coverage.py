"""The coverage map: every abstract state and transition the guided runs of a store have seen, how
often, and what the scheduler learnt (its Q table), per Kafka version. One JSON file under the store
root (STORE/guided-coverage.json), rewritten atomically at the end of each guided run; it only grows.

    {"format": 1, "versions": {"0.10.2.2": {"runs": 3, "states": {STATE: count}, "transitions": {...},
                                             "q": {DECISION_STATE: {ACTION: value}}, "q_design": 2}}}

`q_design` is the scheduler design the Q values were learnt under: a run of another design keeps
the counts and starts its Q table afresh (and replaces the stored one).

A run reads it when its schedule is made and adds its own counts when its fault phase ends, under
an flock of STORE/guided-coverage.json.lock, re-reading the file first: two runs of one store that
end together both count (a `detect` sweep and a `run` into the same store).
"""

from __future__ import annotations

import fcntl
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.history.files import write_json

FILE = "guided-coverage.json"
FORMAT = 1


@dataclass
class VersionCoverage:
    runs: int = 0
    states: dict[str, int] = field(default_factory=dict)
    transitions: dict[str, int] = field(default_factory=dict)
    q: dict[str, dict[str, float]] = field(default_factory=dict)
    q_design: int | None = None

    def count(self, item: str) -> int:
        """How often earlier runs saw a state or a transition (a transition holds ' -> ')."""
        return (self.transitions if " -> " in item else self.states).get(item, 0)

    def as_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "states": dict(sorted(self.states.items())),
                "transitions": dict(sorted(self.transitions.items())),
                "q": {s: dict(sorted(a.items())) for s, a in sorted(self.q.items())}, "q_design": self.q_design}


def path_in(store: Path | str) -> Path:
    return Path(store) / FILE


def read(path: Path | str, version: str) -> VersionCoverage:
    """The map's entry for `version` (empty when the file or the version is not there yet). A file
    that is not a coverage map is refused (exit 2) rather than overwritten."""
    data = _load(Path(path))
    entry = data["versions"].get(version) or {}
    return VersionCoverage(int(entry.get("runs", 0)), dict(entry.get("states") or {}),
                           dict(entry.get("transitions") or {}),
                           {s: dict(a) for s, a in (entry.get("q") or {}).items()}, entry.get("q_design"))


def add_run(path: Path | str, version: str, states: dict[str, int], transitions: dict[str, int],
            q: dict[str, dict[str, float]], q_design: int | None = None) -> VersionCoverage:
    """Add one run's counts (and its Q values, which replace the stored ones entry by entry) to the
    map, atomically; return the version's entry as written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = _load(path)
        entry = read(path, version)
        entry.runs += 1
        for mine, theirs in ((states, entry.states), (transitions, entry.transitions)):
            for k, n in mine.items():
                theirs[k] = theirs.get(k, 0) + int(n)
        if entry.q_design != q_design:  # Q values of another design are on another scale
            entry.q, entry.q_design = {}, q_design
        for s, actions in q.items():
            entry.q.setdefault(s, {}).update({a: round(float(v), 4) for a, v in actions.items()})
        data["versions"][version] = entry.as_json()
        write_json(path, data)
    return entry


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"format": FORMAT, "versions": {}}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise HarnessError(f"{path} is not a readable coverage map: {exc}.",
                           hint="move it aside; the next guided run starts a new map") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("versions"), dict):
        raise HarnessError(f"{path} is not a coverage map of format {FORMAT}.",
                           hint="move it aside; the next guided run starts a new map")
    return data
