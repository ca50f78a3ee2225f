"""A real Kafka cluster in containers: the cluster (`kafka_cluster`), its nodes (`node`), their
configuration (`broker_config`), and what can be read from it: the KRaft quorum (`quorum`), each
broker's view of partition metadata (`metadata_views`) and replica log dumps (`replicas`).

The names below load on first use (PEP 562): `kafka_cluster` brings in testcontainers and the
Docker client, 0.7 s measured, which a submodule's import (the nemesis registry reads
`broker_config`'s ports while `run --help` builds its options) must not pay."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.cluster.kafka_cluster import KafkaCluster, new_cluster_id, new_run_id
    from harness.cluster.node import Node

__all__ = ["KafkaCluster", "Node", "new_cluster_id", "new_run_id"]
_HOMES = {"KafkaCluster": "kafka_cluster", "new_cluster_id": "kafka_cluster", "new_run_id": "kafka_cluster", "Node": "node"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'harness.cluster' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"harness.cluster.{_HOMES[name]}"), name)
