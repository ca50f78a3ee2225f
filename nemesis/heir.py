"""`heir`: kill a partition's leader, then, before the controller notices, the replica it will elect next.

Why this sequence (KIP-101, "two leaders dying in quick succession"). A ZooKeeper-era controller
counts a SIGKILLed broker as alive until its ZooKeeper session expires: 6 s
(zookeeper.session.timeout.ms), rounded up to ZooKeeper's 3 s expiry ticks. `flap` kills the new
leader only after the cluster names it, and by then the third replica has already refetched from
it (a follower asks within milliseconds of its LeaderAndIsr), so nothing it truncated stays lost.
Here the heir dies *before* it is elected:

1. the leader A dies; the heir H (the first in-sync replica after A in the assignment order, the
   one the controller's leader selector picks) dies `gap_s` later, while A's session still lives;
2. A's session expires and the controller elects H, which it still counts as alive; the third
   replica S becomes H's follower and, before 0.11, truncates its log to its high watermark, which
   trails the leader's by the last fetch round; it cannot refetch from the dead H;
3. H's session expires and the controller elects S, with the truncated log: the records between
   S's high watermark and A's were acknowledged to acks=all producers, and the next writes take
   their offsets.

Leader epochs (0.11+) make S ask the leader where to truncate instead; with the leader dead it
keeps its log, so on 1.1.1 and later the sequence is a plain double failure (measured in
docs/detection.md). Under KRaft, a combined controller quorum of three loses its majority
for the `down_s`.

The heir is chosen among partitions whose ISR holds all three replicas (a survivor S is needed),
preferring one whose heir is not the active controller: a dead controller elects nobody until its
own session expires, and its successor then sees both deaths at once. Both stay down `down_s`
after the heir's kill, then restart (through the supervisor: a ZooKeeper-era broker restarted
inside its old session is refused once). Replay: the value keeps `targets` (leader, heir),
`partition`, `gap_s` and `down_s`.
"""

from __future__ import annotations

import random
import time
from typing import Any

from harness.history.faults import KILL
from nemesis.registry import Package
from nemesis.sequence import KillSequence
from nemesis.targets import Roles, no_target_reason

HEIR_RULE = "the first in-sync replica after the leader in the partition's assignment order"


def heirs(look: Roles) -> dict[int, tuple[int, int]]:
    """partition -> (leader, heir) for each partition whose three replicas are all in sync."""
    out: dict[int, tuple[int, int]] = {}
    for p, leader in look.leaders.items():
        isr, replicas = set(look.isrs.get(p, [])), look.replicas.get(p, [])
        if leader < 0 or len(isr) < 3 or leader not in isr:
            continue
        after = [r for r in replicas if r != leader and r in isr]
        if len(after) >= 2:
            out[p] = (leader, after[0])
    return out


class HeirNemesis(KillSequence):
    """A leader, then its heir before the controller notices; both back after `down_s`."""

    name = "heir"
    option_names = ("gap_range_s", "down_range_s")
    replay_keys = ("target", "targets", "partition", "gap_s", "down_s")

    def __init__(self, gap_range_s: tuple[float, float] = (2.0, 5.0),
                 down_range_s: tuple[float, float] = (6.0, 12.0)) -> None:
        super().__init__()
        # gap: the heir must die before the leader's session expires (4-9 s after the kill, by the
        # ZooKeeper tick it falls in) and expire in a later tick than the leader's, or the
        # controller sees both gone at once and elects the survivor directly.
        # down: past the heir's own expiry (6-9 s), so the survivor is elected before they return.
        self.gap_range_s, self.down_range_s = tuple(gap_range_s), tuple(down_range_s)

    def decide(self, look: Roles, rng: random.Random, given: dict[str, Any]) -> dict[str, Any]:
        """Both victims from the one look (the heir is the replica the controller will pick, known
        before anything dies) and the seeded gap and downtime: nothing is left to resolve later."""
        pair, partition, why = self.choose(look, rng)
        gap, down = round(rng.uniform(*self.gap_range_s), 3), round(rng.uniform(*self.down_range_s), 3)
        plan = {"target": "leader", "targets": pair, "partition": partition, "gap_s": gap, "down_s": down}
        return plan if len(pair) == 2 else {**plan, "why": why}

    def replayed(self, params: dict[str, Any]) -> dict[str, Any]:
        plan = {"target": "leader", "targets": list(params["targets"])[:2], "partition": params.get("partition"),
                "gap_s": float(params.get("gap_s") or 0.0), "down_s": float(params.get("down_s") or 0.0)}
        return plan if len(plan["targets"]) == 2 else {**plan, "why": "the replayed event names no leader and heir"}

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        pair, value = self.opening(plan, "heir: the leader", count=2)
        roles = value["roles"]  # both, as the one look saw them; each kill records its own
        value.update(targets=[n.node_id for n in pair[:1]], roles={str(n.node_id): roles[str(n.node_id)] for n in pair[:1]})
        if len(pair) < 2:
            return self.skip(KILL.start, value, plan["why"])
        leader, heir = pair
        struck = time.monotonic()
        self.kill(leader, value)
        self.wait_until(struck + plan["gap_s"])
        heir_value = {"target": "heir", "targets": [heir.node_id], "roles": {str(heir.node_id): roles[str(heir.node_id)]},
                      "partition": plan["partition"], "heir_of": leader.node_id, "rule": HEIR_RULE,
                      "after_s": round(time.monotonic() - struck, 3),
                      "step": "heir: the replica the controller elects next, before it notices the leader died"}
        self.kill(heir, heir_value)
        self.wait_until(time.monotonic() + plan["down_s"])
        for node in (leader, heir):
            if node.node_id in self.victims:
                self.restart(node, "heir: back after the survivor's election")
        out = {**value, "targets": [leader.node_id, heir.node_id], "roles": roles, "gap_s": plan["gap_s"], "down_s": plan["down_s"]}
        out.pop("step", None)
        return out

    def choose(self, look: Roles, rng: random.Random) -> tuple[list[int], str | None, str]:
        """([leader, heir] of a random eligible partition, its name, why none if empty)."""
        assert self.cluster is not None
        if look.error is not None:
            return [], None, look.error
        candidates = heirs(look)
        if not candidates:
            if not look.leaders:
                return [], None, no_target_reason("leader", look)
            return [], None, (f"no partition of {look.topic} has all three replicas in sync with a leader "
                              f"(ISRs {look.isrs})")
        calm = {p: pair for p, pair in candidates.items() if pair[1] != look.controller}
        pool = calm or candidates
        p = rng.choice(sorted(pool))
        leader, heir = pool[p]
        return [leader, heir], f"{look.topic}-{p}", ""


PACKAGES = (Package("heir", make=lambda s: HeirNemesis(), heal_rank=32, requires=frozenset({"signals", "restart"}),
                    summary="kill the leader, then its heir before the controller notices"),)
