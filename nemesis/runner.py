"""The fault phase of a run: a seeded schedule executed against a cluster, then a heal.

`FaultRunner` is the runtime side, not a nemesis: it drives the Jepsen-style nemeses
(nemesis/base.py: setup, invoke, teardown) by a schedule. The run orchestration calls
`setup(cluster, recorder)`, `start()` when the workload is going, and `heal_and_stop()`
when the fault phase ends: it stops the schedule, restarts killed brokers, resumes paused
ones, removes every iptables rule, resets clocks, and waits until every partition's ISR is
full again (or a timeout), recording each step as a nemesis event.

Every executed event keeps what its nemesis resolved (targets, the partition aimed at, the
grudge, clock offsets) and its actual time; `describe()` puts that schedule in config.json,
and a runner given it back (`run --replay`) hits the same nodes at the same times.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError
from harness.history.faults import ERROR, HEAL
from nemesis import registry, steps
from nemesis.base import Nemesis, NemesisRecorder
from nemesis.observer import Observer
from nemesis.refusals import Refusals
from nemesis.schedule import FaultEvent, Scheduler, package_rng, random_schedule, replay_schedule

if TYPE_CHECKING:
    from harness.cluster import KafkaCluster

log = logging.getLogger("nemesis")
# How often the heal reads the brokers' logs for refused truncations (nemesis/refusals.py) while
# ISRs lag: every 5 s, so a heal whose ISRs fill at once never reads a log.
REFUSAL_LOOK_S = 5.0

# How long past its recorded moment a replayed fault waits for its look of the roles, begun after
# the package's previous event. Its targets are recorded, so the look only names their roles; a
# replay that waited the look's full 3 s for a just-killed broker struck after another package's
# fault instead of before it.
LOOK_GRACE_S = 0.25


def build_nemeses(packages: list[str], settings: dict[str, Any] | None = None, **values: Any) -> dict[str, Nemesis]:
    """The nemesis of each named package (nemesis/registry.py), validated; `[]` or `["none"]`
    means no faults. Settings by name, as a dict or as keywords (partition_targets=("halves",)),
    each as the command line or a tuple gives it; one left out takes its package's default."""
    return registry.build(packages, {**(settings or {}), **values})


class FaultRunner:
    """Executes a seeded (or recorded) schedule in one bounded background thread."""

    def __init__(
        self,
        nemeses: dict[str, Nemesis],
        time_limit_s: float,
        interval_s: float = 10.0,
        seed: int = 0,
        isr_timeout_s: float = 120.0,
        topic: str | None = None,
        schedule: list[FaultEvent] | None = None,
        scheduler: Scheduler | None = None,
        observe: bool = False,
    ) -> None:
        """`scheduler` decides the faults (nemesis/schedule.py); without one, `schedule` (a recorded
        schedule) is replayed, and without that the seeded random schedule is drawn."""
        if interval_s <= 0:
            raise HarnessError(f"nemesis interval {interval_s} must be > 0 seconds")
        self.nemeses, self.seed, self.isr_timeout_s, self.interval_s = nemeses, seed, isr_timeout_s, interval_s
        if scheduler is None:
            scheduler = (replay_schedule(schedule) if schedule is not None
                         else random_schedule(list(nemeses), time_limit_s, interval_s, seed))
        self.scheduler: Scheduler = scheduler
        self.schedule: list[FaultEvent] = scheduler.planned()  # what is known before the run starts
        self.executed: list[FaultEvent] = []  # each event as it ran: actual time, resolved params
        self._rngs = {name: package_rng(seed, name, "choices") for name in nemeses}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.cluster: KafkaCluster | None = None
        self.recorder: NemesisRecorder | None = None
        self.topic: str | None = topic  # the workload topic: 'leader' targets lead one of its partitions
        self.errors: list[str] = []
        self._began = 0.0
        self.observer = Observer()  # what this run has seen of its cluster, shared by its nemeses
        # Abstract states watched during the fault phase (nemesis/guided/watch.py): for a scheduler
        # that steers by them (guided), or on request (--observe, detect's random runs).
        self.observe = observe or bool(getattr(scheduler, "observes", False))

    @property
    def packages(self) -> list[str]:
        return list(self.nemeses)

    @property
    def requires(self) -> frozenset[str]:
        """What the packages need of the cluster (nemesis/registry.py CAPABILITIES), e.g. lossy_data."""
        return registry.requirements(registry.registered(self.nemeses))

    def describe(self) -> dict[str, Any]:
        """What config.json needs to reproduce and explain the faults: before the run the planned
        schedule, after it the executed one (actual times, resolved targets)."""
        return {
            "packages": list(self.nemeses),
            "interval_s": self.interval_s,
            "seed": self.seed,
            "options": {name: nemesis.options() for name, nemesis in self.nemeses.items()},
            "schedule": [e.as_dict() for e in (sorted(self.executed, key=lambda e: (e.at_s, e.package)) or self.schedule)],
            "scheduler": self.scheduler.name,
            **self.observer.describe(),
            **({"guided": self.scheduler.describe()} if hasattr(self.scheduler, "describe") else {}),
        }

    def setup(self, cluster: "KafkaCluster", recorder: NemesisRecorder | None = None, topic: str | None = None,
              coordinated: dict[str, list[str]] | None = None) -> "FaultRunner":
        """Refuses (HarnessError, exit 2) a package whose needs the cluster lacks, before any fault.
        `coordinated`: the workload's transactional ids and groups, which coordinator faults aim at."""
        self.cluster, self.recorder, self.topic = cluster, recorder, topic or self.topic
        capabilities = getattr(cluster, "capabilities", None)
        if capabilities is not None:
            registry.refuse_unserved(registry.registered(self.nemeses), capabilities, "this cluster")
        for nemesis in self.nemeses.values():
            nemesis.setup(cluster, recorder, self.topic)
            nemesis.observer = self.observer  # one run, one memory of its looks (nemesis/observer.py)
            nemesis.stopping = self._stop  # a long operation stops between its steps when the heal begins
            nemesis.coordinated = dict(coordinated or {})
        if self.observe and recorder is not None:
            self.observer.watch_states(cluster, recorder, self.topic)
        return self

    def start(self) -> None:
        """One bounded thread per package, all timed from one start: a slow fault of one package
        (a partition's rules under load) never delays another's, in a run or in its replay."""
        self._began = time.monotonic()
        self.observer.begin()
        for package in self.nemeses:
            thread = threading.Thread(target=self._run, args=(package,), name=f"nemesis-{package}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _run(self, package: str) -> None:
        """Ask the scheduler for this package's next event, wait until it is due, strike; until none is left."""
        while not self._stop.is_set():
            event = self.scheduler.next(package, time.monotonic() - self._began, self.observer)
            if event is None:
                return
            settle = None
            if event.params.get("targets") is not None and event.action == "start":
                settle = self.nemeses[event.package].look_ahead()  # the replay strikes at the recorded moment
            if self._stop.wait(max(0.0, self._began + event.at_s - time.monotonic())):
                return
            if settle is not None:
                settle(LOOK_GRACE_S)
            self.execute(event)

    def execute(self, event: FaultEvent) -> None:
        nemesis = self.nemeses[event.package]
        at_s = round(time.monotonic() - self._began, 3) if self._began else event.at_s
        nemesis.struck_at = None
        try:
            value = nemesis.invoke(event.action, dict(event.params), self._rngs[event.package])
            self.observer.fault(event.package, event.action, value)
            params = nemesis.replay_params(value) if event.action == "start" else {}
            if nemesis.struck_at is not None and self._began:  # the moment it struck, after its look
                at_s = round(nemesis.struck_at - self._began, 3)
            self.executed.append(FaultEvent(at_s, event.package, event.action, params))
        except Exception as exc:  # a fault that cannot be applied now (e.g. no leader mid-election) is recorded, not fatal
            message = f"{event.package} {event.action}: {exc}"
            self.errors.append(message)
            log.warning("nemesis error: %s", message)
            nemesis.record(ERROR, {"package": event.package, "action": event.action, "error": str(exc)[:500]})
            # Kept in the executed schedule, so that a replay tries it again at the same time.
            self.executed.append(FaultEvent(at_s, event.package, event.action, dict(event.params)))

    def __enter__(self) -> "FaultRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        """However the run ends: no fault thread acts after it. A run that failed mid-schedule (the
        cluster vanished) used to keep striking at its dead cluster until the time limit: a sweep
        saw a kill 2 min after its run had failed. Healing is heal_and_stop's job, not this."""
        self._stop.set()
        self._release()
        for thread in self._threads:
            thread.join(timeout=5.0)
        self.observer.end()

    def _release(self) -> None:
        """Wake threads waiting in a scheduler that hands out one decision at a time (guided)."""
        close = getattr(self.scheduler, "close", None)
        if close is not None:
            close()

    def heal_and_stop(self) -> dict[str, Any]:
        """Stop the schedule, undo every fault, wait for full ISRs; return (and record) what happened."""
        self._stop.set()
        self._release()
        deadline = time.monotonic() + 60
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self.observer.end()  # the states of the fault phase only: the heal's are not steered
        finish = getattr(self.scheduler, "finish", None)
        if finish is not None:
            try:
                finish(self.observer)  # e.g. the guided schedule adds what it saw to the store's coverage map
            except Exception as exc:  # a coverage map not written costs the next run a memory, not this run
                self.errors.append(f"scheduler finish: {exc}")
        # Order matters: resume and restart before healing the network, reset clocks last (each
        # package's heal_rank); every package the run holds is torn down, registered or not.
        ranked = registry.heal_order(registry.registered(self.nemeses))
        for name in ranked + [n for n in self.nemeses if n not in ranked]:
            try:
                self.nemeses[name].teardown()
            except Exception as exc:
                self.errors.append(f"heal {name}: {exc}")
        revived = self.revive()
        outcome = self.wait_for_full_isr()
        if revived:
            outcome["revived"] = revived
        if self.recorder is not None:
            self.recorder.nemesis(HEAL, outcome)
        return outcome

    def revive(self) -> dict[str, Any]:
        """Start every Kafka node whose JVM is gone once the packages have undone their faults, as a
        supervisor would; node id -> the new PID and the last FATAL line that says why it died.
        0.10.2.2, 2026-11-25: a kill's restart came 0.3 s after the kill, while ZooKeeper still held
        the dead broker's session; it exited ("A broker is already registered on the path
        /brokers/ids/3") and stayed down for the remaining 230 s, heal and drain included."""
        assert self.cluster is not None
        revived: dict[str, Any] = {}
        for node in [n for n in self.cluster.nodes if n is not self.cluster.zookeeper]:
            if node.pid() is not None:
                continue
            fatal = [line for line in node.log_tail(400).splitlines() if " FATAL " in line or "Exception:" in line]
            try:
                revived[str(node.node_id)] = {"pid": steps.start(node), "why": (fatal[-1] if fatal else "no FATAL line")[:400]}
                log.warning("heal: node %s had no running JVM; started it again (%s)", node.node_id, revived[str(node.node_id)])
            except HarnessError as exc:
                self.errors.append(f"heal: node {node.node_id} did not start again: {exc.message}")
        return revived

    def wait_for_full_isr(self) -> dict[str, Any]:
        """Wait until every broker answers and every broker's own metadata shows every
        broker registered and every replica of every topic in sync. Asking all of them,
        not one: a broker just back from isolation still serves the ISR it knew before. When every
        replica still missing is on a broker that refused to truncate since it last started, it
        stops waiting and names them (`refused`): those replicas cannot rejoin (nemesis/refusals.py)."""
        assert self.cluster is not None
        began = time.monotonic()
        lagging: dict[str, list[int]] = {}
        everyone = sorted(b.node_id for b in self.cluster.brokers)
        refusals, looked = Refusals(self.cluster.brokers), began
        while time.monotonic() - began < self.isr_timeout_s:
            try:
                views = self.cluster.broker_views()
                lagging = {
                    f"{name}-{pid}": sorted(set(p["replicas"]) - set(p["isr"]))
                    for view in views.values()
                    for name, partitions in view.topics.items()
                    for pid, p in partitions.items()
                    if set(p["replicas"]) - set(p["isr"])
                }
                silent = [i for i in everyone if i not in views or list(views[i].brokers) != everyone]
                if silent:
                    lagging["brokers not answering or not registered"] = silent
                if not lagging:
                    return {"isr_full": True, "waited_s": round(time.monotonic() - began, 2), "errors": self.errors}
            except Exception as exc:
                lagging = {"metadata": [str(exc)[:200]]}  # type: ignore[list-item]
            if time.monotonic() - looked >= REFUSAL_LOOK_S:
                looked = time.monotonic()
                refused = refusals.stuck()
                missing = {b for ids in lagging.values() for b in ids}
                if refused and missing and all(isinstance(b, int) and b in refused for b in missing):
                    log.warning("heal: broker(s) %s refused to truncate and cannot rejoin the ISR; not waiting for them",
                                sorted(refused))
                    return {"isr_full": False, "waited_s": round(time.monotonic() - began, 2), "lagging": lagging,
                            "refused": {str(b): line for b, line in sorted(refused.items())}, "errors": self.errors}
            time.sleep(0.5)
        return {"isr_full": False, "waited_s": round(time.monotonic() - began, 2), "lagging": lagging, "errors": self.errors}
