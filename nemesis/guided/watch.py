"""The run's state watch: a thread that ticks once a second during the fault phase, reads what the
brokers logged since the last tick, looks at the metadata, counts acknowledged sends, turns them
into partition states (nemesis/guided/state.py), and records each change in the history as one
`observed` event (harness/history/faults.py OBSERVED; docs/history.md).

Its own metadata look is not the nemeses' (Roles.now directly, not the run's Observer.look): the
`rejoined` target compares a nemesis's look with the previous nemesis look, and a look every
second would leave nobody 'rejoined'. Looks are taken on a thread of their own, every `look_every`
ticks (2: each asks every broker), and a tick uses the latest one: a paused broker makes a look
wait its 3 s timeout, and when the tick waited for it the 0.10.2.2 runs of 2026-11-26 were
observed 41-65 times in 120 s instead of 120.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from harness.history.format import OBSERVED
from nemesis.guided.loglines import IsrSizes, LogTail, classify, elected, fetch_sources, isr_joined, partition_pattern, truncated_to
from nemesis.guided.risk import TRUNCATIONS, AtRisk
from nemesis.guided.state import Abstraction, Acks, Look, Seen, decision_state, now
from nemesis.holds import Holds

log = logging.getLogger("nemesis")

TICK_S = 1.0


def in_time_order(logs: list[tuple[Any, list[str]]]) -> list[tuple[Any, str]]:
    """One tick's lines of every broker, merged by their log timestamps ("[2026-11-27 23:23:18,246]",
    4.x "[2026-11-25T19:03:27,659]": both sort as text); a line without one (a stack trace's) stays
    after the line before it. Broker by broker, a follower's truncation read after its leader's
    "Expanding ISR" line of the same second would look as if it came after its return to the ISR."""
    keyed = []
    for n, (broker, lines) in enumerate(logs):
        stamp = ""
        for i, line in enumerate(lines):
            if line[:3] == "[20":
                stamp = line[1:24]
            keyed.append((stamp, n, i, broker, line))
    keyed.sort(key=lambda k: k[:3])
    return [(broker, line) for *_, broker, line in keyed]


class StateWatch:
    def __init__(self, cluster: Any, recorder: Any, topic: str, tick_s: float = TICK_S, look_every: int = 2,
                 looker: Callable[[], Any] | None = None, holds: Holds | None = None) -> None:
        self.cluster, self.recorder, self.topic, self.tick_s, self.look_every = cluster, recorder, topic, tick_s, look_every
        self._looker = looker
        self.abstraction = Abstraction()
        self.seen = Seen()
        self.risk = AtRisk()
        self._taken = {"causes": 0, "cuts": 0, "cut_sites": 0}  # how much of each of the risk's lists the scheduler has taken
        self.holds = holds if holds is not None else Holds()  # the run's Observer's: the faults in force
        self.look: Look | None = None
        self.states: dict[int, str] = {}
        self.ticks = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._looker_thread: threading.Thread | None = None
        self._names = partition_pattern(topic)
        self._isr = IsrSizes()
        nodes = list(getattr(cluster, "brokers", []))
        self._tails = [(getattr(n, "node_id", None), LogTail(n)) for n in nodes]
        path = getattr(recorder, "path", None)
        self._acks = Acks(path) if path is not None else None

    # --- the thread ---------------------------------------------------------------------------
    def start(self) -> None:
        for _, tail in self._tails:
            try:
                tail.start_at_end()
            except Exception as exc:  # a log not there yet is read from its start
                self.errors.append(f"log: {exc}"[:200])
        if self._acks is not None:
            self._acks.start_at_end()
        self._thread = threading.Thread(target=self._run, name="state-watch", daemon=True)
        self._looker_thread = threading.Thread(target=self._look_loop, name="state-watch-look", daemon=True)
        self._looker_thread.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in (self._thread, self._looker_thread):
            if thread is not None:
                thread.join(timeout=10.0)

    def _look_loop(self) -> None:
        while True:
            look = self._look()
            with self._lock:
                self.look = look
            if self._stop.wait(self.tick_s * self.look_every):
                return

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            try:
                self.tick()
            except Exception as exc:  # an observation lost, never the run
                if len(self.errors) < 20:
                    self.errors.append(f"{type(exc).__name__}: {exc}"[:200])
                log.debug("state watch: %s", exc)

    def tick(self) -> dict[int, tuple[str | None, str]]:
        """One observation: the logs, the latest metadata look, the acks; record what changed."""
        t = now()
        facts, elections = [], []
        look = self.look
        for isr in (look.isrs.values() if look is not None else ()):
            self._isr.saw(len(isr))
        lines = in_time_order([(broker, tail.lines()) for broker, tail in self._tails])  # I/O outside the lock
        acked = self._acks.read() if self._acks is not None else None
        with self._lock:
            if self._acks is not None:
                self.risk.acked(self._acks.top)
            for broker, line in lines:
                fact = self._read(broker, line, t, look, elections)
                if fact is not None:
                    facts.append(fact)
            self.ticks += 1
            self.abstraction.add(facts, t)
            self.risk.look(self.holds.held(), t)  # this tick's truncations count as before its elections
            for partition, leader in elections:
                if leader is not None:
                    self.risk.elected(partition, leader, t)
            active, hit = self.holds.now()
            self.states = self.abstraction.states(t, self.look, active, hit, acked)
            changed = self.seen.update(self.states)
        if changed and self.recorder is not None:
            self.recorder.nemesis(OBSERVED, {
                "states": {f"{self.topic}-{p}": new for p, (_, new) in sorted(changed.items())},
                "distinct_states": len(self.seen.states), "distinct_transitions": len(self.seen.transitions)})
        return changed

    def _read(self, broker: int | None, line: str, t: float, look: Look | None, elections: list) -> Any:
        """One log line: its fact (or None), and what design 7's risk signal takes from it."""
        fact = self._isr.resolve(line, classify(line, self.topic, broker, self._names))
        if broker is not None:
            for partition, leader in fetch_sources(line, self.topic).items():
                self.risk.fetches(partition, broker, leader, t)
        if fact is None or fact.partition is None:
            return fact
        if fact.kind == "leader":
            elections.append((fact.partition, elected(line, fact)))
        elif fact.kind in TRUNCATIONS and fact.broker is not None and (to := truncated_to(line)) is not None:
            self.risk.truncated(fact.partition, fact.broker, to, t, look.leaders.get(fact.partition) if look else None)
        elif fact.kind == "isr-expand":
            self.risk.rejoined(fact.partition, isr_joined(line))
        return fact

    def _look(self) -> Look | None:
        from nemesis.targets import Roles

        try:
            roles = self._looker() if self._looker is not None else Roles.now(self.cluster, self.topic)
            return Look.of(roles)
        except Exception as exc:
            self.errors.append(f"look: {exc}"[:200])
            return None

    # --- what the scheduler and config.json read -------------------------------------------------
    def decision_state(self) -> str:
        active, hit = self.holds.now()
        with self._lock:
            return decision_state(self.look, self.states, active, hit)

    def take_fresh(self) -> list[str]:
        with self._lock:
            return self.seen.take_fresh()

    def take_risky(self) -> list[tuple[str, ...]]:
        """Each time writes were at risk (nemesis/guided/risk.py) since the scheduler last asked: the
        packages whose faults cut the elected follower off from its leader."""
        return self._take("causes")

    def take_cuts(self) -> list[tuple[str, ...]]:
        """Each cut (nemesis/guided/risk.py, design 11) since the scheduler last asked: the packages
        whose faults kept a truncated follower from its leader."""
        return self._take("cuts")

    def take_cut_sites(self) -> list[tuple[int, int, int, tuple[str, ...]]]:
        """Where each cut since the scheduler last asked was: (partition, follower, the leader it
        was kept from, the packages that cut it), for design 12's strike."""
        return self._take("cut_sites")

    def _take(self, name: str) -> list[tuple[str, ...]]:
        with self._lock:
            items = getattr(self.risk, name)
            new, self._taken[name] = items[self._taken[name]:], len(items)
            return list(new)

    def summary(self) -> dict[str, Any]:
        with self._lock:
            return {"ticks": self.ticks, "distinct_states": len(self.seen.states),
                    "distinct_transitions": len(self.seen.transitions),
                    "writes_at_risk_count": len(self.risk.events), "cuts_count": len(self.risk.cut_sites),
                    "writes_at_risk": [{"partition": f"{self.topic}-{p}", "leader": b, "cut_by": list(by)}
                                       for (p, b), by in list(zip(self.risk.events, self.risk.causes))[:50]],
                    "log_facts": dict(sorted(self.abstraction.fact_counts.items())),
                    "errors": self.errors[:5]}

    def snapshot(self) -> tuple[dict[str, int], dict[str, int]]:
        """This run's distinct states and transitions with their counts (the coverage map adds them)."""
        with self._lock:
            return dict(self.seen.states), dict(self.seen.transitions)
