"""Choosing which brokers a fault hits, by name: one, leader, controller, minority, majority, all.

Choices are drawn from a seeded `random.Random`, and role-based targets are
resolved against the cluster at the moment of the fault.
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

NODE_TARGETS = ("one", "leader", "controller", "minority", "majority", "all")


@dataclass
class Roles:
    """Who held which role at one moment: one look at the cluster per fault, used both to choose
    the targets and to record their roles, so that a fault and its replay (which skips the
    choice) spend the same time looking before they strike."""

    controller: int | None = None
    leaders: dict[int, int] = field(default_factory=dict)  # partition -> leader id (-1: none)
    topic: str | None = None
    error: str | None = None  # why the cluster could not answer
    answered: list[int] | None = None  # brokers whose metadata was asked for the leaders (None: not asked)
    agreed: bool | None = None  # whether a majority of those agreed on the topic's state

    @classmethod
    def now(cls, cluster: "KafkaCluster", topic: str | None) -> "Roles":
        from harness.cluster.metadata_views import majority_view

        roles = cls(topic=topic)
        try:
            controller = cluster.active_controller()
            roles.controller = controller.node_id if controller is not None else None
            if topic is not None:  # cluster.partition_state, keeping who answered for a skip's reason
                views = cluster.broker_views()
                roles.answered = sorted(views)
                view = majority_view(views, topic)
                roles.agreed = view is not None
                roles.leaders = {p: s["leader"] for p, s in (view.topics.get(topic, {}) if view else {}).items()}
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
        return out


def leader_node(cluster: "KafkaCluster", roles: Roles, rng: random.Random,
                aimed: dict[str, Any] | None = None) -> "Node | None":
    """The leader of a randomly chosen partition of the workload topic (None while leaderless).
    The partition aimed at goes into `aimed` (recorded with the fault, so a replay can say it)."""
    if roles.topic is None:
        raise HarnessError("the 'leader' target needs a workload topic", hint="pass topic= to the nemesis setup")
    if roles.error is not None:
        raise HarnessError(f"the partition leaders are unknown right now: {roles.error}")
    if not roles.leaders:
        return None  # no majority of brokers agrees on the topic's state right now
    partition = rng.choice(sorted(roles.leaders))
    if aimed is not None:
        aimed["partition"] = f"{roles.topic}-{partition}"
    leader = roles.leaders[partition]
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
        return "no active controller found in the metadata"
    return f"target {target!r} named no broker"


def choose_nodes(cluster: "KafkaCluster", target: str, rng: random.Random, topic: str | None = None,
                 aimed: dict[str, Any] | None = None, roles: Roles | None = None) -> list["Node"]:
    """The brokers that `target` names right now; an empty list when the role has no holder."""
    brokers = list(cluster.brokers)
    n = len(brokers)
    if target in ("leader", "controller") and roles is None:
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
    if target == "minority":
        return rng.sample(brokers, max(1, (n - 1) // 2))
    if target == "majority":
        return rng.sample(brokers, n // 2 + 1)
    if target == "all":
        return brokers
    raise HarnessError(f"unknown target {target!r}", hint=f"use one of: {', '.join(NODE_TARGETS)}")
