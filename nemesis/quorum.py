"""`quorum`: controller quorum changes under load (issue 36, KIP-853's dynamic controller quorum).

A run with this package gets a cluster whose dedicated controllers (`--controllers 3` or more, Kafka
3.9 or later; refused before the run otherwise) are formatted as a dynamic quorum
(harness/cluster/quorum.py): `controller.quorum.bootstrap.servers` instead of the static
`controller.quorum.voters`, and `StorageTool format --initial-controllers id@host:port:dir,...`.
Every other run's cluster is made as before.

One start changes the voter set and changes it back, with Kafka's MetadataQuorumCommand
(`kafka-metadata-quorum`):

1. `describe --status` names the voters and their directory ids (Kafka's answer, recorded);
2. `remove-controller --controller-id N --controller-directory-id D` removes one voter, a dedicated
   controller drawn by the seeded rng, run in a live broker's container. Never the last majority: a
   removal that would leave fewer voters than a majority of the configured controllers (an earlier
   one not added back) is `nemesis-skipped` with the reason;
3. a seeded hold of 2-8 s with the quorum one voter short;
4. `add-controller`, run in the removed controller's own container with its own server.properties
   (the tool reads its node id, its advertised CONTROLLER endpoint and its metadata directory id);
5. `describe --status` and `describe --replication` again: the voter set after, and each replica's lag.

On a seeded coin (`--quorum-kills`) the active controller (the quorum leader, from the controllers'
quorum-state) is SIGKILLed a seeded 0.5-4 s after the removal's or the addition's tool was started
(JVM start included: the request may be in flight or answered; the kill event says which), and started
again on its own timer 2-8 s later.

The band is `remove-voter` ... `voter-added`; the stop holds each tool's exit code and answer. A change
Kafka refuses is recorded with its answer, never as a harness failure; a refused addition leaves the
voter out until a later start or the heal adds it back. The heal starts the controller this package
killed and adds back a voter it removed.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from harness.cluster import leadership, quorum
from harness.cluster.broker_config import NODE_DIR
from harness.errors import HarnessError
from harness.history.faults import KILL, QUORUM, SKIPPED
from nemesis import steps
from nemesis.base import NO_TOOL_NODE, Nemesis
from nemesis.registry import Package, Setting

KILLS = ("none", "kill")
PHASES = ("remove", "add")
HOLD_S = (2.0, 8.0)
KILL_AFTER_S = (0.5, 4.0)
RESTART_AFTER_S = (2.0, 8.0)
BACK_WAIT_S = 30.0  # the removed controller's JVM up again (it may be the one killed) before the addition
# A controller just started answers "There is no finalized MetadataVersion, so direct-to-controller
# communication is not supported" until it has replayed the metadata log: 13 of 31 starts in the 4.4.0
# campaign's first 22 runs were skipped for it. Ask again, a few seconds apart, before skipping.
NOT_READY = "no finalized MetadataVersion"
DESCRIBE_TRIES, DESCRIBE_AGAIN_S = 3, 3.0
# A change's tool runs until Kafka answers: the Admin client gives up after its default.api.timeout.ms
# (60 s) with an answer of its own. A first bound of 60 s cut that answer off (run 20261126T064906-a9a556:
# a removal with the active controller killed 2.15 s into it printed nothing in 60.6 s).
CHANGE_TOOL_S = 150


def run_quorum_tool(node: Any, args: str, timeout_s: int = 60) -> tuple[int, str]:
    """MetadataQuorumCommand inside `node`'s container, from the run's jars; (exit code, Kafka's output)."""
    return leadership.run_tool(node, quorum.QUORUM_TOOL, args, timeout_s)


def _tail(text: str, n: int = 600) -> str:
    """Kafka's answer without the stack frames of a Java exception (its message and causes stay)."""
    kept = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith(("at ", "... "))]
    return " ".join(" ".join(kept).split())[-n:]


def majority(configured: int) -> int:
    return configured // 2 + 1


def removal_refused(who: int, voters: list[int], configured: int) -> str | None:
    """Why removing `who` must not happen now (None: it may): not a voter, or the last majority."""
    if who not in voters:
        return f"controller {who} is not a voter now (voters {sorted(voters)})"
    if len(voters) - 1 < majority(configured):
        return (f"removing controller {who} would leave {len(voters) - 1} of the {configured} configured voters, "
                f"fewer than a majority ({majority(configured)})")
    return None


class QuorumNemesis(steps.KillInFlight, Nemesis):
    name = "quorum"
    faults = (QUORUM, KILL)
    replay_keys = ("target", "targets", "hold_s", "kill", "kill_during", "kill_after_s", "restart_after_s")
    option_names = ("kills",)
    stop_f = KILL.stop

    def __init__(self, kills: tuple[str, ...] = KILLS) -> None:
        super().__init__()
        if not kills or set(kills) - set(KILLS):
            raise HarnessError(f"--quorum-kills {','.join(kills) or '(empty)'}: unknown or empty", hint=f"use any of: {', '.join(KILLS)}")
        self.kills = tuple(kills)
        self.removed: dict[str, Any] | None = None  # the voter removed and not added back: {"id", "directory_id"}
        self.init_kill_in_flight()
        self._changing = threading.Lock()  # held through a change: the heal waits for it before it re-adds

    @property
    def dedicated(self) -> list[int]:
        assert self.cluster is not None
        return sorted(n.node_id for n in getattr(self.cluster, "controllers", ()) if n not in self.cluster.brokers)

    # --- deciding ----------------------------------------------------------------------------------
    def decide(self, look: Any, rng: random.Random, given: dict[str, Any]) -> dict[str, Any]:
        controllers = self.dedicated
        plan: dict[str, Any] = {"target": "voter", "targets": [], "hold_s": round(rng.uniform(*HOLD_S), 2),
                                "kill": rng.choice(self.kills), "kill_during": rng.choice(PHASES),
                                "kill_after_s": round(rng.uniform(*KILL_AFTER_S), 2),
                                "restart_after_s": round(rng.uniform(*RESTART_AFTER_S), 2)}
        if "dynamic_quorum" not in getattr(self.cluster, "capabilities", frozenset()):
            return {**plan, "why": "this cluster's controller quorum is static (controller.quorum.voters): its voters cannot change"}
        if len(controllers) < quorum.DYNAMIC_MIN_CONTROLLERS:
            return {**plan, "why": f"{len(controllers)} dedicated controllers: a voter change needs {quorum.DYNAMIC_MIN_CONTROLLERS} or more"}
        return {**plan, "targets": [rng.choice(controllers)]}

    # --- acting ------------------------------------------------------------------------------------
    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        value = {k: v for k, v in plan.items() if k != "why"}
        value["roles"] = self.roles([self.cluster.node(i) for i in plan["targets"]])
        if not plan["targets"]:
            return self.skip(QUORUM.start, value, plan.get("why") or "no controller to remove")
        if self.tool_node_or_none() is None:  # the tool runs in a broker's container
            return self.skip(QUORUM.start, value, NO_TOOL_NODE)
        if self.removed is not None:  # an earlier addition was refused: add that voter back, remove no other
            skipped = self.skip(QUORUM.start, value, f"controller {self.removed['id']} removed earlier is not a voter again yet; "
                                                     "adding it back instead")
            with self._changing:
                self.add_back("retry")
            return skipped
        who = int(plan["targets"][0])
        code, status = self.describe("--status")
        tries = 1
        while code != 0 and NOT_READY in status and tries < DESCRIBE_TRIES and not self.stopping.wait(DESCRIBE_AGAIN_S):
            code, status = self.describe("--status")
            tries += 1
        value["describe_tries"] = tries
        voters = quorum.parse_voters(status) if code == 0 else None
        if status == NO_TOOL_NODE:  # every broker went down after the look above (seed 33's replay, 2026-11-27)
            return self.skip(QUORUM.start, value, NO_TOOL_NODE)
        if voters is None:
            return self.skip(QUORUM.start, value, f"the quorum did not name its voters (exit {code}, {tries} tries): {_tail(status, 300)}")
        value["voters_before"] = voters
        why = removal_refused(who, [int(v["id"]) for v in voters], len(self.dedicated))  # type: ignore[arg-type]
        if why is not None:
            return self.skip(QUORUM.start, value, why)
        directory = next(str(v["directory_id"]) for v in voters if v["id"] == who)
        value["directory_id"] = directory
        with self._changing:
            return self.change_and_back(who, directory, plan, value)

    def change_and_back(self, who: int, directory: str, plan: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
        """Remove `who`, hold, add it back, each answer recorded; the band's value."""
        self.record(QUORUM.start, value)
        began = time.monotonic()
        kill = plan if plan.get("kill") == "kill" else None
        node = self.tool_node_or_none()
        remove = self.change("remove", node, f"--bootstrap-controller {self.bootstrap()} remove-controller "
                             f"--controller-id {who} --controller-directory-id {directory}", kill) \
            if node is not None else {"exit": None, "answer": NO_TOOL_NODE, "took_s": 0.0, "via": None}
        done: dict[str, Any] = {"targets": [who], "remove": remove}
        if remove["exit"] == 0:
            self.removed = {"id": who, "directory_id": directory}
            self.stopping.wait(float(plan["hold_s"]))  # the heal cuts the hold short; the addition still comes
            done["held_s"] = round(time.monotonic() - began - remove["took_s"], 2)
            done["add"] = self.add(who, kill)
        self.await_restart(float(plan["restart_after_s"]))
        code, after = self.describe("--status")
        done["voters_after"] = quorum.parse_voters(after) if code == 0 else None
        if done["voters_after"] is None:
            done["status_after"] = _tail(after, 300)
        done["replication_after"] = _tail(self.describe("--replication")[1], 900)
        done["took_s"] = round(time.monotonic() - began, 2)
        self.record(QUORUM.stop, done)
        return {**value, "removed": remove["exit"] == 0, "added": done.get("add", {}).get("exit") == 0}

    def add(self, who: int, kill: dict[str, Any] | None) -> dict[str, Any]:
        """add-controller in the removed controller's own container, once its JVM runs; its answer."""
        assert self.cluster is not None
        node = self.cluster.node(who)
        polled = steps.poll(node.pid, lambda pid: pid is not None, BACK_WAIT_S, 0.5)
        step = self.change("add", node, f"--command-config {NODE_DIR}/conf/server.properties "
                                        f"--bootstrap-controller {self.bootstrap()} add-controller", kill)
        if not polled.ok:
            step["jvm_down"] = f"controller {who}'s JVM was not running after {BACK_WAIT_S:.0f} s"
        if step["exit"] == 0:
            self.removed = None
        return step

    def add_back(self, why: str) -> dict[str, Any]:
        """Add back the voter this package removed (a refused addition's retry, or the heal), recorded."""
        if self.removed is None:
            return {}
        who = int(self.removed["id"])
        step = self.add(who, None)
        code, after = self.describe("--status")
        done = {"targets": [who], "add": step, "step": why, "voters_after": quorum.parse_voters(after) if code == 0 else None}
        self.record(QUORUM.stop, done)
        return done

    def change(self, phase: str, node: Any, args: str, kill: dict[str, Any] | None) -> dict[str, Any]:
        """One MetadataQuorumCommand run; with the kill coin for this phase, the active controller is
        SIGKILLed `kill_after_s` after the tool started, while the tool runs."""
        began, box = time.monotonic(), {}
        if kill is None or kill.get("kill_during") != phase:
            code, out = run_quorum_tool(node, args, CHANGE_TOOL_S)
            return {"exit": code, "answer": _tail(out), "took_s": round(time.monotonic() - began, 2), "via": node.node_id}
        thread = threading.Thread(target=lambda: box.update(zip(("code", "out"), run_quorum_tool(node, args, CHANGE_TOOL_S))),
                                  name=f"quorum-{phase}", daemon=True)
        thread.start()
        thread.join(float(kill["kill_after_s"]))
        killed = self.kill_active(phase, float(kill["restart_after_s"]), answered=not thread.is_alive())
        thread.join(CHANGE_TOOL_S + 10.0)
        return {"exit": box.get("code", -1), "answer": _tail(str(box.get("out", f"(the tool did not end within {CHANGE_TOOL_S} s)"))),
                "took_s": round(time.monotonic() - began, 2), "via": node.node_id, "killed": killed}

    def kill_active(self, phase: str, restart_after_s: float, answered: bool) -> int | None:
        """SIGKILL the quorum leader now, started again `restart_after_s` later on a timer of its own."""
        assert self.cluster is not None
        active = self.cluster.active_controller()
        if active is None or self.killed is not None:
            self.record(SKIPPED, {"targets": [], "fault": KILL.start, "step": f"quorum: kill during {phase}",
                                            "skipped": "no active controller found" if active is None else "one is already down"})
            return None
        self.record(KILL.start, {"targets": [active.node_id], "roles": {str(active.node_id): ["controller"]},
                                 "step": f"quorum: kill the active controller during {phase}-controller",
                                 "tool_answered": answered, "pids": {str(active.node_id): active.pid_on_file()}})
        self.kill_for_a_while(active, restart_after_s)
        return active.node_id

    def bootstrap(self) -> str:
        assert self.cluster is not None
        return quorum.bootstrap_servers([self.cluster.node(i).spec for i in self.dedicated])

    def tool_node_or_none(self) -> Any:
        """A broker whose JVM runs, to run the tool in (its container has the jars and the network);
        None while other faults hold every broker down."""
        return next((node for node in self.brokers if node.pid() is not None), None)

    def describe(self, what: str) -> tuple[int, str]:
        """The tool's exit code and output; (-1, NO_TOOL_NODE) when no broker runs to run it in:
        the brokers may all go down between the package's first look and any later call."""
        node = self.tool_node_or_none()
        if node is None:
            return -1, NO_TOOL_NODE
        return run_quorum_tool(node, f"--bootstrap-controller {self.bootstrap()} describe {what}")

    def teardown(self) -> dict[str, Any]:
        # A change in flight ends first (its own addition comes after the hold, which the heal cuts short).
        waited = self._changing.acquire(timeout=2 * CHANGE_TOOL_S + BACK_WAIT_S)
        if waited:
            self._changing.release()
        self.restart_killed()
        value: dict[str, Any] = {"targets": []}
        if self.removed is not None:
            value = {"targets": [self.removed["id"]], "readded": self.add_back("heal")}
        return value


QUORUM_KILLS = Setting("quorum_kills", KILLS, recorded="kills", choices=KILLS,
                       help="Kill the active controller while a voter change is in flight: none, kill, one drawn per change.")
PACKAGES = (
    Package("quorum", make=lambda s: QuorumNemesis(s["quorum_kills"]), settings=(QUORUM_KILLS,), heal_rank=58,
            requires=frozenset({"signals", "restart", "kafka_tools"}), makes=frozenset({"dynamic_quorum"}),
            summary="controller quorum changes (KIP-853): a voter removed and added back; the active controller killed in flight on a coin"),
)
