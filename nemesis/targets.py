"""Choosing which brokers a fault hits, by name: one, leader, controller, minority, majority, all.

Choices are drawn from a seeded `random.Random`, and role-based targets are
resolved against the cluster at the moment of the fault.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.cluster import KafkaCluster
    from harness.cluster.node import Node

log = logging.getLogger("nemesis")

NODE_TARGETS = ("one", "leader", "controller", "minority", "majority", "all")


def leader_node(cluster: "KafkaCluster", topic: str | None, rng: random.Random,
                aimed: dict[str, Any] | None = None) -> "Node | None":
    """The leader of a randomly chosen partition of the workload topic (None while leaderless).
    The partition aimed at goes into `aimed` (recorded with the fault, so a replay can say it)."""
    if topic is None:
        raise HarnessError("the 'leader' target needs a workload topic", hint="pass topic= to the nemesis setup")
    state = cluster.partition_state(topic)
    if not state:
        return None  # no majority of brokers agrees on the topic's state right now
    partition = rng.choice(sorted(state))
    if aimed is not None:
        aimed["partition"] = f"{topic}-{partition}"
    leader = state[partition]["leader"]
    return cluster.node(leader) if leader >= 0 else None


def choose_nodes(cluster: "KafkaCluster", target: str, rng: random.Random, topic: str | None = None,
                 aimed: dict[str, Any] | None = None) -> list["Node"]:
    """The brokers that `target` names right now; an empty list when the role has no holder."""
    brokers = list(cluster.brokers)
    n = len(brokers)
    if target == "one":
        return [rng.choice(brokers)]
    if target == "leader":
        node = leader_node(cluster, topic, rng, aimed)
        return [node] if node else []
    if target == "controller":
        node = cluster.active_controller()
        return [node] if node and node in brokers else ([node] if node else [])
    if target == "minority":
        return rng.sample(brokers, max(1, (n - 1) // 2))
    if target == "majority":
        return rng.sample(brokers, n // 2 + 1)
    if target == "all":
        return brokers
    raise HarnessError(f"unknown target {target!r}", hint=f"use one of: {', '.join(NODE_TARGETS)}")


def current_roles(cluster: "KafkaCluster", nodes: list["Node"], topic: str | None) -> dict[str, list[str]]:
    """Roles of `nodes` as the cluster reports them now; empty lists if the cluster cannot answer."""
    roles: dict[str, list[str]] = {str(node.node_id): [] for node in nodes}
    try:
        controller = cluster.active_controller()
        if controller is not None and str(controller.node_id) in roles:
            roles[str(controller.node_id)].append("controller")
        if topic is not None:
            for partition, state in sorted(cluster.partition_state(topic).items()):
                if str(state["leader"]) in roles:
                    roles[str(state["leader"])].append(f"leader:{topic}-{partition}")
    except Exception as exc:  # a partitioned cluster may not answer; the fault still happens
        log.debug("roles unavailable: %s", exc)
    return roles
