"""The nemesis protocol (Jepsen's): setup, invoke, teardown; every action recorded.

A nemesis acts on a running `KafkaCluster` and writes each fault and heal
into the run's history as a `"nemesis"` event, naming its targets with their
roles at that moment. Without a recorder it only logs.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Protocol

from harness.history.faults import SKIPPED, FaultKind

if TYPE_CHECKING:
    from harness.cluster import KafkaCluster
    from harness.cluster.node import Node
    from nemesis.observer import Observer
    from nemesis.targets import Roles

log = logging.getLogger("nemesis")


# Every broker's JVM down at once (kills, power cuts and rolls of other packages): a package whose
# Kafka tool runs in a broker's container skips its start with this reason instead of raising (13
# "nemesis errors" in the 4.4.0 campaign's first 18 runs were this: 10 in quorum, 3 in reassign).
NO_TOOL_NODE = "no broker's JVM runs to run Kafka's tools in (other faults hold every broker down)"

class NemesisRecorder(Protocol):
    def nemesis(self, f: str, value: dict[str, Any]) -> None: ...


class Nemesis:
    """Base class: holds the cluster and recorder; subclasses implement invoke and teardown.

    `faults` declares the fault kinds it records (harness.history.faults), as a Jepsen nemesis
    declares its fs: the report's timeline, the docs and the tests read them from there.
    `replay_keys` are the fields of an invoke's value that, given back as params, make a
    replay hit exactly the same nodes in the same way (`run --replay`)."""

    name = "nemesis"
    faults: tuple[FaultKind, ...] = ()
    replay_keys: tuple[str, ...] = ("target", "targets")

    def __init__(self) -> None:
        self.cluster: KafkaCluster | None = None
        self.recorder: NemesisRecorder | None = None
        self.topic: str | None = None
        self.struck_at: float | None = None  # when the last fault struck (time.monotonic())
        # The look the next fault strikes by (taken by look(), or ahead of time by a replay's
        # look_ahead), and why the last one was not back in time (recorded as roles_unseen).
        self._looked: Roles | None = None
        self._unseen: str | None = None
        # The run's observer, shared by its nemeses (FaultRunner.setup gives it); a nemesis used
        # alone gets one of its own on its first look.
        self.observer: Observer | None = None
        # Set when the fault phase ends (FaultRunner gives its own stop event): a long operation
        # (a rolling restart takes minutes) finishes the step it is in and goes no further.
        self.stopping = threading.Event()
        # The workload's transactional ids and consumer groups (FaultRunner.setup gives them), for
        # the faults that aim at their coordinators: {"transactional_ids": [...], "groups": [...]}.
        self.coordinated: dict[str, list[str]] = {}

    def setup(self, cluster: "KafkaCluster", recorder: NemesisRecorder | None = None, topic: str | None = None) -> "Nemesis":
        self.cluster, self.recorder, self.topic = cluster, recorder, topic
        return self

    def invoke(self, action: str, params: dict[str, Any], rng: Any) -> dict[str, Any]:
        """Perform `action` ("start" or "stop") with seeded parameters; return what was done.
        Deciding apart from acting (Jepsen's generator and nemesis): a start is `plan`ned, then
        `apply`d; a stop undoes (teardown). Every package works this way; the kill sequences'
        plans name their later steps by role (nemesis/sequence.py)."""
        if action != "start":
            return self.teardown()
        return self.apply(self.plan(params, rng))

    def plan(self, params: dict[str, Any], rng: Any) -> dict[str, Any]:
        """The parameters of the next start, decided before anything acts: the recorded ones when a
        replay gives them back (their nodes still exist), else `decide(look, rng, params)` from one
        look. A plan's "replay" says which it was; the rest is what `replay_params` records."""
        if params.get("targets") is not None:
            nodes, note = self.replay_nodes(params)
            if nodes is not None:
                return {**self.replayed(params), "replay": note}
            return {**self.decide(self.look(), rng, params), "replay": note}
        return self.decide(self.look(), rng, params)

    def replayed(self, params: dict[str, Any]) -> dict[str, Any]:
        """A replay's recorded parameters as a plan: as they are, unless a nemesis records its start
        in another shape than it plans it (a kill sequence's plan names its later steps)."""
        return params

    def decide(self, look: "Roles", rng: Any, given: dict[str, Any]) -> dict[str, Any]:
        """A fresh plan from one look and the seeded rng; `given` holds fields a replay recorded."""
        raise NotImplementedError

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        """Carry out a plan; return the event's value (what was done, to whom, with their roles)."""
        raise NotImplementedError

    def teardown(self) -> dict[str, Any]:
        """Undo every fault this nemesis may have left; safe to call at any time."""
        raise NotImplementedError

    def options(self) -> dict[str, Any]:
        """The settings that shape this nemesis's faults (for config.json)."""
        return {k: v for k, v in vars(self).items() if k in self.option_names}

    option_names: tuple[str, ...] = ()

    # --- helpers shared by the fault kinds --------------------------------------
    def record(self, f: str, value: dict[str, Any]) -> None:
        if "roles" in value and self._unseen:  # the replay struck before its look was back
            value = {**value, "roles_unseen": self._unseen}
        log.info("%s %s", f, value)
        if self.recorder is not None:
            self.recorder.nemesis(f, value)

    def skip(self, fault: str, value: dict[str, Any], reason: str) -> dict[str, Any]:
        """Record a fault that hit nobody as skipped, with why (harness.history.faults.SKIPPED),
        instead of a start with empty targets that would look like a fault that happened. Its
        value keeps the replay keys (targets: []), so that a replay skips it too."""
        value = {**value, "fault": fault, "skipped": reason}
        log.warning("%s skipped: %s", fault, reason)
        self.record(SKIPPED, value)
        return value

    def replay_params(self, value: dict[str, Any]) -> dict[str, Any]:
        """What to record in the schedule so that a replay repeats this invoke exactly."""
        return {k: value[k] for k in self.replay_keys if k in value}

    def replay_nodes(self, params: dict[str, Any]) -> tuple[list["Node"] | None, str | None]:
        """The nodes a replayed event names, and a note. (None, note) means: choose afresh,
        either because nothing was recorded or because a recorded node no longer exists."""
        ids = params.get("targets")
        if ids is None:
            return None, None
        known = {n.node_id: n for n in self.nodes}  # a dedicated controller is a target too (--controllers)
        missing = [i for i in ids if i not in known]
        if missing:
            note = f"recorded target(s) {missing} do not exist in this cluster; chose afresh"
            log.warning("%s replay: %s", self.name, note)
            return None, note
        return [known[i] for i in ids], "recorded targets"

    @property
    def brokers(self) -> list["Node"]:
        assert self.cluster is not None, "setup() first"
        return list(self.cluster.brokers)

    @property
    def nodes(self) -> list["Node"]:
        """Every Kafka node: the brokers, then dedicated KRaft controllers (--controllers), which a
        `controller` target strikes. A heal undoes its fault on all of them: healing the brokers
        alone once left a cut controller's rules in place (2026-11-25: a broker restarted during the
        cut could not register for 60 s after the heal and exited)."""
        assert self.cluster is not None, "setup() first"
        controllers = getattr(self.cluster, "controllers", ())  # a stand-in cluster may have none to name
        return [*self.cluster.brokers, *(c for c in controllers if c not in self.cluster.brokers)]

    def look(self) -> "Roles":
        """One look at who holds which role, taken before a fault strikes: it chooses the targets
        and is what `roles()` then records. A replay takes it ahead of time (the runner calls
        `look()` before waiting for the event), so that it strikes at the recorded moment."""
        assert self.cluster is not None
        if self._looked is None:
            self._looked = self.observe(self.topic)
        return self._looked

    def observe(self, topic: str | None, views: Callable[[], Any] | None = None) -> "Roles":
        """A fresh look at the roles through the run's observer (nemesis/observer.py)."""
        from nemesis.observer import Observer

        assert self.cluster is not None
        if self.observer is None:
            self.observer = Observer()
        return self.observer.look(self.cluster, topic, views)

    def roles(self, nodes: list["Node"]) -> dict[str, list[str]]:
        """Each node's roles as the fault's look saw them: "controller", "leader:<topic>-<p>".
        Called as the fault strikes: its moment is `struck_at` (the runner records it as at_s)."""
        looked = self.look()
        self._looked = None  # one look per fault
        self._unseen = looked.unseen
        self.struck_at = time.monotonic()
        return looked.of(nodes)

    def look_ahead(self) -> Callable[[float], None]:
        """Begin this fault's look now, on its own thread: for a replay, whose targets are recorded,
        so that its look only records their roles. `settle(wait_s)`, called at the recorded moment,
        waits at most `wait_s` more for it; a look not back by then gives way to an empty one that
        says so (`roles_unseen` in the event), and the replay strikes on time. CI saw why: a look
        that began as another package's kill struck waited 3 s for the dead broker's answer, and
        its partition struck 1.1 s late, after that kill instead of before it."""
        from nemesis.targets import Roles

        assert self.cluster is not None
        topic, began, box = self.topic, time.monotonic(), {}
        thread = threading.Thread(target=lambda: box.setdefault("roles", self.observe(topic)),
                                  name=f"look-{self.name}", daemon=True)
        thread.start()

        def settle(wait_s: float) -> None:
            thread.join(max(0.0, wait_s))
            late = f"the look of the roles was not back at the recorded moment ({time.monotonic() - began:.1f} s after it began)"
            self._looked = box.get("roles") or Roles(topic=topic, error=late, unseen=late)
        return settle
