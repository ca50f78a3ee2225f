"""Planned leader changes: reorder a partition's replicas, run a preferred leader election.

A preferred election moves a partition's leadership to the first replica of its assignment while
the old leader stays in the ISR, unlike a broker's death (the controller takes a dead broker out of
every ISR). KIP-279's fast fail-over needs exactly that: a leader change that leaves the old leader
electable. Used by the scripted KIP-279 scenario and by the `transfer` nemesis package.

ZooKeeper-era clusters are driven through ZooKeeper with Kafka's own tools, run inside the
ZooKeeper container (a network fault never cuts a broker's container off from itself or ZooKeeper's
from its own port); from 2.4 the election is AdminClient.elect_leaders (KIP-460), and from 2.5 the
reassignment tool talks to a broker (KIP-455).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from harness.cluster.broker_config import KAFKA_LIBS
from harness.provision.kafka_jars import parse_version

if TYPE_CHECKING:
    from harness.cluster.kafka_cluster import KafkaCluster
    from harness.cluster.node import Node


def at_least(version: str, floor: str) -> bool:
    """Whether `version` is `floor` or later ("3.5" means 3.5.0)."""
    return parse_version(version) >= parse_version(floor + ".0" * (2 - floor.count(".")))


def run_tool(node: "Node", main: str, args: str, timeout_s: int = 90, libs: str = KAFKA_LIBS) -> tuple[int, str]:
    """Run one of Kafka's command-line tools (a JVM: 2-6 s on the 2-core machine) inside `node`'s
    container, from the jars at `libs` (a rolling upgrade's new version: harness/cluster/versions.py);
    return its exit code and output."""
    from harness.cluster.node import JDK17_OPENS, share_opt

    return node.exec(f"timeout {timeout_s} java -Xmx192m {share_opt(libs)} {JDK17_OPENS} -cp '{libs}/*' {main} {args} 2>&1")


def tool_node(cluster: "KafkaCluster", via: "Node | None" = None) -> "Node":
    """Where the tools run: ZooKeeper's container on ZooKeeper-era clusters, else `via` (a live broker)."""
    if cluster.zookeeper is not None:
        return cluster.zookeeper
    assert via is not None, "a KRaft cluster's tools need a live broker to run in"
    return via


def reorder_replicas(cluster: "KafkaCluster", version: str, topic: str, partition: int, ids: list[int],
                     via: "Node | None" = None, timeout_s: int = 90) -> tuple[int, str]:
    """Rewrite the partition's replica order (same replicas; the first becomes the preferred leader)
    with Kafka's ReassignPartitionsCommand. Returns its exit code and output."""
    return reassign(cluster, version, topic, partition, ids, via, "execute", timeout_s=timeout_s)


def reassign(cluster: "KafkaCluster", version: str, topic: str, partition: int, ids: list[int], via: "Node | None",
             action: str = "execute", throttle_bps: int | None = None, timeout_s: int = 90) -> tuple[int, str]:
    """Kafka's ReassignPartitionsCommand for one partition's new replica list: `action` execute (with
    an optional replication throttle in bytes/s), verify (which also removes the throttle once every
    move is done) or cancel (>= 2.6). Against a live broker (`via`) from 2.5 (KIP-455); before 2.5,
    on a ZooKeeper-era cluster, through ZooKeeper from ZooKeeper's container (execute and verify:
    there is no cancel), as operators of those versions did. Returns its exit code and output
    (Kafka's answer, recorded as it is)."""
    through_zk = not at_least(version, "2.5")
    if through_zk and cluster.zookeeper is None:
        raise ValueError(f"partition reassignment before Kafka 2.5 goes through ZooKeeper, and this {version} cluster has none")
    if through_zk and action == "cancel":
        raise ValueError(f"cancelling a reassignment needs Kafka 2.6 or later, not {version}")
    if through_zk:
        node, where = tool_node(cluster), "--zookeeper localhost:2181"
    else:  # KIP-455; 3.0 removed its --zookeeper
        assert via is not None, "from 2.5 the reassignment tool runs against a live broker: give `via`"
        node, where = via, f"--bootstrap-server {via.hostname}:9092"
    plan = json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": partition, "replicas": ids}]})
    path = "/opt/harness/node/reassign-op.json"
    node.exec(f"cat > {path} <<'EOF'\n{plan}\nEOF")
    main = ("org.apache.kafka.tools.reassign.ReassignPartitionsCommand" if at_least(version, "3.5")
            else "kafka.admin.ReassignPartitionsCommand")
    extra = f" --throttle {int(throttle_bps)}" if throttle_bps and action == "execute" else ""
    code, out = run_tool(node, main, f"{where} --reassignment-json-file {path} --{action}{extra}", timeout_s)
    if through_zk and code == 0 and action == "execute" and "Successfully started reassignment" not in out:
        # 1.1.1's tool prints a refusal ("AdminCommandFailedException: The proposed assignment contains
        # non-existent brokerIDs: 3", a broker down) and exits 0 (20261128T115253-b993b4).
        code = 1
    return code, out


def elect(cluster: "KafkaCluster", kind: str, topic: str, partition: int) -> tuple[bool, str]:
    """AdminClient.elect_leaders (Kafka >= 2.4) of one partition, `kind` PREFERRED or UNCLEAN;
    returns (the brokers answered, their answer as text)."""
    from confluent_kafka import ElectionType, TopicPartition

    try:
        fut = cluster.admin().elect_leaders(ElectionType[kind], [TopicPartition(topic, partition)])
        answer = {f"{tp.topic}-{tp.partition}": (str(err) if err else "ok")
                  for tp, err in fut.result(timeout=20).items()}  # confluent-kafka 2.16 raises SystemError on a timeout kwarg
        return True, json.dumps(answer)
    except Exception as exc:  # the answer (often ELECTION_NOT_NEEDED or ELIGIBLE_LEADERS_NOT_AVAILABLE) is evidence
        return False, f"{type(exc).__name__}: {exc}"


def elect_preferred(cluster: "KafkaCluster", version: str, topic: str, partition: int,
                    timeout_s: int = 90) -> tuple[bool, str]:
    """Ask for a preferred leader election of one partition; returns (request accepted, the answer).
    An accepted request may still elect nobody new: the answer says so on 2.4+ (ELECTION_NOT_NEEDED,
    PREFERRED_LEADER_NOT_AVAILABLE); ZooKeeper-era tools only say the request was written."""
    if at_least(version, "2.4"):
        return elect(cluster, "PREFERRED", topic, partition)
    node = tool_node(cluster)
    path = "/opt/harness/node/elect.json"
    node.exec(f"cat > {path} <<'EOF'\n" + json.dumps({"partitions": [{"topic": topic, "partition": partition}]}) + "\nEOF")
    code, out = run_tool(node, "kafka.admin.PreferredReplicaLeaderElectionCommand",
                         f"--zookeeper localhost:2181 --path-to-json-file {path}", timeout_s)
    return code == 0, out.strip()[-500:]
