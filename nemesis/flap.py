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

Replay: the start's value keeps the brokers hit (`targets`, in order), the partition and the
measured delays (`after_s`, `down_s`, `restart_first`); a replay hits the same brokers with the
same delays, whoever leads in the new cluster.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from harness.history.faults import KILL
from nemesis import supervisor
from nemesis.base import Nemesis
from nemesis.registry import Package, Setting
from nemesis.targets import Roles, choose_nodes, leader_node, no_target_reason

log = logging.getLogger("nemesis")


class KillSequence(Nemesis):
    """Base of flap and rejoin: kills and restarts recorded one by one, victims restarted on stop."""

    faults = (KILL,)
    stop_f = KILL.stop  # what the supervisor records a refused restart's start again as
    poll_s = 0.5

    def __init__(self) -> None:
        super().__init__()
        self.victims: dict[int, int | None] = {}  # node id -> PID killed

    def kill(self, node: Any, value: dict[str, Any]) -> None:
        value["pids"] = {str(node.node_id): node.pid_on_file()}
        self.record(KILL.start, value)  # recorded as it strikes, as the kill package does
        self.victims[node.node_id] = node.kill_process()

    def restart(self, node: Any, step: str) -> None:
        pid = supervisor.restart(self, node, step)
        self.victims.pop(node.node_id, None)
        self.record(KILL.stop, {"targets": [node.node_id], "pids": {str(node.node_id): pid}, "step": step})

    def teardown(self) -> dict[str, Any]:
        assert self.cluster is not None
        undone = {str(i): supervisor.restart(self, self.cluster.node(i), f"{self.name}: heal") for i in sorted(self.victims)}
        self.victims.clear()
        value = {"targets": [int(k) for k in undone], "pids": undone}
        if undone:  # a restart naming nobody would end every open kill band, the kill package's too
            self.record(KILL.stop, value)
        return value

    def live_views(self) -> Any:
        """Every broker not held down by this nemesis, asked for its metadata: a killed broker's
        bootstrap would hold each poll for the full ask timeout."""
        from harness.cluster.metadata_views import collect_views

        assert self.cluster is not None
        live = {b.node_id: f"127.0.0.1:{b.host_port}" for b in self.brokers if b.node_id not in self.victims}
        return collect_views(live, timeout_s=2.0, rounds=2)

    def fresh_look(self) -> Roles:
        assert self.cluster is not None
        return self.observe(self.topic, views=self.live_views)

    def wait_until(self, deadline: float) -> None:
        time.sleep(max(0.0, deadline - time.monotonic()))

    def recorded(self, params: dict[str, Any]) -> list[Any] | None:
        nodes, _ = self.replay_nodes(params)
        return nodes

    @staticmethod
    def partition_of(aimed: str | None) -> int | None:
        return int(aimed.rsplit("-", 1)[1]) if aimed else None


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

    def invoke(self, action: str, params: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        if action != "start":
            return self.teardown()
        assert self.cluster is not None
        look, aimed = self.look(), {}
        self.why: str | None = None
        replayed = self.recorded(params)
        if replayed is not None:
            first, aimed = (replayed[0] if replayed else None), {"partition": params.get("partition")}
        else:
            first = self.first_leader(look, rng, aimed)
        value: dict[str, Any] = {"target": "leader", "targets": [first.node_id] if first else [],
                                 "roles": self.roles([first] if first else []), **aimed, "step": "flap: the leader"}
        if replayed is not None:
            value["replay"] = "recorded targets"
        if first is None:
            reason = ("the replayed event names no broker" if replayed is not None
                      else look.error or self.why or no_target_reason("leader", look, aimed))
            return self.skip(KILL.start, value, reason)
        restart_first = bool(params["restart_first"]) if "restart_first" in params else rng.random() < 0.5
        struck = time.monotonic()
        self.kill(first, value)
        partition = self.partition_of(aimed.get("partition"))
        second, second_value = self.second(first, partition, params, replayed, struck, rng)
        out = {**value, "targets": [first.node_id] + ([second.node_id] if second else []),
               "restart_first": restart_first, "after_s": second_value.get("after_s")}
        out.pop("step", None)
        if second is None:
            self.skip(KILL.start, second_value, second_value.pop("why"))
            return out
        self.kill(second, second_value)
        if restart_first:  # back during the election that follows the second kill
            self.restart(first, "flap: the first leader restarts during the next leader change")
        out["roles"] = {**value["roles"], **second_value["roles"]}
        return out

    def first_leader(self, look: Roles, rng: random.Random, aimed: dict[str, Any]) -> Any:
        """The leader of a random partition that has another in-sync replica to elect. Measured on
        1.1.1 (seed 1): 20 s after a flap, broker 2 led all 8 partitions alone in their ISRs; killing
        it left every partition leaderless, and no second leader came (no candidate, not a miss)."""
        if look.error is not None:
            return None
        electable = {p: leader for p, leader in look.leaders.items()
                     if leader >= 0 and len(set(look.isrs.get(p, [])) - {leader}) >= 1}
        if not electable:
            if any(leader >= 0 for leader in look.leaders.values()):
                self.why = f"no partition of {look.topic} has an in-sync replica besides its leader (ISRs {look.isrs})"
                return None
            return leader_node(self.cluster, look, rng, aimed)  # no leader at all: no_target_reason says why
        partition = rng.choice(sorted(electable))
        aimed["partition"] = f"{look.topic}-{partition}"
        assert self.cluster is not None
        return self.cluster.node(electable[partition])

    def second(self, first: Any, partition: int | None, params: dict[str, Any], replayed: list[Any] | None,
               struck: float, rng: random.Random) -> tuple[Any, dict[str, Any]]:
        """The partition's next leader (None, with `why` in the value, if none came within the window)
        and the value of its kill, at the moment it should die."""
        value: dict[str, Any] = {"target": "new-leader", "targets": [], "partition": params.get("partition"),
                                 "step": "flap: the new leader"}
        if replayed is not None:
            if len(replayed) < 2 or params.get("after_s") is None:
                return None, {**value, "roles": {}, "why": "the replayed event names no second broker"}
            self.wait_until(struck + float(params["after_s"]))
            node = replayed[1]
            return node, {**value, "targets": [node.node_id], "roles": {str(node.node_id): []},
                          "after_s": round(time.monotonic() - struck, 3), "replay": "recorded targets"}
        assert self.topic is not None and partition is not None and self.cluster is not None
        value["partition"] = f"{self.topic}-{partition}"
        deadline, look = struck + self.window_s, None
        while time.monotonic() < deadline:
            look = self.fresh_look()
            leader = look.leaders.get(partition, -1)
            if leader >= 0 and leader not in self.victims:
                self.wait_until(time.monotonic() + rng.uniform(0.0, self.max_delay_s))
                node = self.cluster.node(leader)
                return node, {**value, "targets": [leader], "roles": look.of([node]),
                              "after_s": round(time.monotonic() - struck, 3)}
            time.sleep(self.poll_s)
        seen = None if look is None else look.leaders.get(partition, look.error)
        return None, {**value, "roles": {}, "why": f"no new leader of {value['partition']} within {self.window_s} s "
                                                   f"of the first kill (last seen: {seen})"}


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

    def invoke(self, action: str, params: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        if action != "start":
            return self.teardown()
        assert self.cluster is not None
        look, aimed = self.look(), {}
        replayed = self.recorded(params)
        target = params.get("target") or "rejoined"
        if replayed is not None:
            nodes, aimed = replayed[:1], {"partition": params.get("partition")}
        else:
            nodes = choose_nodes(self.cluster, "rejoined", rng, self.topic, aimed, look) if look.error is None else []
            if not nodes and look.error is None:
                target, nodes = "follower", choose_nodes(self.cluster, "follower", rng, self.topic, aimed, look)
        value: dict[str, Any] = {"target": target, "targets": [n.node_id for n in nodes], "roles": self.roles(nodes),
                                 **aimed, "step": "rejoin: the follower"}
        if replayed is not None:
            value["replay"] = "recorded targets"
        if not nodes:
            reason = ("the replayed event names no broker" if replayed is not None
                      else look.error or no_target_reason("follower", look, aimed))
            return self.skip(KILL.start, value, reason)
        follower = nodes[0]
        if replayed is not None:
            downs, ups = [float(d) for d in params.get("down_s") or []], [float(u) for u in params.get("up_s") or []]
            after = float(params.get("after_s") or 0.0)
        else:
            rounds = rng.randint(1, 3)
            downs = [round(rng.uniform(*self.down_range_s), 3) for _ in range(rounds)]
            ups = [round(rng.uniform(*self.up_range_s), 3) for _ in range(rounds - 1)]
            after = round(rng.uniform(0.0, self.max_after_s), 3)
        first_value = value
        for i, down in enumerate(downs):
            if i:  # each later round strikes again while the follower is coming back
                self.wait_until(time.monotonic() + (ups[i - 1] if i - 1 < len(ups) else 0.0))
                value = {**first_value, "roles": {str(follower.node_id): []}, "step": f"rejoin: the follower again ({i + 1})"}
            struck = time.monotonic()
            self.kill(follower, value)
            self.wait_until(struck + down)
            self.restart(follower, "rejoin: the follower restarts (truncating to its high watermark before 0.11)")
        restarted = time.monotonic()
        out = {**first_value, "targets": [follower.node_id], "down_s": downs, "up_s": ups, "after_s": after}
        out.pop("step", None)
        leader, leader_value = self.leader(follower, out, replayed, restarted + after)
        if leader is None:
            self.skip(KILL.start, leader_value, leader_value.pop("why"))
            return out
        self.kill(leader, leader_value)
        out["targets"].append(leader.node_id)
        out["roles"] = {**first_value["roles"], **leader_value["roles"]}
        return out

    def leader(self, follower: Any, out: dict[str, Any], replayed: list[Any] | None,
               at: float) -> tuple[Any, dict[str, Any]]:
        value: dict[str, Any] = {"target": "leader", "targets": [], "partition": out.get("partition"),
                                 "after_s": out["after_s"], "step": "rejoin: the leader, after the follower's restart"}
        self.wait_until(at)
        if replayed is not None:
            if len(replayed) < 2:
                return None, {**value, "roles": {}, "why": "the replayed event names no leader"}
            return replayed[1], {**value, "targets": [replayed[1].node_id], "roles": {str(replayed[1].node_id): []},
                                 "replay": "recorded targets"}
        assert self.cluster is not None
        partition = self.partition_of(out.get("partition"))
        look = self.fresh_look()
        leader = look.leaders.get(partition, -1) if partition is not None else -1
        if leader < 0 or leader == follower.node_id or leader in self.victims:
            why = look.error or f"{out.get('partition')} has no leader other than the follower now (leader: {leader})"
            return None, {**value, "roles": {}, "why": why}
        node = self.cluster.node(leader)
        return node, {**value, "targets": [leader], "roles": look.of([node])}


PACKAGES = (
    Package("flap", make=lambda s: FlapNemesis(), heal_rank=30, requires=frozenset({"signals", "restart"}),
            summary="kill the leader, then the new leader"),
    Package("rejoin", make=lambda s: RejoinNemesis(), heal_rank=31, requires=frozenset({"signals", "restart"}),
            summary="a follower back in the ISR bounced, then the leader"),
)
