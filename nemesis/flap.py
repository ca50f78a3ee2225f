"""Compound kill sequences around a leader change, the fault sequences the KIPs name.

A single random kill rarely lands in the seconds that matter: KIP-101 scenario 1 needs a follower
that has just truncated to its high watermark to be elected before it refetches; KIP-279 needs two
leader changes back to back. These packages make such sequences likely, without scripting a
scenario: each start is one seeded sequence, recorded as ordinary `kill`/`restart` events (with
targets, roles and the partition aimed at), so the report draws them as kill bands.

`flap`: kill the leader of a random workload partition, wait (polling the brokers left) until the
cluster names a new leader of that partition, wait a seeded 0-`max_delay_s` more, and kill that new
leader too: two leaders dying in quick succession. Followers that truncated on becoming the new
leader's followers (to their high watermark before 0.11) are then the only candidates. With a
seeded coin the first victim restarts right after the second kill, during the second leader
change. Stop restarts whoever is still down.

`rejoin`: kill-and-restart bursts aimed at a follower that has just rejoined a partition's ISR
(target `rejoined`, see nemesis/targets.py; else any in-sync follower, `follower`): 1-3 rounds of
kill, a seeded 0.5-3 s down, restart (each restart truncates the follower's log to its
checkpointed high watermark before 0.11), then a seeded 0-`max_after_s` later the partition's
leader dies: a follower restarting and truncating, then the leader dying right after. Stop
restarts the leader.

Both plan apart from acting (nemesis/sequence.py): the plan holds the first victim, the coins and
the delays, and names the last step by its role ("new-leader", "leader"), which apply resolves when
the step comes. Replay: the start's value keeps the brokers hit (`targets`, in order), the partition
and the measured delays (`after_s`, `down_s`, `up_s`, `restart_first`); a replay's plan names those
brokers, so it hits them with the same delays, whoever leads in the new cluster.
"""

from __future__ import annotations

import random
import time
from typing import Any

from harness.history.faults import KILL
from nemesis.registry import Package
from nemesis.sequence import KillSequence
from nemesis.targets import Roles, choose_nodes, leader_node, no_target_reason


class FlapNemesis(KillSequence):
    """The leader of a partition, then its new leader, within seconds."""

    name = "flap"
    option_names = ("window_s", "max_delay_s")
    replay_keys = ("target", "targets", "partition", "after_s", "restart_first")

    def __init__(self, window_s: float = 20.0, max_delay_s: float = 3.0) -> None:
        super().__init__()
        # ZooKeeper-era brokers notice a SIGKILLed leader when its session expires (6 s by default),
        # KRaft when its heartbeats stop (broker.session.timeout.ms 9 s): the window covers both.
        self.window_s, self.max_delay_s = window_s, max_delay_s

    def decide(self, look: Roles, rng: random.Random, given: dict[str, Any]) -> dict[str, Any]:
        """The first victim, the coin, and the second step by its role: the leader the live brokers
        name next, struck a seeded 0-max_delay_s after it is seen."""
        aimed: dict[str, Any] = {}
        first, why = self.first_leader(look, rng, aimed)
        plan: dict[str, Any] = {"target": "leader", "targets": [first] if first is not None else [], **aimed}
        if first is None:
            return {**plan, "why": why}
        restart_first = bool(given["restart_first"]) if "restart_first" in given else rng.random() < 0.5
        then = {"who": "new-leader", "within_s": self.window_s, "wait_s": round(rng.uniform(0.0, self.max_delay_s), 3)}
        return {**plan, "restart_first": restart_first, "then": then}

    def replayed(self, params: dict[str, Any]) -> dict[str, Any]:
        """The recorded brokers in order, the second struck `after_s` after the first, as it was."""
        targets = list(params["targets"])
        then = ({"who": targets[1], "after_s": float(params["after_s"])} if len(targets) >= 2 and params.get("after_s") is not None
                else {"who": None, "why": "the replayed event names no second broker"})
        plan = {"target": "leader", "targets": targets[:1], "partition": params.get("partition"),
                "restart_first": bool(params.get("restart_first")), "then": then}
        return plan if targets else {**plan, "why": "the replayed event names no broker"}

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        nodes, value = self.opening(plan, "flap: the leader")
        if not nodes:
            return self.skip(KILL.start, value, plan["why"])
        first, partition = nodes[0], plan.get("partition")
        struck = time.monotonic()
        self.kill(first, value)
        second, fields = self.resolve(plan["then"], struck, self.partition_of(partition), set(self.victims), nobody=lambda look, _: (
            f"no new leader of {partition} within {self.window_s} s of the first kill "
            f"(last seen: {None if look is None else look.leaders.get(self.partition_of(partition), look.error)})"))
        then = {"target": "new-leader", "partition": partition, "step": "flap: the new leader", **fields}
        out = {**value, "targets": [first.node_id] + ([second.node_id] if second else []),
               "restart_first": plan["restart_first"], "after_s": fields.get("after_s")}
        out.pop("step", None)
        if second is None:
            self.skip(KILL.start, then, then.pop("why"))
            return out
        self.kill(second, then)
        if plan["restart_first"]:  # back during the election that follows the second kill
            self.restart(first, "flap: the first leader restarts during the next leader change")
        out["roles"] = {**value["roles"], **then["roles"]}
        return out

    def first_leader(self, look: Roles, rng: random.Random, aimed: dict[str, Any]) -> tuple[int | None, str | None]:
        """The leader of a random partition that has another in-sync replica to elect, or why none.
        Measured on 1.1.1 (seed 1): 20 s after a flap, broker 2 led all 8 partitions alone in their
        ISRs; killing it left every partition leaderless, and no second leader came (no candidate)."""
        if look.error is not None:
            return None, look.error
        electable = {p: leader for p, leader in look.leaders.items()
                     if leader >= 0 and len(set(look.isrs.get(p, [])) - {leader}) >= 1}
        if not electable:
            if any(leader >= 0 for leader in look.leaders.values()):
                return None, f"no partition of {look.topic} has an in-sync replica besides its leader (ISRs {look.isrs})"
            node = leader_node(self.cluster, look, rng, aimed)  # no leader at all: no_target_reason says why
            return (node.node_id, None) if node is not None else (None, no_target_reason("leader", look, aimed))
        partition = rng.choice(sorted(electable))
        aimed["partition"] = f"{look.topic}-{partition}"
        return electable[partition], None


class RejoinNemesis(KillSequence):
    """A follower that just rejoined an ISR, bounced, then its partition's leader."""

    name = "rejoin"
    option_names = ("max_after_s", "down_range_s", "up_range_s")
    replay_keys = ("target", "targets", "partition", "down_s", "up_s", "after_s")

    def __init__(self, max_after_s: float = 10.0, down_range_s: tuple[float, float] = (0.5, 3.0),
                 up_range_s: tuple[float, float] = (2.0, 6.0)) -> None:
        super().__init__()
        # Down: shorter than a ZooKeeper session (6 s), so that a 0.10/1.x controller may not notice
        # the follower left; up: long enough to register and start following again (and truncate),
        # not to catch up.
        self.down_range_s, self.up_range_s = tuple(down_range_s), tuple(up_range_s)
        # A restarted broker registers, gets its LeaderAndIsr and truncates within a few seconds
        # of its start; the leader's death is spread over that time and the catch-up after it.
        self.max_after_s = max_after_s

    def decide(self, look: Roles, rng: random.Random, given: dict[str, Any]) -> dict[str, Any]:
        """A rejoined broker (else an in-sync follower), the rounds' seeded downs and ups, and the last
        step by its role: the partition's leader as the cluster names it `after_s` after the last restart."""
        assert self.cluster is not None
        aimed: dict[str, Any] = {}
        target = given.get("target") or "rejoined"
        nodes = choose_nodes(self.cluster, "rejoined", rng, self.topic, aimed, look) if look.error is None else []
        if not nodes and look.error is None:
            target, nodes = "follower", choose_nodes(self.cluster, "follower", rng, self.topic, aimed, look)
        plan: dict[str, Any] = {"target": target, "targets": [n.node_id for n in nodes], **aimed}
        if not nodes:
            return {**plan, "why": look.error or no_target_reason("follower", look, aimed)}
        rounds = rng.randint(1, 3)
        downs = [round(rng.uniform(*self.down_range_s), 3) for _ in range(rounds)]
        ups = [round(rng.uniform(*self.up_range_s), 3) for _ in range(rounds - 1)]
        return {**plan, "down_s": downs, "up_s": ups, "then": {"who": "leader", "after_s": round(rng.uniform(0.0, self.max_after_s), 3)}}

    def replayed(self, params: dict[str, Any]) -> dict[str, Any]:
        """The recorded follower, rounds and leader, the leader struck `after_s` after the last restart."""
        targets, after = list(params["targets"]), float(params.get("after_s") or 0.0)
        then = ({"who": targets[1], "after_s": after} if len(targets) >= 2
                else {"who": None, "after_s": after, "why": "the replayed event names no leader"})
        plan = {"target": params.get("target") or "rejoined", "targets": targets[:1], "partition": params.get("partition"),
                "down_s": [float(d) for d in params.get("down_s") or []], "up_s": [float(u) for u in params.get("up_s") or []],
                "then": then}
        return plan if targets else {**plan, "why": "the replayed event names no broker"}

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        nodes, first_value = self.opening(plan, "rejoin: the follower")
        if not nodes:
            return self.skip(KILL.start, first_value, plan["why"])
        follower, partition, after = nodes[0], plan.get("partition"), plan["then"]["after_s"]
        self.bounce(follower, plan["down_s"], plan["up_s"], first_value)
        out = {**first_value, "targets": [follower.node_id], "down_s": plan["down_s"], "up_s": plan["up_s"], "after_s": after}
        out.pop("step", None)
        leader, fields = self.resolve(plan["then"], time.monotonic(), self.partition_of(partition),
                                      set(self.victims) | {follower.node_id}, nobody=lambda look, seen: (
            (look.error if look is not None else None) or f"{partition} has no leader other than the follower now (leader: {seen})"))
        then = {"target": "leader", "partition": partition, "step": "rejoin: the leader, after the follower's restart",
                "after_s": after, **fields}
        if leader is None:
            self.skip(KILL.start, then, then.pop("why"))
            return out
        self.kill(leader, then)
        # The moment it struck, which a replay repeats: past the seeded delay by the look for the leader
        # (3.1 s on 2026-11-25, while another package held a broker down: a replay struck that early).
        out["after_s"] = then["after_s"]
        out["targets"].append(leader.node_id)
        out["roles"] = {**first_value["roles"], **then["roles"]}
        return out

    def bounce(self, follower: Any, downs: list[float], ups: list[float], first_value: dict[str, Any]) -> None:
        """Kill the follower and restart it `downs[i]` later, each later round `ups[i - 1]` after the last restart."""
        value = first_value
        for i, down in enumerate(downs):
            if i:  # each later round strikes again while the follower is coming back
                self.wait_until(time.monotonic() + (ups[i - 1] if i - 1 < len(ups) else 0.0))
                value = {**first_value, "roles": {str(follower.node_id): []}, "step": f"rejoin: the follower again ({i + 1})"}
            struck = time.monotonic()
            self.kill(follower, value)
            self.wait_until(struck + down)
            self.restart(follower, "rejoin: the follower restarts (truncating to its high watermark before 0.11)")


PACKAGES = (
    Package("flap", make=lambda s: FlapNemesis(), heal_rank=30, requires=frozenset({"signals", "restart"}),
            summary="kill the leader, then the new leader"),
    Package("rejoin", make=lambda s: RejoinNemesis(), heal_rank=31, requires=frozenset({"signals", "restart"}),
            summary="a follower back in the ISR bounced, then the leader"),
)
