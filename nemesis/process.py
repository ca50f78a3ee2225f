"""Crash and pause faults on the broker JVM, by PID, inside its container.

`kill`: SIGKILL the JVM (no shutdown hooks, page cache kept: the OS still
flushes what Kafka wrote), restart it on stop with its data directory intact.
`pause`: SIGSTOP the JVM (its sockets stay open but nothing answers), SIGCONT
on stop. Targets: one, leader, controller, minority, majority, all.
"""

from __future__ import annotations

import random
import signal
from typing import Any

from harness.errors import HarnessError
from harness.history.faults import KILL, PAUSE
from nemesis import steps
from nemesis.base import Nemesis
from nemesis.registry import Package, Setting
from nemesis.targets import NODE_TARGETS, choose_nodes, no_target_reason


class ProcessNemesis(Nemesis):
    """Base of kill and pause: remembers its victims so that stop and teardown undo exactly them."""

    option_names = ("targets",)

    start_f = stop_f = ""
    replay_keys = ("target", "targets", "partition")

    def __init__(self, targets: tuple[str, ...] = ("one", "leader", "controller")) -> None:
        super().__init__()
        unknown = [t for t in targets if t not in NODE_TARGETS]
        if unknown:
            raise HarnessError(f"unknown {self.name} target(s) {unknown}", hint=f"use any of: {', '.join(NODE_TARGETS)}")
        self.targets = tuple(targets)
        self.victims: dict[int, int | None] = {}  # node id -> PID hit

    def decide(self, look: Any, rng: random.Random, given: dict[str, Any]) -> dict[str, Any]:
        """Which brokers a start hits: a target drawn from the configured ones (or the recorded one),
        resolved from the look; what was aimed at (a partition) goes with it."""
        assert self.cluster is not None
        target = given.get("target") or rng.choice(self.targets)
        # A partition given with a `leader` start aims it there (the guided schedule's strike).
        aimed: dict[str, Any] = {"partition": given["partition"]} if target == "leader" and given.get("partition") else {}
        chosen = choose_nodes(self.cluster, target, rng, self.topic, aimed, look)
        return {"target": target, "targets": [n.node_id for n in chosen], **aimed}

    def aim(self, plan: dict[str, Any]) -> tuple[list[Any], dict[str, Any], str | None]:
        """The nodes a planned start hits, less those already hit; the event's value so far (target,
        targets, roles, what was aimed at, a replay note); and why nobody is hit, or None. Shared by
        kill, pause, power and disk."""
        assert self.cluster is not None
        look = self.look()
        chosen = [self.cluster.node(i) for i in plan["targets"]]
        nodes = [n for n in chosen if n.node_id not in self.victims]
        aimed = {k: v for k, v in plan.items() if k not in ("target", "targets", "replay", "error")}
        value = {"target": plan["target"], "targets": [n.node_id for n in nodes], "roles": self.roles(nodes), **aimed}
        note = plan.get("replay")
        if note is not None:
            value["replay"] = note
        return nodes, value, None if nodes else self.why_nobody(plan["target"], chosen, note, look, aimed)

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        nodes, value, nobody = self.aim(plan)
        value["pids"] = {str(n.node_id): n.pid_on_file() for n in nodes}  # the PID hit is then checked by hit()
        if nobody is not None:
            return self.skip(self.start_f, value, nobody)
        # Recorded as it strikes, then carried out: the event's time is the fault's start, which a
        # replay repeats exactly (how long the signals take varies by a second or more under load).
        self.record(self.start_f, value)
        for node in nodes:
            self.victims[node.node_id] = self.hit(node)
        return value

    def teardown(self) -> dict[str, Any]:
        assert self.cluster is not None
        undone = {}
        for node_id in sorted(self.victims):
            undone[str(node_id)] = self.undo(self.cluster.node(node_id))
        self.victims.clear()
        value = {"targets": [int(k) for k in undone], "pids": undone}
        self.record(self.stop_f, value)
        return value

    def why_nobody(self, target: str, chosen: list[Any], note: str | None, look: Any, aimed: dict[str, Any]) -> str:
        if chosen:
            return f"every broker chosen ({sorted(n.node_id for n in chosen)}) is already hit by {self.name}"
        if note == "recorded targets":
            return "the replayed event names no broker"
        return no_target_reason(target, look, aimed)

    def hit(self, node: Any) -> int | None:
        raise NotImplementedError

    def undo(self, node: Any) -> int | None:
        raise NotImplementedError


class KillNemesis(ProcessNemesis):
    name, faults = "kill", (KILL,)
    start_f, stop_f = KILL.start, KILL.stop

    def hit(self, node: Any) -> int | None:
        return steps.kill(node)

    def undo(self, node: Any) -> int | None:
        return steps.start(node, supervised_by=self, why="kill")  # a no-op returning the PID if it is already running


class PauseNemesis(ProcessNemesis):
    name, faults = "pause", (PAUSE,)
    start_f, stop_f = PAUSE.start, PAUSE.stop

    def hit(self, node: Any) -> int | None:
        return node.send_signal(signal.SIGSTOP)

    def undo(self, node: Any) -> int | None:
        return node.send_signal(signal.SIGCONT)


# --- the packages (nemesis/registry.py) -----------------------------------------------------------
DB_TARGETS = Setting("db_targets", ("one", "leader", "controller"), recorded="targets", choices=NODE_TARGETS,
                     help=f"Kill/pause targets: {', '.join(NODE_TARGETS[:-1])}, rejoined (just back in an ISR).")
PACKAGES = (
    Package("kill", make=lambda s: KillNemesis(s["db_targets"]), settings=(DB_TARGETS,), heal_rank=20,
            requires=frozenset({"signals", "restart"}), summary="SIGKILL a broker's JVM; start it again on stop"),
    Package("pause", make=lambda s: PauseNemesis(s["db_targets"]), settings=(DB_TARGETS,), heal_rank=10,
            requires=frozenset({"signals"}), summary="SIGSTOP a broker's JVM; SIGCONT on stop"),
)
