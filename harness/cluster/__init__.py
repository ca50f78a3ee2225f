"""A real Kafka cluster in containers: the cluster (`kafka_cluster`), its nodes (`node`), their
configuration (`broker_config`), and what can be read from it: the KRaft quorum (`quorum`), each
broker's view of partition metadata (`metadata_views`) and replica log dumps (`replicas`)."""

from harness.cluster.kafka_cluster import KafkaCluster, new_cluster_id, new_run_id
from harness.cluster.node import Node

__all__ = ["KafkaCluster", "Node", "new_cluster_id", "new_run_id"]
