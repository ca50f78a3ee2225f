"""The steps that the scenarios (harness/scenarios/) and the nemeses share: kill a broker's JVM, start
it again, cut two brokers apart and heal the cut, reorder a partition's replicas, ask for a preferred
election, and wait (bounded) for a leader or anything else the metadata shows.

Each step acts and returns what happened; recording it is the caller's job, because the two record
different events: a scenario numbers its steps and records after each one (harness/scenarios/context.py),
a nemesis records its fault as it strikes, with the roles it saw (nemesis/base.py). Before this module
each side had its own copy of every step, and the copies had drifted (a scenario's wait counted its
tries, a nemesis's did not). Everything here acts through the node (harness/cluster/node.py), iptables
(nemesis/net.py) or Kafka's tools (harness/cluster/leadership.py).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

from harness.cluster import leadership
from nemesis import net, supervisor

if TYPE_CHECKING:
    from harness.cluster import KafkaCluster
    from harness.cluster.node import Node


# --- processes ------------------------------------------------------------------------------------
def kill(node: "Node") -> int | None:
    """SIGKILL the broker's JVM and wait (bounded) until it is gone; the PID killed, None if none ran.
    The JVM is not PID 1 (tini is), so the container, its address and its data directory stay, and
    kill -9 keeps the page cache: the operating system still writes back what Kafka wrote."""
    return node.kill_process()


def start(node: "Node", supervised_by: Any = None, why: str = "") -> int | None:
    """Start the broker's JVM on its data directory (a no-op returning the PID if it runs). A nemesis
    passes itself as `supervised_by`: before KRaft a JVM started inside its old ZooKeeper session
    (6 s) is refused and exits, and the supervisor starts it again, recorded as the nemesis's own
    stop event with `why` (nemesis/supervisor.py). A scenario starts the JVM once, as its script says."""
    if supervised_by is not None:
        return supervisor.restart(supervised_by, node, why)
    return node.start_process()


# --- the network ------------------------------------------------------------------------------------
def cut(a: "Node", b: "Node", tag: str, both_ways: bool = True, port: int | None = None) -> dict[str, list[int]]:
    """`a` drops packets from `b` (and `b` from `a` when both_ways), in iptables chains KH_<tag>_*;
    with `port`, only those bound for that port (a nemesis cuts the replication listener alone, so
    that a KRaft controller listener stays up). Returns the grudge: who drops packets from whom."""
    net.drop_from(a, [b], tag, port=port)
    grudge = {str(a.node_id): [b.node_id]}
    if both_ways:
        net.drop_from(b, [a], tag, port=port)
        grudge[str(b.node_id)] = [a.node_id]
    return grudge


def heal(nodes: Iterable["Node"], tag: str) -> list[int]:
    """Flush the chains of kind `tag` on every node given, all at once (a no-op where there are none);
    their ids. At once because one after another, three heals took up to 1.5 s under load and made
    the partition package's next start late, in a run and in its replay alike."""
    nodes = list(nodes)
    at_once(nodes, lambda node: net.heal(node, tag))
    return [n.node_id for n in nodes]


def at_once(items: list[Any], act: Callable[[Any], Any]) -> None:
    """`act` on every item at once (one thread each; a handful of nodes); the first error raises."""
    if not items:
        return
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        list(pool.map(act, items))


# --- leadership --------------------------------------------------------------------------------------
def reorder_replicas(cluster: "KafkaCluster", version: str, topic: str, partition: int, ids: list[int],
                     via: "Node | None" = None) -> tuple[int, str]:
    """Rewrite the partition's replica order (same replicas, no data moved; the first becomes the
    preferred leader) with Kafka's ReassignPartitionsCommand; its exit code and output. On KRaft and
    from 2.5 the tool runs inside `via`, a live broker (harness/cluster/leadership.py)."""
    return leadership.reorder_replicas(cluster, version, topic, partition, ids, via=via)


def elect_preferred(cluster: "KafkaCluster", version: str, topic: str, partition: int) -> tuple[bool, str]:
    """A preferred leader election of one partition: (the request was accepted, the answer). It moves
    the leadership while the old leader stays in the ISR, unlike a broker's death."""
    return leadership.elect_preferred(cluster, version, topic, partition)


# --- waits -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Polled:
    """How a bounded wait ended: what the last probe returned (a partition's state, a look at the roles,
    a high watermark), whether it was what was waited for, and the seconds since the wait began.
    `leader` is the leader the last probe named, for wait_leader (-1: none; None: no answer)."""

    value: Any
    ok: bool
    seconds: float
    leader: int | None = None


def wait_until(deadline: float) -> None:
    """Sleep until time.monotonic() reaches `deadline` (at once if it has)."""
    time.sleep(max(0.0, deadline - time.monotonic()))


def poll(probe: Callable[[], Any], done: Callable[[Any], bool], timeout_s: float, every_s: float = 0.5,
         tick: Callable[[], None] | None = None, since: float | None = None, due: float | None = None) -> Polled:
    """Call `probe` every `every_s` until `done` holds for what it returns or `timeout_s` has passed
    since `since` (now by default); `tick` runs between probes. It probes at least once, even when the
    time is already up (a wait that began before a slow step still gets one look), and counts its
    tries as well as the time, so a probe that returns at once cannot spin past the bound. `due` (a
    time.monotonic() moment) also ends it, before a probe that, as long as the last one, would end
    after that moment: a metadata probe of a broker still starting takes its 3 s timeout, and a
    replay's roll overshot its next step by 2.6 s waiting on one (2026-11-27)."""
    began = time.monotonic() if since is None else since
    tries = int(timeout_s / every_s) + 2 if every_s > 0 else None
    count = 0
    while True:
        asked = time.monotonic()
        value = probe()
        count += 1
        if done(value):
            return Polled(value, True, time.monotonic() - began)
        now = time.monotonic()
        if now - began > timeout_s or (tries is not None and count >= tries) or (
                due is not None and now + every_s + (now - asked) > due):
            return Polled(value, False, now - began)
        if tick is not None:
            tick()
        time.sleep(every_s)


def wait_leader(probe: Callable[[], Any], leader_of: Callable[[Any], int | None], wanted: int | Callable[[int], bool],
                timeout_s: float, every_s: float = 0.5, since: float | None = None,
                tick: Callable[[], None] | None = None) -> Polled:
    """Poll until the leader that `leader_of(probe())` names is `wanted` (a broker id, or a test of
    one). A scenario probes the partition's state, a nemesis a look of the brokers it has not killed
    (asking a dead broker holds every probe for the full ask timeout, 3 s)."""
    want = (lambda leader: leader == wanted) if isinstance(wanted, int) else wanted
    seen: dict[str, int | None] = {}

    def named(value: Any) -> bool:
        seen["leader"] = leader_of(value)
        return seen["leader"] is not None and want(seen["leader"])

    polled = poll(probe, named, timeout_s, every_s, tick, since)
    return Polled(polled.value, polled.ok, polled.seconds, seen.get("leader"))


def leader_in(look: Any, partition: int | None) -> int | None:
    """The leader a look at the roles (nemesis/targets.py Roles) names for a partition: -1 for none,
    None when the look got no answer."""
    if look is None or look.error is not None:
        return None
    return look.leaders.get(partition, -1) if partition is not None else -1


class KillInFlight:
    """Mixin for an operation's package (reassign, quorum) that SIGKILLs a node in the middle of its
    operation: the node is started again `restart_after_s` later on a timer of its own, so the
    operation's tool never decides when it comes back (reassign's first run: 67 s instead of 7), and
    once only, whoever calls first (the timer, the end of the operation, the heal). The host class has
    `name`, `cluster` and `record`; it calls init_kill_in_flight() in its __init__."""

    name: str
    cluster: Any
    record: Callable[..., Any]

    def init_kill_in_flight(self) -> None:
        import threading

        self.killed: int | None = None
        self._lock = threading.Lock()
        self._timer: Any = None

    def kill_for_a_while(self, node: Any, restart_after_s: float) -> None:
        import threading

        kill(node)
        self.killed = node.node_id
        self._timer = threading.Timer(restart_after_s, self.restart_killed)
        self._timer.daemon = True
        self._timer.start()

    def restart_killed(self) -> None:
        from harness.history.faults import KILL

        with self._lock:
            victim, self.killed = self.killed, None
        if victim is not None:
            pid = start(self.cluster.node(victim), supervised_by=self, why=self.name)
            self.record(KILL.stop, {"targets": [victim], "pids": {str(victim): pid}, "step": f"{self.name}: restart"})

    def await_restart(self, restart_after_s: float) -> None:
        """At the operation's end: the restart at its moment, whatever the tool took, then at once if still due."""
        if self._timer is not None:
            self._timer.join(max(0.0, restart_after_s + 30.0))
        self.restart_killed()
