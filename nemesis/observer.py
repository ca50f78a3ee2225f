"""What a run has seen of its cluster, owned by the run (its FaultRunner) and shared by every nemesis
in it: each look at who holds which role (nemesis/targets.py Roles), compared with the previous
look, so that `rejoined` names the brokers back in an ISR since the last look, whoever took it.

It replaces a module-global dict keyed by id(cluster): a later cluster reused a gone one's id and
compared its first look with the gone cluster's ISRs (a flaky unit test showed it). An observer
lives as long as its run, so a new run starts with no previous look.

With `watch_states` it also holds the run's StateWatch (nemesis/guided/watch.py): a thread that
turns logs, metadata and acknowledgements into abstract states once a second and records their
changes in the history, for `--schedule guided` (which steers by them) and `--observe`.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from nemesis.holds import Holds
from nemesis.targets import Roles

if TYPE_CHECKING:
    from harness.cluster import KafkaCluster


class Observer:
    """One run's looks at its cluster. Thread-safe: every nemesis of the run looks on its own thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[float, dict[int, list[int]]] | None = None  # (time.monotonic(), partition -> ISR)
        self.looks = 0
        self.watch: Any = None  # the StateWatch, when the run observes states
        self.holds = Holds()  # which faults are in force, on which brokers (the watch reads it too)

    def watch_states(self, cluster: "KafkaCluster", recorder: Any, topic: str | None) -> None:
        """Observe abstract states during the fault phase (begin() starts, end() stops the thread)."""
        from nemesis.guided.watch import StateWatch

        if topic is not None:
            self.watch = StateWatch(cluster, recorder, topic, holds=self.holds)

    def begin(self) -> None:
        if self.watch is not None:
            self.watch.start()

    def fault(self, package: str, action: str, value: dict[str, Any] | None) -> None:
        """A fault struck or was undone: the nodes each package holds, and the state's active faults, follow."""
        self.holds.fault(package, action, value)

    def holders(self, node_id: int, besides: str) -> list[str]:
        """The packages other than `besides` whose active faults hold node `node_id` (a pause, a kill,
        a cut): an operation that would take the node out of the cluster waits for them."""
        return self.holds.holders(node_id, besides)

    def end(self) -> None:
        if self.watch is not None:
            self.watch.stop()

    def describe(self) -> dict[str, Any]:
        """For config.json: what the watch saw (distinct states, transitions, log facts by kind)."""
        return {"observed": self.watch.summary()} if self.watch is not None else {}

    def look(self, cluster: "KafkaCluster", topic: str | None, views: Callable[[], Any] | None = None) -> Roles:
        """One look at the cluster's roles, with `rejoined` and `since_s` against the previous look."""
        roles = Roles.now(cluster, topic, views)
        self.remember(roles)
        return roles

    def remember(self, roles: Roles) -> None:
        """Compare this look's ISRs with the previous look's (`rejoined`), then keep it as the previous
        look. A look that saw no ISR (no majority agreed) is not kept: it would make everyone 'rejoin'."""
        if not roles.isrs:
            return
        with self._lock:
            self.looks += 1
            if self._last is not None:
                at, isrs = self._last
                roles.since_s = round(time.monotonic() - at, 2)
                for p, isr in roles.isrs.items():
                    back = sorted(set(isr) - set(isrs.get(p, isr)) - {roles.leaders.get(p)})
                    if back:
                        roles.rejoined[p] = back
            self._last = (time.monotonic(), {p: list(isr) for p, isr in roles.isrs.items()})
