"""Choosing which brokers a fault hits, by name: one, leader, controller, minority, majority, all,
follower, rejoined.

Choices are drawn from a seeded `random.Random`, and role-based targets are
resolved against the cluster at the moment of the fault. `follower` is an in-sync follower of a
random workload partition; `rejoined` is a broker that is in a workload partition's ISR now but
was not at the previous look at this cluster (by any nemesis): a follower that has just caught
up after a restart or a cut, whose high watermark is the stalest in the ISR (KIP-101 scenario 1).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.cluster import KafkaCluster
    from harness.cluster.node import Node

log = logging.getLogger("nemesis")

NODE_TARGETS = ("one", "leader", "controller", "minority", "majority", "all", "follower", "rejoined")

@dataclass
class Roles:
    """Who held which role at one moment: one look at the cluster per fault, used both to choose
    the targets and to record their roles. A replay, whose targets are recorded, takes it ahead
    of its moment (Nemesis.look_ahead), so that the look never delays the strike."""

    controller: int | None = None
    leaders: dict[int, int] = field(default_factory=dict)  # partition -> leader id (-1: none)
    topic: str | None = None
    error: str | None = None  # why the cluster could not answer
    answered: list[int] | None = None  # brokers whose metadata was asked for the leaders (None: not asked)
    agreed: bool | None = None  # whether a majority of those agreed on the topic's state
    isrs: dict[int, list[int]] = field(default_factory=dict)  # partition -> in-sync replica ids
    replicas: dict[int, list[int]] = field(default_factory=dict)  # partition -> replica ids, the preferred leader first
    # Filled in by the run's Observer (nemesis/observer.py), which keeps the previous look:
    rejoined: dict[int, list[int]] = field(default_factory=dict)  # partition -> ids back in its ISR since the last look
    since_s: float | None = None  # seconds since that previous look (None: no previous look)
    controller_error: str | None = None  # why the controller lookup failed (the leaders may still be known)
    unseen: str | None = None  # set on a replay's stand-in for a look that was not back in time: why

    @classmethod
    def now(cls, cluster: "KafkaCluster", topic: str | None, views: Any = None) -> "Roles":
        """One look. `views`, if given, is called instead of `cluster.broker_views` (a nemesis polling
        for a new leader asks only the brokers it has not killed, so as not to wait on the dead)."""
        from harness.cluster.metadata_views import majority_view

        roles = cls(topic=topic)
        try:
            controller = cluster.active_controller()
            roles.controller = controller.node_id if controller is not None else None
        except Exception as exc:  # 0.10.2.2 under flap: "Local: Partial response" while the leaders were known
            roles.controller_error = str(exc)[:300]
            log.debug("controller unavailable: %s", exc)
        try:
            if topic is not None:  # cluster.partition_state, keeping who answered for a skip's reason
                answers = (views or cluster.broker_views)()
                roles.answered = sorted(answers)
                view = majority_view(answers, topic)
                roles.agreed = view is not None
                state = view.topics.get(topic, {}) if view else {}
                roles.leaders = {p: s["leader"] for p, s in state.items()}
                roles.isrs = {p: list(s["isr"]) for p, s in state.items()}
                roles.replicas = {p: list(s["replicas"]) for p, s in state.items()}
        except Exception as exc:  # a partitioned cluster may not answer; the fault may still happen
            roles.error = str(exc)[:300]
            log.debug("roles unavailable: %s", exc)
        return roles

    def of(self, nodes: list["Node"]) -> dict[str, list[str]]:
        """Each node's roles: "controller" and "leader:<topic>-<p>" for workload partitions it leads."""
        out: dict[str, list[str]] = {str(n.node_id): [] for n in nodes}
        if self.controller is not None and str(self.controller) in out:
            out[str(self.controller)].append("controller")
        for partition, leader in sorted(self.leaders.items()):
            if str(leader) in out:
                out[str(leader)].append(f"leader:{self.topic}-{partition}")
        for partition, back in sorted(self.rejoined.items()):
            for node_id in back:
                if str(node_id) in out:
                    out[str(node_id)].append(f"rejoined:{self.topic}-{partition}")
        return out


def leader_node(cluster: "KafkaCluster", roles: Roles, rng: random.Random,
                aimed: dict[str, Any] | None = None) -> "Node | None":
    """The leader of a randomly chosen partition of the workload topic (None while leaderless), or
    of the one `aimed` already names ("<topic>-<p>": the guided schedule's strike, design 12). The
    partition aimed at goes into `aimed` (recorded with the fault, so a replay can say it)."""
    if roles.topic is None:
        raise HarnessError("the 'leader' target needs a workload topic", hint="pass topic= to the nemesis setup")
    if roles.error is not None:
        raise HarnessError(f"the partition leaders are unknown right now: {roles.error}")
    if not roles.leaders:
        return None  # no majority of brokers agrees on the topic's state right now
    given = str((aimed or {}).get("partition") or "")
    partition = int(given.rsplit("-", 1)[1]) if given.startswith(f"{roles.topic}-") else rng.choice(sorted(roles.leaders))
    if aimed is not None:
        aimed["partition"] = f"{roles.topic}-{partition}"
    leader = roles.leaders.get(partition, -1)
    return cluster.node(leader) if leader >= 0 else None


def no_target_reason(target: str, roles: Roles | None, aimed: dict[str, Any] | None = None) -> str:
    """Why `target` resolved to no broker just now, in words for the history's skipped event."""
    if target == "leader" and roles is not None:
        if not roles.leaders:
            why = ("no broker answered a metadata request" if roles.answered == [] else
                   f"the brokers that answered ({roles.answered}) do not list it" if roles.agreed else
                   f"no majority of the brokers that answered ({roles.answered}) agrees on its partitions"
                   if roles.answered else "no majority of brokers agrees on its partitions")
            return f"no leader of topic {roles.topic} found in the metadata ({why})"
        return f"partition {(aimed or {}).get('partition', '?')} has no leader in the metadata"
    if target == "controller":
        return "no active controller found in the metadata" + (f" ({roles.controller_error})" if roles and roles.controller_error else "")
    if target == "follower" and roles is not None:
        return f"no partition of topic {roles.topic} has an in-sync follower in the metadata (ISRs {roles.isrs})"
    if target == "rejoined" and roles is not None:
        if roles.since_s is None:
            return "no earlier look at the ISRs to compare with (the first look of the run, or none saw them)"
        return f"no broker rejoined an ISR of topic {roles.topic} since the previous look {roles.since_s} s before"
    return f"target {target!r} named no broker"


def follower_node(cluster: "KafkaCluster", roles: Roles, rng: random.Random, rejoined: bool,
                  aimed: dict[str, Any] | None = None) -> "Node | None":
    """An in-sync follower (not the leader) of a random workload partition that has one; with
    `rejoined`, one that was out of that partition's ISR at the previous look. The partition goes into `aimed`."""
    if roles.topic is None:
        raise HarnessError("the 'follower' and 'rejoined' targets need a workload topic", hint="pass topic= to the nemesis setup")
    pool = roles.rejoined if rejoined else {p: [i for i in isr if i != roles.leaders.get(p)] for p, isr in roles.isrs.items()}
    candidates = sorted(p for p, ids in pool.items() if ids)
    if not candidates:
        return None
    partition = rng.choice(candidates)
    if aimed is not None:
        aimed["partition"] = f"{roles.topic}-{partition}"
    return cluster.node(rng.choice(sorted(pool[partition])))


def choose_nodes(cluster: "KafkaCluster", target: str, rng: random.Random, topic: str | None = None,
                 aimed: dict[str, Any] | None = None, roles: Roles | None = None) -> list["Node"]:
    """The brokers that `target` names right now; an empty list when the role has no holder."""
    brokers = list(cluster.brokers)
    n = len(brokers)
    if target in ("leader", "controller", "follower", "rejoined") and roles is None:
        roles = Roles.now(cluster, topic)
    if target == "one":
        return [rng.choice(brokers)]
    if target == "leader":
        assert roles is not None
        node = leader_node(cluster, roles, rng, aimed)
        return [node] if node else []
    if target == "controller":
        assert roles is not None
        if roles.controller is None:
            return []
        return [cluster.node(roles.controller)]
    if target in ("follower", "rejoined"):
        assert roles is not None
        node = follower_node(cluster, roles, rng, target == "rejoined", aimed)
        return [node] if node else []
    if target == "minority":
        return rng.sample(brokers, max(1, (n - 1) // 2))
    if target == "majority":
        return rng.sample(brokers, n // 2 + 1)
    if target == "all":
        return brokers
    raise HarnessError(f"unknown target {target!r}", hint=f"use one of: {', '.join(NODE_TARGETS)}")
