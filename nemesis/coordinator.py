"""`coordinator`: faults aimed at the coordinators that serve the run's own clients (issue 36).

A transactional producer's state lives in one partition of `__transaction_state`, and a consumer
group's in one partition of `__consumer_offsets`; the leader of that partition is the producer's
transaction coordinator or the group's coordinator (harness/cluster/txn_coordinator.py: Kafka's
Utils.abs(id.hashCode) % partitions). A fault on that broker strikes the transaction protocol or
the group protocol in the middle of its work, where a generic `leader` or `controller` target lands
only by chance (one broker in three).

Each start draws, from the workload's ids (its `coordinated`: the txn and eos workloads'
transactional ids, the eos and subscribing queue workloads' group), one id and its coordinator,
and one way to strike it (`--coordinator-faults`):

- `kill`: SIGKILL, started again on stop;
- `pause`: SIGSTOP, SIGCONT on stop;
- `cut`: iptables cuts it from every other Kafka node (clients still reach it), healed on stop.

The events are the ordinary `kill`/`restart`, `pause`/`resume`, `start-partition`/`stop-partition`,
with the roles `txn-coordinator:<id>` or `group-coordinator:<group>` and the internal partition
aimed at, so the report and the checker read them as they read those faults. A workload with no
such id (the queue workload with `assign`) gets a `nemesis-skipped` event that says so.
"""

from __future__ import annotations

import random
import signal
from typing import Any

from harness.cluster.txn_coordinator import GROUP_STATE_TOPIC, TXN_STATE_TOPIC, coordinator_of
from harness.errors import HarnessError
from harness.history.faults import KILL, PARTITION, PAUSE
from nemesis import steps
from nemesis.base import Nemesis
from nemesis.registry import Package, Setting

HOWS = ("kill", "pause", "cut")
TAG = "COORD"
STARTS = {"kill": KILL, "pause": PAUSE, "cut": PARTITION}


class CoordinatorNemesis(Nemesis):
    """One coordinator struck at a time; stop (and teardown) undoes it."""

    name = "coordinator"
    faults = (KILL, PAUSE, PARTITION)
    replay_keys = ("target", "targets", "how", "id", "partition")
    option_names = ("hows",)

    def __init__(self, hows: tuple[str, ...] = HOWS) -> None:
        super().__init__()
        if not hows or set(hows) - set(HOWS):
            raise HarnessError(f"--coordinator-faults {','.join(hows) or '(empty)'}: unknown or empty", hint=f"use any of: {', '.join(HOWS)}")
        self.hows = tuple(hows)
        self.struck: dict[str, Any] | None = None  # {"how", "node"} of the fault in place

    def decide(self, look: Any, rng: random.Random, given: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        ids = [("txn", i) for i in self.coordinated.get("transactional_ids", [])] + \
              [("group", g) for g in self.coordinated.get("groups", [])]
        how = given.get("how") or rng.choice(self.hows)
        if not ids:
            return {"target": "coordinator", "targets": [], "how": how,
                    "why": "the workload names no transactional id or consumer group (txn, eos, or queue with --subscribe do)"}
        kind, ident = rng.choice(ids)
        topic = TXN_STATE_TOPIC if kind == "txn" else GROUP_STATE_TOPIC
        try:
            found = coordinator_of(self.cluster, ident, topic)
        except HarnessError as exc:
            return {"target": f"{kind}-coordinator", "targets": [], "how": how, "id": ident, "why": exc.message}
        return {"target": f"{kind}-coordinator", "targets": [found["coordinator"]], "how": how, "id": ident,
                "partition": f"{topic}-{found['partition']}"}

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        kind = STARTS[plan["how"]]
        nodes = [self.cluster.node(i) for i in plan["targets"]]
        value: dict[str, Any] = {"target": plan["target"], "targets": plan["targets"], "how": plan["how"],
                                 "roles": self.roles(nodes), **{k: plan[k] for k in ("id", "partition") if k in plan}}
        if plan.get("replay") is not None:
            value["replay"] = plan["replay"]
        if self.struck is not None:
            return self.skip(kind.start, value, f"a coordinator fault is already in place on broker {self.struck['node']}")
        if not nodes:
            return self.skip(kind.start, value, plan.get("why") or "no coordinator found")
        node = nodes[0]
        value["roles"].setdefault(str(node.node_id), []).append(f"{plan['target']}:{plan.get('id')}")
        if plan["how"] == "cut":
            others = [n for n in self.nodes if n.node_id != node.node_id]
            value["grudge"] = {str(node.node_id): [n.node_id for n in others], **{str(n.node_id): [node.node_id] for n in others}}
            value["shape"] = "coordinator"
            self.record(kind.start, value)
            for other in others:
                steps.cut(node, other, TAG)
        else:
            value["pids"] = {str(node.node_id): node.pid_on_file()}
            self.record(kind.start, value)
            if plan["how"] == "kill":
                steps.kill(node)
            else:
                node.send_signal(signal.SIGSTOP)
        self.struck = {"how": plan["how"], "node": node.node_id}
        return value

    # start again what a ZooKeeper-era refusal stopped: recorded as the kill's own end
    stop_f = KILL.stop

    def teardown(self) -> dict[str, Any]:
        assert self.cluster is not None
        struck, self.struck = self.struck, None
        if struck is None:
            return {"targets": []}
        node = self.cluster.node(struck["node"])
        how = struck["how"]
        if how == "cut":
            steps.heal(self.nodes, TAG)
            value: dict[str, Any] = {"targets": [n.node_id for n in self.nodes]}
        elif how == "kill":
            value = {"targets": [node.node_id], "pids": {str(node.node_id): steps.start(node, supervised_by=self, why="coordinator")}}
        else:
            value = {"targets": [node.node_id], "pids": {str(node.node_id): node.send_signal(signal.SIGCONT)}}
        self.record(STARTS[how].stop, value)
        return value


COORDINATOR_FAULTS = Setting("coordinator_faults", HOWS, recorded="hows", choices=HOWS,
                             help="How the coordinator package strikes the coordinator of the run's transactional id or group: "
                                  "kill, pause, cut (from every other Kafka node).")
PACKAGES = (
    Package("coordinator", make=lambda s: CoordinatorNemesis(s["coordinator_faults"]), settings=(COORDINATOR_FAULTS,),
            heal_rank=22, requires=frozenset({"signals", "restart", "iptables"}),
            summary="kill, pause or cut the transaction or group coordinator of the run's own clients"),
)
