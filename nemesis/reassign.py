"""`reassign`: partition reassignment under load (issue 36), with Kafka's ReassignPartitionsCommand
(the Admin API's alterPartitionReassignments, KIP-455) run inside a live broker; before 2.5, on a
ZooKeeper-era cluster, through ZooKeeper (and the preferred election with ZooKeeper's tool), as
operators of those versions did, so that guided search (issue 38) has a planned leader change on
1.1.1, where KIP-279's divergence needs one.

Each start takes one partition of the workload topic and, on seeded coins:

- a **move** (`--reassign-moves`):
  - `shrink`: its replicas shrink to one, a follower that was in sync (the leadership moves onto
    it), then grow back to the original list (redpanda-data/chaos's `reconfigure_313`). With
    acks=all and min.insync.replicas=2 sends are refused NOT_ENOUGH_REPLICAS while it has one
    replica: Kafka's answer, recorded as the clients got it;
  - `reorder`: the same replicas in an order drawn among those whose preferred (first) replica is
    not the leader (the current order among them when the leader is not first), so that the
    leadership moves (a preferred election is then asked for, as an operator would), and the old
    leader may come second or last;
  - `replace`: one replica is replaced by a broker that holds none (only with more brokers than
    replicas; skipped, saying so, otherwise);
- a **throttle** (`--reassign-throttles`: `none` or `throttled`, 100 kB/s of replication), removed
  by the tool's verify once the moves are done;
- a **kill in flight** (`--reassign-kills`: `none` or `kill`): a broker that the move adds or keeps
  is SIGKILLed right after the move is submitted, and started again 2-8 s later.

The band is `reassign` ... `reassigned`; the end event holds each tool run's answer, whether the
reassignment completed within its wait (90 s per step), and how long it took. A refused move is
recorded with Kafka's answer; it is not a harness failure. The heal cancels a reassignment still in
flight (`--cancel`, which also removes its throttle), moves a partition that a cut-short shrink left
on one replica back to its original list (`restored` in the heal event), and starts a broker the
package killed.
"""

from __future__ import annotations

import itertools
import random
import re
import time
from typing import Any

from harness.cluster import leadership
from harness.errors import HarnessError
from harness.history.faults import KILL, REASSIGN
from nemesis import steps
from nemesis.base import NO_TOOL_NODE, Nemesis
from nemesis.registry import Package, Setting

MOVES = ("shrink", "reorder", "replace")
THROTTLES = ("none", "throttled")
KILLS = ("none", "kill")
THROTTLE_BPS = 100_000
WAIT_S = 90.0
RESTORE_WAIT_S = 60.0  # the heal's grow-back: its general ISR wait (up to 120 s) follows
RESTART_AFTER_S = (2.0, 8.0)
FAILED = re.compile(r"Reassignment of partition \S+ failed")
UNKNOWN_BROKER = re.compile(r"non-existent brokerIDs|[Uu]nknown broker")  # a broker of the list is down


def _tail(text: str, n: int = 400) -> str:
    """The tool's output, flattened, its last `n` characters, after its error's message when the tail
    does not hold it: a refusal prints the message first and a stack trace after, and the tail alone
    said only ".verifyBrokerIds(ReassignPartitionsCommand.java:928) at ..." (20261127T060024-5adebf)."""
    flat = " ".join(text.split())
    said = next((" ".join(line.split()) for line in text.splitlines() if re.match(r"\s*(Error|\S*(Exception|Error):)", line)), "")
    return flat[-n:] if not said or said[:200] in flat[-n:] else f"{said[:300]} ... {flat[-n:]}"


class ReassignNemesis(steps.KillInFlight, Nemesis):
    name = "reassign"
    faults = (REASSIGN, KILL)
    replay_keys = ("target", "targets", "partition", "move", "steps", "throttle", "kill", "restart_after_s")
    option_names = ("moves", "throttles", "kills")
    poll_s = 2.0
    stop_f = KILL.stop

    def __init__(self, moves: tuple[str, ...] = MOVES, throttles: tuple[str, ...] = THROTTLES,
                 kills: tuple[str, ...] = KILLS) -> None:
        super().__init__()
        for given, known, flag in ((moves, MOVES, "--reassign-moves"), (throttles, THROTTLES, "--reassign-throttles"),
                                   (kills, KILLS, "--reassign-kills")):
            if not given or set(given) - set(known):
                raise HarnessError(f"{flag} {','.join(given) or '(empty)'}: unknown or empty", hint=f"use any of: {', '.join(known)}")
        self.moves, self.throttles, self.kills = tuple(moves), tuple(throttles), tuple(kills)
        self.in_flight: dict[str, Any] | None = None  # the move submitted and not verified done
        self.owed: dict[str, Any] | None = None  # a grow-back the fault phase's end cut off: the heal's to do
        self.init_kill_in_flight()

    @property
    def version(self) -> str:
        assert self.cluster is not None
        return self.cluster.distribution.version

    # --- deciding ----------------------------------------------------------------------------------
    def decide(self, look: Any, rng: random.Random, given: dict[str, Any]) -> dict[str, Any]:
        # `replace` needs a broker that holds no replica: with three brokers and three replicas there is
        # none, so it is drawn only where it can happen (a first 4.4.0 run skipped one move in three).
        possible = [m for m in self.moves if m != "replace" or len(self.brokers) > len(next(iter(look.replicas.values()), []))]
        move = given.get("move") or rng.choice(possible or self.moves)
        throttle, kill = rng.choice(self.throttles), rng.choice(self.kills)
        restart_after = round(rng.uniform(*RESTART_AFTER_S), 2)
        plan: dict[str, Any] = {"target": "partition", "targets": [], "move": move, "throttle": throttle,
                                "restart_after_s": restart_after}
        if not leadership.at_least(self.version, "2.5") and getattr(self.cluster, "zookeeper", None) is None:
            return {**plan, "why": f"reassignment before Kafka 2.5 goes through ZooKeeper, and this {self.version} cluster has none"}
        if not look.replicas:
            return {**plan, "why": f"the replicas of topic {self.topic} are unknown right now ({look.error or 'no majority'})"}
        partition = rng.choice(sorted(look.replicas))
        now = list(look.replicas[partition])
        leader, isr = look.leaders.get(partition, -1), look.isrs.get(partition, [])
        plan["partition"] = f"{self.topic}-{partition}"
        if move == "shrink":
            followers = [i for i in isr if i != leader]
            if not followers:
                return {**plan, "why": f"partition {partition} has no in-sync follower to shrink onto (ISR {isr})"}
            stages = [[rng.choice(followers)], now]
        elif move == "reorder":
            # Any order of the same replicas whose first (the preferred leader) is not the leader,
            # as an operator's list may be, drawn on a coin. A rotation put the old leader last, so
            # when the new leader failed, leadership never went back to the old one, which is
            # where KIP-279's window opens (1.1.1, 0 finds in 14 runs: docs/guided.md).
            held = leader if leader in now else now[0]
            orders = [list(p) for p in itertools.permutations(now) if p[0] != held]
            stages = [rng.choice(orders)] if orders else [now]
        else:
            spare = sorted({b.node_id for b in self.brokers} - set(now))
            if not spare:
                return {**plan, "why": f"every broker holds a replica of partition {partition} ({now}): nowhere to move one"}
            out = rng.choice(now)
            stages = [[rng.choice(spare) if i == out else i for i in now]]
        victims = sorted(set(stages[0]) | (set(stages[-1]) if len(stages) > 1 else set()))
        victim = rng.choice(victims) if kill == "kill" else None
        return {**plan, "targets": sorted(set(now) | {i for s in stages for i in s}), "from": now, "steps": stages,
                "kill": victim}

    # --- acting ------------------------------------------------------------------------------------
    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        nodes = [self.cluster.node(i) for i in plan["targets"]]
        value = {k: v for k, v in plan.items() if k not in ("why",)}
        value["roles"] = self.roles(nodes)
        if not plan.get("steps"):
            return self.skip(REASSIGN.start, value, plan.get("why") or "nothing to move")
        if self.in_flight is not None:
            return self.skip(REASSIGN.start, value, f"a reassignment of {self.in_flight['partition']} is still in flight")
        if self.any_live(self.spared()) is None:
            return self.skip(REASSIGN.start, value, NO_TOOL_NODE)
        self.record(REASSIGN.start, value)
        began = time.monotonic()
        topic, partition = plan["partition"].rsplit("-", 1)
        throttle = THROTTLE_BPS if plan["throttle"] == "throttled" else None
        done: list[dict[str, Any]] = []
        stopped = None
        for n, ids in enumerate(plan["steps"]):
            if self.stopping.is_set():
                break
            via = self.any_live(self.spared())
            if via is None:  # every broker went down since the start: the heal moves the rest (owed below)
                stopped = NO_TOOL_NODE
                break
            code, out = leadership.reassign(self.cluster, self.version, topic, int(partition), ids, via, "execute", throttle)
            step: dict[str, Any] = {"replicas": ids, "exit": code, "answer": _tail(out)}
            done.append(step)
            if code != 0:  # refused: nothing in flight to wait for (a 1.1.1 run waited 94 s on one)
                break
            self.in_flight = {"partition": plan["partition"], "ids": ids, "throttle": throttle}
            if n == 0 and plan.get("kill") is not None:
                self.kill_in_flight(int(plan["kill"]), float(plan["restart_after_s"]), step)
            step.update(self.wait_done(topic, int(partition), ids, throttle))
        if plan["move"] == "reorder" and done and done[-1]["exit"] == 0:
            accepted, answer = leadership.elect_preferred(self.cluster, self.version, topic, int(partition))
            done[-1]["election"] = answer[-300:]
        grown_back = len(done) == len(plan["steps"]) and done[-1]["exit"] == 0
        if len(plan["steps"]) > 1 and done and done[0]["exit"] == 0 and not grown_back:
            # The fault phase ended between a shrink and its grow-back, or Kafka refused the grow-back
            # (a broker of the list down): the heal puts the replicas back, all brokers up by then.
            self.owed = {"partition": plan["partition"], "ids": plan["steps"][-1]}
        self.await_restart(float(plan["restart_after_s"]))
        complete = bool(done) and all(s.get("complete") for s in done)
        self.record(REASSIGN.stop, {"targets": plan["targets"], "partition": plan["partition"], "steps": done,
                                    "complete": complete, "took_s": round(time.monotonic() - began, 2),
                                    **({"stopped": stopped} if stopped else {})})
        return value

    def kill_in_flight(self, victim: int, restart_after_s: float, step: dict[str, Any]) -> None:
        """SIGKILL `victim` now and start it again `restart_after_s` later on a timer of its own: the
        tool's verify runs (a JVM each, 5-20 s at load 40) must not decide when it comes back (a first
        run's restart came 67 s after its kill instead of 7 s)."""
        node = self.cluster.node(victim)  # type: ignore[union-attr]
        self.record(KILL.start, {"targets": [victim], "roles": {str(victim): ["reassigning"]}, "step": "reassign: kill in flight",
                                 "pids": {str(victim): node.pid_on_file()}})
        step["killed"] = victim
        self.kill_for_a_while(node, restart_after_s)

    def wait_done(self, topic: str, partition: int, ids: list[int], throttle: int | None, wait_s: float = WAIT_S,
                  heed_stop: bool = True) -> dict[str, Any]:
        """Verify until the tool says the move is complete (removing the throttle), bounded by
        `wait_s` and, with `heed_stop`, by the fault phase's end (the heal's own waits go on)."""
        began, answer = time.monotonic(), ""
        while time.monotonic() - began < wait_s and not (heed_stop and self.stopping.is_set()):
            via = self.any_live(self.spared())
            if via is None:  # every broker down for now (other faults): no one to ask; ask again next poll
                answer = NO_TOOL_NODE
                time.sleep(self.poll_s)
                continue
            code, out = leadership.reassign(self.cluster, self.version, topic, partition, ids, via, "verify", throttle)  # type: ignore[arg-type]
            answer = _tail(out, 300)
            if FAILED.search(out):  # through ZooKeeper: the controller gave the move up; verifying again will not help
                self.in_flight = None
                return {"complete": False, "failed": True, "waited_s": round(time.monotonic() - began, 2), "verify": answer}
            # 2.5+: "Reassignment of partition queue-0 is complete."; through ZooKeeper: "... completed successfully"
            if code == 0 and ("is complete" in out or "completed successfully" in out) and "still in progress" not in out:
                self.in_flight = None
                return {"complete": True, "waited_s": round(time.monotonic() - began, 2)}
            time.sleep(self.poll_s)
        return {"complete": False, "waited_s": round(time.monotonic() - began, 2), "verify": answer}

    def spared(self) -> set[int]:
        return {self.killed} if self.killed is not None else set()

    def any_live(self, exclude: set[int]) -> Any | None:
        """A broker whose JVM runs, to run the tool in (not one this package killed), or None."""
        return next((n for n in self.brokers if n.node_id not in exclude and n.pid() is not None), None)

    def live_broker(self, exclude: set[int]) -> Any:
        node = self.any_live(exclude)
        if node is None:
            raise HarnessError(NO_TOOL_NODE)
        return node

    def teardown(self) -> dict[str, Any]:
        assert self.cluster is not None
        value: dict[str, Any] = {"targets": []}
        self.restart_killed()
        if self.in_flight is not None and not leadership.at_least(self.version, "2.6"):
            # No --cancel before 2.6: let it finish instead (verify also removes its throttle), bounded.
            flight, self.in_flight = self.in_flight, None
            topic, partition = flight["partition"].rsplit("-", 1)
            value["finished"] = {"partition": flight["partition"],
                                 **self.wait_done(topic, int(partition), flight["ids"], flight["throttle"], RESTORE_WAIT_S, heed_stop=False)}
        elif self.in_flight is not None:  # cancel it: the drain should see a settled assignment, and no throttle
            flight, self.in_flight = self.in_flight, None
            topic, partition = flight["partition"].rsplit("-", 1)
            try:
                code, out = leadership.reassign(self.cluster, self.version, topic, int(partition), flight["ids"],
                                                self.live_broker(set()), "cancel")
                value["cancelled"] = {"partition": flight["partition"], "exit": code, "answer": _tail(out)}
            except (HarnessError, ValueError) as exc:
                value["cancelled"] = {"partition": flight["partition"], "error": str(exc)[:300]}
        if self.owed is not None:
            owed, self.owed = self.owed, None
            value["restored"] = self.restore(owed)
        if "cancelled" in value or "restored" in value or "finished" in value:
            self.record(REASSIGN.stop, {**value, "step": "heal"})
        return value

    def restore(self, owed: dict[str, Any]) -> dict[str, Any]:
        """Move a partition that a cut-short shrink left on one replica back to its original list,
        and verify (bounded: the fault phase's stop no longer ends this wait). A 4.4.0 run left
        queue-5 on one replica, then leaderless, through its drain (20261127T022341-3dc2f3): the
        drain saw no whole cluster. Kafka's answer is recorded either way."""
        topic, partition = owed["partition"].rsplit("-", 1)
        out: dict[str, Any] = {"partition": owed["partition"], "replicas": owed["ids"]}
        try:
            began, tries = time.monotonic(), 0
            while True:  # a broker of the list restarted by the heal may not be registered yet: ask again, bounded
                tries += 1
                code, answer = leadership.reassign(self.cluster, self.version, topic, int(partition), owed["ids"],
                                                   self.live_broker(set()), "execute")
                if code == 0 or not UNKNOWN_BROKER.search(answer) or time.monotonic() - began > RESTORE_WAIT_S:
                    break
                time.sleep(self.poll_s)
            out.update(exit=code, answer=_tail(answer), complete=False, **({"tries": tries} if tries > 1 else {}))
            if code == 0:
                out.update(self.wait_done(topic, int(partition), owed["ids"], None, RESTORE_WAIT_S, heed_stop=False))
        except (HarnessError, ValueError) as exc:
            out["error"] = str(exc)[:300]
        return out


REASSIGN_MOVES = Setting("reassign_moves", MOVES, recorded="moves", choices=MOVES,
                         help="Reassignment moves: shrink (to one in-sync follower, then back), reorder (the preferred leader changes), replace (one replica onto a broker without one).")
REASSIGN_THROTTLES = Setting("reassign_throttles", THROTTLES, recorded="throttles", choices=THROTTLES,
                             help="Replication throttle during a reassignment: none, throttled (100 kB/s), one drawn per move.")
REASSIGN_KILLS = Setting("reassign_kills", KILLS, recorded="kills", choices=KILLS,
                         help="Kill a broker the move involves while it is in flight: none, kill, one drawn per move.")
PACKAGES = (
    Package("reassign", make=lambda s: ReassignNemesis(s["reassign_moves"], s["reassign_throttles"], s["reassign_kills"]),
            settings=(REASSIGN_MOVES, REASSIGN_THROTTLES, REASSIGN_KILLS), heal_rank=24,
            requires=frozenset({"signals", "restart", "kafka_tools"}),
            summary="partition reassignment under load: shrink to one replica and back, reorder, replace; throttled and killed in flight on coins"),
)
