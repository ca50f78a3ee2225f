"""Which faults are in force, and on which brokers: one record per run, kept by the run's Observer
(nemesis/observer.py) as each fault strikes or is undone, and read by whoever needs it: membership
asks which packages hold a broker before it decommissions it, and the state watch
(nemesis/guided/watch.py) puts the active faults and the held brokers into each abstract state.
Before, the observer and the watch each kept a copy of this, under locks of their own."""

from __future__ import annotations

import threading
from typing import Any


class Holds:
    """Package -> how many starts it holds, and package -> the broker ids those starts hold. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._starts: dict[str, int] = {}
        self._nodes: dict[str, set[int]] = {}

    def fault(self, package: str, action: str, value: dict[str, Any] | None) -> None:
        """A start adds its targets (a start recorded as skipped holds nothing); a stop releases the package."""
        value = value or {}
        with self._lock:
            if action == "start":
                if value.get("skipped"):
                    return
                self._starts[package] = self._starts.get(package, 0) + 1
                self._nodes.setdefault(package, set()).update(t for t in value.get("targets") or [] if isinstance(t, int))
            elif action == "stop":
                self._starts.pop(package, None)
                self._nodes.pop(package, None)

    def holders(self, node_id: int, besides: str = "") -> list[str]:
        """The packages other than `besides` whose active faults hold broker `node_id`."""
        with self._lock:
            return sorted(p for p, nodes in self._nodes.items() if p != besides and node_id in nodes)

    def held(self) -> dict[str, set[int]]:
        """Package -> the brokers its active faults hold, copied (nemesis/guided/risk.py asks who is cut off)."""
        with self._lock:
            return {p: set(nodes) for p, nodes in self._nodes.items()}

    def now(self) -> tuple[dict[str, int], set[int]]:
        """(package -> starts held, every broker some fault holds), copied."""
        with self._lock:
            return dict(self._starts), set().union(*self._nodes.values()) if self._nodes else set()
