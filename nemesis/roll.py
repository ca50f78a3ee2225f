"""`roll`: a rolling restart under load, as an operator does one (issue 36).

One start restarts every node once, one at a time: dedicated KRaft controllers first (an operator
rolls the quorum before the brokers), then the brokers, in a seeded order. For each node two seeded
coins decide:

- how it stops: `clean` (SIGTERM: Kafka's shutdown hook runs a controlled shutdown, moving the
  leaderships away first) or `hard` (SIGKILL). A clean stop that has not ended after
  `CLEAN_STOP_S` is finished with SIGKILL and recorded as `escalated`: a finding about the
  shutdown, never hidden;
- whether the roll then waits for every ISR of every topic to be full (`isr`, bounded by
  `ISR_WAIT_S`) or only for the JVM to be up again plus a seeded pause of 0-3 s (`no-wait`), as a
  hurried operator's script does. Not waiting is how a roll takes a second replica of a partition
  down while the first is still catching up.

The whole roll is one `roll` ... `rolled` band; each node's time down is a `node-stop` ...
`node-start` band with `op: "roll"` and `how`. A start's value keeps each step's node, coins and
`after_s` (seconds from the roll's start to that node's stop), so `run --replay` stops the same
nodes in the same way at the same offsets (a replay's step never comes early; it comes late only
when the replay's earlier steps took longer than the original's).

The heal (FaultRunner.heal_and_stop) sets `stopping`: a roll in progress finishes the step it is in
and stops there, recorded as `aborted`; teardown starts any node the roll left down.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from typing import Any

from harness.errors import HarnessError
from harness.history.faults import NODE_DOWN, ROLL
from nemesis import steps
from nemesis.base import Nemesis
from nemesis.registry import Package, Setting

STOPS = ("clean", "hard")
WAITS = ("isr", "no-wait")
CLEAN_STOP_S = 90.0  # a 4.x broker's controlled shutdown took 2-12 s here at load ~4 (docs/nemesis.md)
ISR_WAIT_S = 90.0
NO_WAIT_PAUSE_S = (0.0, 3.0)


def under_replicated(cluster: Any) -> dict[str, list[int]] | None:
    """Partitions (of every topic) whose ISR lacks a replica, as a majority of the brokers that answer
    sees them: "topic-p" -> the replicas out of sync. {} when every ISR is full; None when no majority
    agrees (a moment of propagation: not full yet)."""
    from harness.cluster.metadata_views import majority_view

    view = majority_view(cluster.broker_views())
    if view is None:
        return None
    return {f"{name}-{p}": sorted(set(s["replicas"]) - set(s["isr"]))
            for name, partitions in view.topics.items() for p, s in partitions.items()
            if set(s["replicas"]) - set(s["isr"])}


class RollNemesis(Nemesis):
    """A rolling restart per start; a stop only starts what a roll left down."""

    name = "roll"
    faults = (ROLL, NODE_DOWN)
    replay_keys = ("target", "targets", "steps")
    option_names = ("stops", "waits")
    poll_s = 0.5

    def __init__(self, stops: tuple[str, ...] = STOPS, waits: tuple[str, ...] = WAITS) -> None:
        super().__init__()
        for given, known, flag in ((stops, STOPS, "--roll-stops"), (waits, WAITS, "--roll-waits")):
            if not given or set(given) - set(known):
                raise HarnessError(f"{flag} {','.join(given) or '(empty)'}: unknown or empty", hint=f"use any of: {', '.join(known)}")
        self.stops, self.waits = tuple(stops), tuple(waits)
        self.down: dict[int, int | None] = {}  # node id -> PID stopped, not started again yet

    # --- deciding ----------------------------------------------------------------------------------
    def decide(self, look: Any, rng: random.Random, given: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        brokers = [n.node_id for n in self.brokers]
        controllers = [n.node_id for n in self.nodes if n.node_id not in brokers]
        rng.shuffle(controllers)
        rng.shuffle(brokers)
        plan = [{"who": who, "how": rng.choice(self.stops), "wait": rng.choice(self.waits),
                 "pause_s": round(rng.uniform(*NO_WAIT_PAUSE_S), 2)} for who in controllers + brokers]
        return {"target": "all", "targets": controllers + brokers, "steps": plan}

    # --- acting ------------------------------------------------------------------------------------
    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        order = [self.cluster.node(i) for i in plan["targets"]]
        value: dict[str, Any] = {"target": plan["target"], "targets": plan["targets"], "roles": self.roles(order),
                                 "steps": plan["steps"]}
        if plan.get("replay") is not None:
            value["replay"] = plan["replay"]
        self.record(ROLL.start, value)
        anchor = self.struck_at or time.monotonic()
        done: list[dict[str, Any]] = []
        for i, step in enumerate(plan["steps"]):
            if self.stopping.is_set():
                break
            later = plan["steps"][i + 1].get("after_s") if i + 1 < len(plan["steps"]) else None
            done.append(self.step(step, anchor, until=None if later is None else anchor + float(later)))
        aborted = len(done) < len(plan["steps"])
        self.record(ROLL.stop, {"targets": plan["targets"], "steps": done, "aborted": aborted,
                                "took_s": round(time.monotonic() - anchor, 2)})
        return {**value, "steps": done, "aborted": aborted}

    def step(self, step: dict[str, Any], anchor: float, until: float | None = None) -> dict[str, Any]:
        """Stop one node as the step says, start it again, then wait as it says; what happened. `until`
        (a replay: the next step's recorded moment, time.monotonic()) ends the ISR wait then."""
        assert self.cluster is not None
        node = self.cluster.node(int(step["who"]))
        if step.get("after_s") is None:
            roles = self.observe(self.topic).of([node])  # its roles just before it goes down
        else:  # a replay: the recorded moment, never before, and not later for a slow look
            due = anchor + float(step["after_s"])
            roles = self.look_by(due, node)
            steps.wait_until(due)
        done = {"who": node.node_id, "how": step["how"], "wait": step["wait"], "pause_s": step.get("pause_s", 0.0),
                "after_s": round(time.monotonic() - anchor, 3)}
        if roles is None:
            roles, done["roles"] = {str(node.node_id): []}, "unknown: the look was not back by the recorded moment"
        self.record(NODE_DOWN.start, {"targets": [node.node_id], "roles": roles, "op": self.name,
                                      "how": step["how"], "pids": {str(node.node_id): node.pid_on_file()}})
        began = time.monotonic()
        pid, escalated = self.stop_node(node, step["how"])
        done["stop_s"] = round(time.monotonic() - began, 2)
        if escalated:
            done["escalated"] = f"still running {CLEAN_STOP_S:.0f} s after SIGTERM; SIGKILLed"
        self.down[node.node_id] = pid
        new_pid = steps.start(node, supervised_by=self, why="roll")
        if new_pid is not None and new_pid == pid:  # the start saw the old JVM still there: start it again once gone
            steps.poll(node.pid, lambda running: running is None, 10.0, 0.2)
            new_pid = steps.start(node, supervised_by=self, why="roll: the old JVM was still there")
            done["started_twice"] = True
        self.down.pop(node.node_id, None)
        self.record(NODE_DOWN.stop, {"targets": [node.node_id], "op": self.name, "pids": {str(node.node_id): new_pid},
                                     "down_s": round(time.monotonic() - began, 2), **({"escalated": True} if escalated else {})})
        if step["wait"] == "isr":
            # The heal ends the wait: it waits for full ISRs itself, and a wait that outlived its 60 s
            # join of the fault threads left the operation out of config.json's executed schedule, so a
            # replay could not repeat it (helper-13's upgrade run under kill,partition: an 84 s wait).
            # A replay keeps the recorded moments: its wait ends when the next step is due, even with an
            # ISR still short (recorded as `wait_ended_by: replay`), so the next node goes down on time,
            # not when this cluster happens to catch up (a replay's roll steps came +7.3 s late at load ~15
            # before, 2026-11-26).
            polled = steps.poll(lambda: under_replicated(self.cluster),
                                lambda lagging: lagging == {} or self.stopping.is_set(), ISR_WAIT_S, self.poll_s, due=until)
            done["isr_full"], done["waited_s"] = polled.value == {}, round(polled.seconds, 2)
            if polled.value != {}:
                done["lagging"] = polled.value
                if polled.ok:
                    done["wait_ended_by"] = "heal"
                elif until is not None and polled.seconds < ISR_WAIT_S:
                    done["wait_ended_by"] = "replay"
        elif until is None:  # a replay's next step waits for its recorded moment instead
            time.sleep(float(step.get("pause_s") or 0.0))
        return done

    def look_by(self, due: float, node: Any) -> dict[str, list[str]] | None:
        """The node's roles from a look that is back by `due` (time.monotonic()), or None: a look asks
        every broker's metadata, 3 s for one still starting, and a replay's step waiting for it came
        0.6 s after its recorded moment (2026-11-27)."""
        box: dict[str, Any] = {}
        looking = threading.Thread(target=lambda: box.update(look=self.observe(self.topic)), name=f"{self.name}-look", daemon=True)
        looking.start()
        looking.join(timeout=max(0.0, due - time.monotonic()))
        return box["look"].of([node]) if "look" in box else None

    def stop_node(self, node: Any, how: str) -> tuple[int | None, bool]:
        """SIGTERM and a bounded wait for the JVM to exit (clean), or SIGKILL (hard); (PID, escalated)."""
        if how == "hard":
            return steps.kill(node), False
        pid = node.send_signal(signal.SIGTERM)
        polled = steps.poll(node.pid, lambda running: running is None, CLEAN_STOP_S, self.poll_s,
                            tick=lambda: None)
        if polled.ok or pid is None:
            return pid, False
        return steps.kill(node) or pid, True

    # stop_f: what the ZooKeeper-era supervisor records a refused restart's start again as
    stop_f = NODE_DOWN.stop

    def teardown(self) -> dict[str, Any]:
        assert self.cluster is not None
        undone = {str(i): steps.start(self.cluster.node(i), supervised_by=self, why="roll: heal") for i in sorted(self.down)}
        self.down.clear()
        if undone:
            self.record(NODE_DOWN.stop, {"targets": [int(k) for k in undone], "op": self.name, "pids": undone, "step": "heal"})
        return {"targets": [int(k) for k in undone], "pids": undone}


ROLL_STOPS = Setting("roll_stops", STOPS, recorded="stops", choices=STOPS,
                     help="How a rolling restart stops each node, one drawn per node: clean (SIGTERM, controlled shutdown), hard (SIGKILL).")
ROLL_WAITS = Setting("roll_waits", WAITS, recorded="waits", choices=WAITS,
                     help="After each node: isr (wait for every ISR to be full) or no-wait (JVM up, 0-3 s), one drawn per node.")
PACKAGES = (
    Package("roll", make=lambda s: RollNemesis(s["roll_stops"], s["roll_waits"]), settings=(ROLL_STOPS, ROLL_WAITS),
            heal_rank=25, requires=frozenset({"signals", "restart"}),
            summary="a rolling restart: every node stopped (clean or hard) and started again, one at a time"),
)
