"""`membership`: broker replacement under load (issue 36 item 4): a data disk swapped, a broker added
under a new node id, a broker decommissioned. Each start draws one of `--membership-ops` (seeded).

**swap-disk.** An operator replaces a failed data disk: the broker is down, its log directories come
back empty, and it starts again with the same node id. The partitions it held must come back from the
other replicas; if it rejoins an ISR, or is elected, before it has caught up, acknowledged data is
gone (KIP-903's broker epoch in AlterPartition, KIP-858's directory ids guard this). One broker
(`--db-targets`), only while every ISR is full (one disk at a time), SIGKILLed, every partition
directory removed, a seeded 0-5 s, started again: on a combined KRaft node the metadata log and
`meta.properties` stay; on a broker-only node and before KRaft everything goes and a KRaft broker is
formatted again. The package then holds until the broker answers and every ISR is full
(`disk-swap-settled`), so that the next swap never takes the last copy.

**add-broker.** A broker-only node under the next unused node id (4, then 5 ...), empty disk, storage
formatted with the cluster's id, joins the running cluster (harness/cluster/grow.py: a container like
the others, reachable from the host, owned and watched like them), then a seeded choice of the
workload's partitions each get one seeded replica replaced by the new broker (ReassignPartitionsCommand,
the Admin API's alterPartitionReassignments). At most MAX_EXTRA brokers beyond the run's own (2 cores).

**decommission.** Only a broker-only node (`--controllers N`) or an added one: a combined
broker+controller node is a controller voter, and removing a voter is the `quorum` package's business
(skipped, saying so). Refused (skipped with the reason) while an ISR is not full, or when the brokers
left would be fewer than a topic's replication factor (which bounds its min.insync.replicas). On a
seeded coin (`move_first`) its partitions (every topic's) are first moved onto the other brokers;
then it is stopped clean (SIGTERM, controlled shutdown; SIGKILL after 90 s), unregistered
(`kafka-cluster unregister --id N`), and its container removed. Without the move its partitions
name a broker that is gone: they stay so for a seeded 3-15 s, then are moved onto live brokers, as an
operator does after losing a machine. An unregistration Kafka refuses is recorded with Kafka's
answer and the broker is started again.

Bands: `disk-swap` ... `disk-swapped`, `add-broker` ... `broker-added`, `decommission` ...
`decommissioned`, each end with Kafka's answers (tool exit codes and output). The heal restarts a
swapped broker, settles a move in flight (verify, else cancel) and moves any partition that still
names a broker no longer in the cluster onto live ones, so the drain sees every replica whole.
`run --replay` repeats the op, its node ids (the added id too), its partitions and its coins.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from typing import Any

from harness.cluster import grow
from harness.cluster.metadata_views import majority_view
from harness.cluster.node import empty_data_dir
from harness.errors import HarnessError
from harness.history.faults import BROKER_ADD, DECOMMISSION, DISK_SWAP
from nemesis import steps
from nemesis.process import DB_TARGETS, ProcessNemesis
from nemesis.registry import Package, Setting
from nemesis.roll import under_replicated

OPS = ("swap-disk", "add-broker", "decommission")
MOVE_FIRST = ("move", "no-move")
PAUSE_S = (0.0, 5.0)
ORPHAN_S = (3.0, 15.0)
WHOLE_WAIT_S = 180.0
REGISTER_WAIT_S = 120.0
MOVE_WAIT_S = 120.0
CLEAN_STOP_S = 90.0
MAX_EXTRA = 2  # brokers beyond the run's own, at once: each is a JVM on a 2-core machine
WHOLE = "disk-swap-settled"  # a point in time: the swapped broker answers and every ISR is full (or the wait gave up)
KEEP = ("__cluster_metadata-0", "meta.properties", "bootstrap.checkpoint")


def _tail(text: str, n: int = 600) -> str:
    """Kafka's answer without Java stack frames, log4j 1's warnings (3.x tools) or the reassignment
    tool's JSON echo of the assignment before the move (the moves are recorded beside it)."""
    kept = [line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith(("at ", "... ", "{", "log4j:", "Current partition replica assignment", "Save this to use"))]
    return " ".join(" ".join(kept).split())[-n:]


def decommission_refused(victim: int, brokers: list[int], topics: dict[str, dict[int, dict[str, Any]]]) -> str | None:
    """Why decommissioning `victim` must not happen now (None: it may): the brokers left would be fewer
    than the replication factor of a topic (so its replicas, and its min.insync.replicas, could not be whole)."""
    if victim not in brokers:
        return f"broker {victim} is not a broker of this cluster now (brokers {sorted(brokers)})"
    rf, topic = max(((max((len(s["replicas"]) for s in ps.values()), default=0), name) for name, ps in topics.items()),
                    default=(0, ""))
    if len(brokers) - 1 < rf:
        return (f"decommissioning broker {victim} would leave {len(brokers) - 1} brokers, fewer than the replication factor "
                f"{rf} of topic {topic}: its replicas could not be whole again")
    return None


class MembershipNemesis(ProcessNemesis):
    """One operation per start (swap-disk, add-broker, decommission); the heal makes the cluster whole."""

    name = "membership"
    faults = (DISK_SWAP, BROKER_ADD, DECOMMISSION)
    start_f, stop_f = DISK_SWAP.start, DISK_SWAP.stop
    replay_keys = ("op", "target", "targets", "partition", "pause_s", "moves", "move_first", "orphan_s")
    option_names = ("targets", "ops")

    def __init__(self, targets: tuple[str, ...] = ("one", "leader", "controller"), ops: tuple[str, ...] = OPS) -> None:
        super().__init__(targets)
        if not ops or set(ops) - set(OPS):
            raise HarnessError(f"--membership-ops {','.join(ops) or '(empty)'}: unknown or empty", hint=f"use any of: {', '.join(OPS)}")
        self.ops = tuple(ops)
        self.added: list[int] = []  # node ids this package added (some may be decommissioned since)
        self.retired: list[int] = []  # node ids it decommissioned (unregistered, container removed)
        self.in_flight: dict[str, list[int]] | None = None  # a reassignment submitted and not verified done
        self.removed: list[str] = []
        self._busy = threading.Lock()  # held through an operation: the heal waits for it

    # --- deciding ----------------------------------------------------------------------------------
    def plan(self, params: dict[str, Any], rng: Any) -> dict[str, Any]:
        """A replayed add-broker names a node that does not exist yet: its recorded id is kept."""
        if params.get("op") == "add-broker" and params.get("targets"):
            new_id = int(params["targets"][0])
            if any(n.node_id == new_id for n in self.nodes) or new_id in self.retired:
                note = f"recorded new node id {new_id} is taken in this cluster; chose afresh"
                return {**self.decide(self.look(), rng, {k: v for k, v in params.items() if k != "targets"}), "replay": note}
            return {**params, "replay": "recorded targets"}
        return super().plan(params, rng)

    def decide(self, look: Any, rng: random.Random, given: dict[str, Any]) -> dict[str, Any]:
        op = given.get("op") or rng.choice(self.ops)
        if op == "add-broker":
            replicas = dict(getattr(look, "replicas", {}) or {})
            chosen = [p for p in sorted(replicas) if rng.random() < 0.5] or sorted(replicas)[:1]
            moves = given.get("moves") or [{"partition": f"{self.topic}-{p}", "out": rng.choice(replicas[p])} for p in chosen]
            return {"op": op, "target": "new", "targets": [self.next_id()], "moves": moves}
        if op == "decommission":
            move_first = given.get("move_first") or rng.choice(MOVE_FIRST)
            orphan_s = round(given.get("orphan_s") or rng.uniform(*ORPHAN_S), 2)
            candidates = sorted(n.node_id for n in self.brokers if tuple(n.roles) == ("broker",))
            plan = {"op": op, "target": "broker-only", "targets": [rng.choice(candidates)] if candidates else [],
                    "move_first": move_first, "orphan_s": orphan_s}
            if not candidates:
                plan["why"] = (f"every broker ({', '.join(str(n.node_id) for n in self.brokers)}) is also a controller voter "
                               "(combined broker+controller nodes): decommissioning a voter is out of scope, and no added broker is in the "
                               "cluster now")
            return plan
        plan = super().decide(look, rng, given)
        plan["targets"] = plan["targets"][:1]  # one disk at a time
        return {"op": "swap-disk", **plan, "pause_s": round(given.get("pause_s") or rng.uniform(*PAUSE_S), 2)}

    def next_id(self) -> int:
        assert self.cluster is not None
        used = [n.node_id for n in self.nodes if n.node_id < 100] + self.added + self.retired
        return max(used + [getattr(self.cluster, "broker_count", 0)]) + 1

    # --- acting ------------------------------------------------------------------------------------
    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        op = plan.get("op", "swap-disk")  # a run recorded before add and decommission existed swapped disks
        with self._busy:
            if op == "add-broker":
                return self.add(plan)
            if op == "decommission":
                return self.decommission(plan)
            return self.swap(plan)

    def swap(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        nodes, value, nobody = self.aim(plan)
        value["pause_s"] = plan.get("pause_s", 0.0)
        if nobody is not None:
            return self.skip(self.start_f, value, nobody)
        lagging = under_replicated(self.cluster)
        if lagging != {}:  # a second swap now could remove the last copy: no operator does that
            why = "no majority of brokers agrees on the ISRs" if lagging is None else f"under-replicated: {dict(list(lagging.items())[:6])}"
            return self.skip(self.start_f, value, f"the cluster is not whole ({why}); one disk at a time")
        node = nodes[0]
        whole = self.wipes_everything(node)
        value["wiped"] = "everything" if whole else "partition data (the metadata log and meta.properties stay)"
        value["pids"] = {str(node.node_id): node.pid_on_file()}
        self.record(self.start_f, value)
        self.victims[node.node_id] = steps.kill(node)
        code, removed, out = empty_data_dir(node, () if whole else KEEP)
        self.removed = removed[:500] if code == 0 else [f"rm failed: {out[-300:]}"]
        time.sleep(float(plan.get("pause_s") or 0.0))
        self.undo_one(node, whole)
        self.wait_whole(node)
        return value

    def add(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        new_id = int(plan["targets"][0])
        value = {k: v for k, v in plan.items() if k != "why"}
        self.roles([])  # the moment it strikes, for the replay; the new node held no role
        value["roles"] = {str(new_id): ["new broker"]}
        extra = len(self.brokers) - int(getattr(self.cluster, "broker_count", len(self.brokers)))
        why = grow.refuse_growth(self.cluster) or (
            f"{extra} brokers beyond the run's own already run (at most {MAX_EXTRA} on this machine)" if extra >= MAX_EXTRA else None)
        if why is not None:
            return self.skip(BROKER_ADD.start, value, why)
        self.record(BROKER_ADD.start, value)
        began, done = time.monotonic(), {"targets": [new_id]}
        try:
            node = grow.add_broker(self.cluster, new_id)
        except Exception as exc:  # Kafka or Docker refused the node: recorded, not a harness failure
            done.update(added=False, error=_tail(str(exc) + " " + str(getattr(exc, "details", "")), 900))
            self.record(BROKER_ADD.stop, done)
            return {**value, "added": False}
        self.added.append(new_id)
        polled = steps.poll(lambda: grow.registered(self.cluster, new_id), lambda ok: ok or self.stopping.is_set(), REGISTER_WAIT_S, 1.0)
        done.update(added=True, pid=node.pid_on_file(), host_port=node.host_port, registered=polled.value is True,
                    register_s=round(polled.seconds, 2))
        if polled.value is not True:
            done["log"] = _tail(node.log_tail(20), 900)
        elif self.stopping.is_set():
            done["moves_dropped"] = "the fault phase ended"
        else:
            topics = self.topics()
            moves = {}
            for m in plan.get("moves") or []:
                topic, p = m["partition"].rsplit("-", 1)
                now = list(topics.get(topic, {}).get(int(p), {}).get("replicas", []))
                if now and new_id not in now:
                    moves[m["partition"]] = grow.replace(now, m["out"] if m["out"] in now else now[-1], new_id)
            done["reassign"] = self.move(moves, exclude={new_id})
        done["took_s"] = round(time.monotonic() - began, 2)
        self.record(BROKER_ADD.stop, done)
        return {**value, "added": True}

    def decommission(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        value = {k: v for k, v in plan.items() if k != "why"}
        nodes = [n for n in self.brokers if n.node_id in plan["targets"]]
        value["roles"] = {k: ["broker-only", *v] for k, v in self.roles(nodes).items()}
        if not plan["targets"]:
            return self.skip(DECOMMISSION.start, value, plan.get("why") or "no broker-only node")
        victim = int(plan["targets"][0])
        if not nodes or tuple(nodes[0].roles) != ("broker",):
            return self.skip(DECOMMISSION.start, value, f"node {victim} is not a broker-only node of this cluster now")
        if nodes[0].pid() is None:
            return self.skip(DECOMMISSION.start, value, f"broker {victim}'s JVM is not running (another fault holds it down)")
        # A paused broker has a JVM; a kill's or pause's stop would find its node gone (a nemesis-error).
        holders = self.observer.holders(victim, besides=self.name) if self.observer is not None else []
        if holders:
            return self.skip(DECOMMISSION.start, value, f"broker {victim} is held by {', '.join(holders)} now")
        lagging = under_replicated(self.cluster)
        if lagging != {}:
            why = "no majority of brokers agrees on the ISRs" if lagging is None else f"under-replicated: {dict(list(lagging.items())[:6])}"
            return self.skip(DECOMMISSION.start, value, f"the cluster is not whole ({why}); one broker at a time")
        topics = self.topics()
        why = decommission_refused(victim, [b.node_id for b in self.brokers], topics)
        if why is not None:
            return self.skip(DECOMMISSION.start, value, why)
        node = nodes[0]
        value["pids"] = {str(victim): node.pid_on_file()}
        self.record(DECOMMISSION.start, value)
        began, done = time.monotonic(), {"targets": [victim], "move_first": plan["move_first"]}
        live = [b.node_id for b in self.brokers if b.node_id != victim]
        if plan["move_first"] == "move":
            moves, stuck = grow.moves_off(topics, {victim}, live)
            done["moved_away"] = {**self.move(moves, exclude={victim}), **({"stuck": stuck} if stuck else {})}
            if self.stopping.is_set():  # the heal came: the broker stays, as an operator stops mid-way
                done.update(aborted=True, took_s=round(time.monotonic() - began, 2))
                self.record(DECOMMISSION.stop, done)
                return value
        pid, escalated = self.stop_clean(node)
        done["stopped"] = {"pid": pid, "how": "SIGKILL after a clean stop timed out" if escalated else "clean", "s": round(time.monotonic() - began, 2)}
        code, out = grow.unregister(self.live_broker({victim}), victim, self.cluster.distribution.version)
        done["unregister"] = {"exit": code, "answer": _tail(out)}
        if code == 0:
            grow.retire(self.cluster, node)
            self.retired.append(victim)
            if plan["move_first"] != "move":  # its partitions name a broker that is gone, for orphan_s (the heal cuts it short)
                unregistered = time.monotonic()
                self.stopping.wait(float(plan.get("orphan_s") or 0.0))
                done["orphaned_s"] = round(time.monotonic() - unregistered, 2)
                done["moved_after"] = self.repair_moves()
        else:  # Kafka refused: the broker stays registered, and comes back
            done["restarted_pid"] = steps.start(node)
        done["took_s"] = round(time.monotonic() - began, 2)
        self.record(DECOMMISSION.stop, done)
        return {**value, "unregistered": code == 0}

    # --- helpers -----------------------------------------------------------------------------------
    def topics(self) -> dict[str, dict[int, dict[str, Any]]]:
        """Every topic's partitions as a majority of the answering brokers sees them ({} without one)."""
        assert self.cluster is not None
        polled = steps.poll(lambda: majority_view(self.cluster.broker_views()), lambda v: v is not None, 20.0, 1.0)  # type: ignore[union-attr]
        return polled.value.topics if polled.value is not None else {}

    def move(self, moves: dict[str, list[int]], exclude: set[int]) -> dict[str, Any]:
        """Submit `moves` ("topic-p" -> new replicas) and verify until done (bounded); what Kafka said."""
        if not moves:
            return {"moves": {}}
        via = self.live_broker(exclude)
        code, out = grow.reassign(via, moves, self.cluster.distribution.version, "execute")
        step: dict[str, Any] = {"moves": moves, "exit": code, "answer": _tail(out, 400), "via": via.node_id}
        if code == 0:
            self.in_flight = moves
            step.update(grow.wait_reassigned(lambda: self.live_broker(exclude), moves, self.cluster.distribution.version,
                                             MOVE_WAIT_S, self.stopping))
            if step["complete"]:
                self.in_flight = None
        return step

    def repair_moves(self) -> dict[str, Any]:
        """Move every partition that names a broker no longer in the cluster onto live brokers."""
        live = [b.node_id for b in self.brokers]
        topics = self.topics()
        gone = {r for ps in topics.values() for s in ps.values() for r in s["replicas"]} - set(live)
        if not gone:
            return {"moves": {}}
        moves, stuck = grow.moves_off(topics, gone, live)
        return {"gone": sorted(gone), **self.move(moves, exclude=set()), **({"stuck": stuck} if stuck else {})}

    def stop_clean(self, node: Any) -> tuple[int | None, bool]:
        """SIGTERM (controlled shutdown) and a bounded wait for the JVM to exit; SIGKILL after CLEAN_STOP_S."""
        pid = node.send_signal(signal.SIGTERM)
        polled = steps.poll(node.pid, lambda running: running is None, CLEAN_STOP_S, 0.5)
        if polled.ok or pid is None:
            return pid, False
        return steps.kill(node) or pid, True

    def live_broker(self, exclude: set[int]) -> Any:
        """A broker whose JVM runs, to run Kafka's tools in (the run's own brokers first)."""
        for node in sorted(self.brokers, key=lambda n: n.node_id):
            if node.node_id not in exclude and node.pid() is not None:
                return node
        raise HarnessError("no live broker to run Kafka's tools in")

    def wait_whole(self, node: Any) -> None:
        """Hold this package until the swapped broker answers for itself and every ISR is full again, as
        an operator waits before the next disk (bounded): recorded as `whole` with the seconds waited.
        Why: a first sweep swapped brokers 2, 1 and 3 within 33 s at load ~30, while brokers took 30 s
        just to start, so no copy of queue-0 was left (run 20261126T021937-affeae, moved to
        store/ops-superseded): the fault itself destroyed the data, a false alarm against Kafka."""
        assert self.cluster is not None
        def whole() -> bool:
            views = self.cluster.broker_views()  # type: ignore[union-attr]
            return node.node_id in views and under_replicated(self.cluster) == {}
        # The heal ends the wait (it waits for full ISRs itself): a hold past its 60 s join of the fault
        # threads would leave the swap out of config.json's executed schedule (roll.py's step says more).
        polled = steps.poll(lambda: whole(), lambda ok: ok or self.stopping.is_set(), WHOLE_WAIT_S, 1.0)
        self.record(WHOLE, {"targets": [node.node_id], "whole": polled.value is True, "waited_s": round(polled.seconds, 2),
                            **({"ended_by": "heal"} if polled.ok and polled.value is not True else {})})

    def wipes_everything(self, node: Any) -> bool:
        """Everything goes (and a KRaft broker is formatted again) unless the node holds a KRaft
        controller's metadata log, which stays with `meta.properties` (see the module's doc)."""
        assert self.cluster is not None
        return not self.cluster.is_kraft or "controller" not in getattr(node, "roles", ())

    def undo_one(self, node: Any, whole: bool | None = None) -> None:
        assert self.cluster is not None
        whole = self.wipes_everything(node) if whole is None else whole
        fmt = self.cluster.cluster_id if (whole and self.cluster.is_kraft) else None
        pid = node.start_process(format_cluster_id=fmt) if fmt else steps.start(node, supervised_by=self, why="disk swap")
        self.victims.pop(node.node_id, None)
        self.record(self.stop_f, {"targets": [node.node_id], "pids": {str(node.node_id): pid}, "formatted": bool(fmt),
                                  "removed": self.removed})

    def teardown(self) -> dict[str, Any]:
        """Whatever state the operations left: swapped brokers started, a move in flight settled, and
        every partition that names a broker no longer in the cluster moved onto live ones."""
        assert self.cluster is not None
        waited = self._busy.acquire(timeout=REGISTER_WAIT_S + 2 * MOVE_WAIT_S + CLEAN_STOP_S)
        try:
            undone = sorted(self.victims)
            for node_id in undone:
                self.undo_one(self.cluster.node(node_id))
            value: dict[str, Any] = {"targets": undone}
            if not (self.added or self.retired or self.in_flight):
                return value
            if self.in_flight is not None:
                flight, self.in_flight = self.in_flight, None
                settled = grow.wait_reassigned(lambda: self.live_broker(set()), flight, self.cluster.distribution.version, 60.0)
                if not settled["complete"]:
                    code, out = grow.reassign(self.live_broker(set()), flight, self.cluster.distribution.version, "cancel")
                    settled["cancelled"] = {"exit": code, "answer": _tail(out, 400)}
                value["in_flight"] = settled
                self.record(DECOMMISSION.stop if self.retired else BROKER_ADD.stop,
                            {"targets": [], "step": "heal: a move in flight", "moves": flight, **settled})
            repaired = self.repair_moves()
            if repaired.get("moves"):
                value["repaired"] = repaired
                self.record(DECOMMISSION.stop, {"targets": repaired["gone"], "step": "heal", "moved": repaired})
            return value
        finally:
            if waited:
                self._busy.release()

    def hit(self, node: Any) -> int | None:  # not used: apply strikes and undoes in one go
        raise NotImplementedError

    def undo(self, node: Any) -> int | None:
        raise NotImplementedError


MEMBERSHIP_OPS = Setting("membership_ops", OPS, recorded="ops", choices=OPS,
                         help="Membership operations, one drawn per start: swap-disk, add-broker (a new node id), decommission (unregister).")
PACKAGES = (
    # heal_rank 52: after the network heals (partition 50), so that the heal's partition moves can complete.
    Package("membership", make=lambda s: MembershipNemesis(s["db_targets"], s["membership_ops"]), settings=(DB_TARGETS, MEMBERSHIP_OPS),
            heal_rank=52, requires=frozenset({"signals", "restart", "own_data", "kafka_tools"}),
            summary="broker replacement: a data disk swapped, a broker added under a new node id, a broker decommissioned"),
)
