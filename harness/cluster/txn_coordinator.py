"""Which broker is the transaction coordinator of a transactional.id.

Kafka's TransactionStateManager.partitionFor is
`Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount`: Java's String.hashCode
(32-bit, s[0]*31^(n-1) + ... + s[n-1], over UTF-16 code units) and Kafka's own Utils.abs, which
is Math.abs except that Integer.MIN_VALUE maps to 0 (org.apache.kafka.common.utils.Utils; not
`x & 0x7fffffff`, which is Utils.toPositive, the producer partitioner's). The coordinator is
the leader of that partition of `__transaction_state` (transaction.state.log.num.partitions, 50
by default; the count is read from the metadata, not assumed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.cluster import KafkaCluster

TXN_STATE_TOPIC = "__transaction_state"


def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode as a signed 32-bit int (over UTF-16 code units, as Java stores strings)."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """org.apache.kafka.common.utils.Utils.abs: |n|, and 0 for Integer.MIN_VALUE."""
    return 0 if n == -(1 << 31) else abs(n)


def txn_state_partition(transactional_id: str, partitions: int = 50) -> int:
    """The `__transaction_state` partition that holds `transactional_id`'s state."""
    if partitions <= 0:
        raise HarnessError(f"{TXN_STATE_TOPIC} has {partitions} partitions", hint="it is created by the first FindCoordinator")
    return kafka_abs(java_string_hash(transactional_id)) % partitions


def coordinator_of(cluster: "KafkaCluster", transactional_id: str, topic: str = TXN_STATE_TOPIC) -> dict[str, Any]:
    """The coordinator of `transactional_id` now: its `__transaction_state` partition, that
    partition's leader (the coordinator), replicas and ISR, as a majority of brokers sees them.
    With topic `__consumer_offsets`, the group coordinator of the group `transactional_id` names
    (GroupMetadataManager.partitionFor: the same Utils.abs(hashCode) % partitions).
    Raises HarnessError while the topic does not exist (no transactional producer has looked
    for its coordinator yet) or the partition has no leader."""
    state = cluster.partition_state(topic)
    if not state:
        raise HarnessError(f"{topic} is not in the metadata yet",
                           hint="a transactional producer's init_transactions (a group's first join) creates it")
    partition = txn_state_partition(transactional_id, len(state))
    p = state[partition]
    if p["leader"] < 0:
        raise HarnessError(f"{topic}-{partition} has no leader now: {p}")
    return {"transactional_id": transactional_id, "partition": partition, "partitions": len(state),
            "coordinator": p["leader"], "replicas": list(p["replicas"]), "isr": list(p["isr"])}


GROUP_STATE_TOPIC = "__consumer_offsets"
