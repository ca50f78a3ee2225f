"""A running KRaft cluster grown and shrunk by a node: a broker added under a new node id, a broker
decommissioned (unregistered), and the partition moves that go with each (issue 36 item 4; used by
nemesis/membership.py).

`add_broker` makes a broker-only node as `KafkaCluster` makes its first ones (a container on the run's
network, with the run's labels, a random loopback port published for the host's clients and
advertised as `EXTERNAL://127.0.0.1:<port>`, storage formatted with the cluster's id), and puts it in
`cluster.brokers` as soon as its container runs: from then on the cluster's teardown removes it,
`cleanup` finds it by label, the ClusterWatch watches it, and the heal's ISR wait and the replica
comparison count it. `retire` takes a decommissioned node out of `cluster.brokers` and removes its
container; its folder (server.log, stdout.log, conf/) stays with the run's other nodes'.

`unregister` is Kafka's ClusterTool (`kafka-cluster unregister --id N`), `reassign` its
ReassignPartitionsCommand (the Admin API's alterPartitionReassignments, KIP-455) for many partitions
at once, each run inside a live broker as the other operations run Kafka's tools
(harness/cluster/leadership.py). Kafka's answers are returned as they are.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from harness.cluster import quorum
from harness.cluster.broker_config import DATA_DIR, EXTERNAL_PORT, INTERNAL_PORT, NODE_DIR, NodeSpec
from harness.cluster.leadership import at_least, run_tool
from harness.cluster.lossy_mount import LossyMount
from harness.cluster.node import KafkaNodeContainer, Node, network_address
from harness.errors import ClusterError

if TYPE_CHECKING:
    from harness.cluster.kafka_cluster import KafkaCluster

CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"
REASSIGN_TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
# Before 3.5 the same tools were Scala classes of the broker's jar (read in 3.3.2's jars: its
# ClusterTool has `unregister`, calling Admin.unregisterBroker). KRaft itself starts at 3.3.
OLD_CLUSTER_TOOL = "kafka.tools.ClusterTool"
OLD_REASSIGN_TOOL = "kafka.admin.ReassignPartitionsCommand"
OLDEST = "3.3"


def cluster_tool(version: str) -> str:
    return CLUSTER_TOOL if at_least(version, "3.5") else OLD_CLUSTER_TOOL


def reassign_tool(version: str) -> str:
    return REASSIGN_TOOL if at_least(version, "3.5") else OLD_REASSIGN_TOOL
PLAN_FILE = f"{NODE_DIR}/membership-reassign.json"


def broker_spec(node_id: int) -> NodeSpec:
    """An added node: a broker only (never a controller voter), named like the first ones."""
    return NodeSpec(node_id, f"kafka-{node_id}", ("broker",))


def refuse_growth(cluster: Any) -> str | None:
    """Why this cluster cannot take a node at run time (None: it can)."""
    if not getattr(cluster, "is_kraft", False):
        return "adding or unregistering a broker is built for KRaft clusters only"
    version = cluster.distribution.version
    if not at_least(version, OLDEST):
        return f"Kafka {version}: adding or unregistering a broker needs KRaft, {OLDEST} or later"
    return None


def add_broker(cluster: "KafkaCluster", node_id: int) -> Node:
    """Create, format and start a broker-only node `node_id` in the running cluster; the node (its JVM
    started, not yet registered: see `registered`). It is one of `cluster.brokers` from the moment its
    container runs; a failure after that retires it and raises."""
    if any(n.node_id == node_id for n in cluster.nodes):
        raise ClusterError(f"node {node_id} already exists in this cluster")
    assert cluster.distribution is not None and cluster.network is not None, "the cluster has not been started"
    spec = broker_spec(node_id)
    node_dir = cluster.work_dir / "brokers" / str(node_id)
    (node_dir / "conf").mkdir(parents=True, exist_ok=True)
    (node_dir / "clock").mkdir(exist_ok=True)
    image = cluster.brokers[0].container.image  # the image the cluster was made with
    container = (KafkaNodeContainer(image).with_node(spec, cluster.run_id)
                 .with_kafka_libs(cluster.distribution.libs, archive=cluster.archive)  # the cluster's class archive
                 .with_node_dir(node_dir).with_network(cluster.network))
    if cluster.upgrade is not None:
        cluster.upgrade.mount(container)
    disk = None
    if cluster.lossy_data:  # registered before mounting: the cluster's stop unmounts it
        disk = cluster.disks[node_id] = LossyMount(cluster.work_dir / "power" / str(node_id), f"{cluster.run_id}:{spec.hostname}",
                                                   cluster.lossy_writeback_s)
        container.with_volume_mapping(str(disk.mount().mountpoint), DATA_DIR, "rw")
    node = Node(spec=spec, container=container, node_dir=node_dir, disk=disk)
    container.start()
    cluster.brokers.append(node)
    try:
        node.host_port = int(container.get_exposed_port(EXTERNAL_PORT))
        node.address = network_address(container, cluster.network)
        controllers = [c.spec for c in cluster.controllers]
        node.write_files(cluster.distribution.logging, [b.spec for b in cluster.brokers], controllers,
                         zookeeper_connect=None, overrides=cluster.broker_config)
        if cluster.dynamic_quorum:
            quorum.write_dynamic(node_dir / "conf" / "server.properties", spec, controllers)
        if cluster.upgrade is not None:
            cluster.upgrade.prepare(node_dir / "conf")
        node.start_process(format_cluster_id=cluster.cluster_id)
    except BaseException:
        retire(cluster, node)
        raise
    return node


def registered(cluster: Any, node_id: int) -> bool:
    """Whether the brokers' metadata lists `node_id` (registered and unfenced)."""
    try:
        return node_id in set(cluster.admin().list_topics(timeout=5).brokers)
    except Exception:  # a broker down or an election: not yet
        return False


def retire(cluster: Any, node: Node) -> None:
    """Take `node` out of the cluster (it is no broker of it any more) and remove its container; its
    folder stays. The list first, then the container: the watch reads the list before and after it
    looks at Docker (harness/cluster/watch.py)."""
    if node in cluster.brokers:
        cluster.brokers.remove(node)
    if node in getattr(cluster, "controllers", []):
        cluster.controllers.remove(node)
    node.remove()


def unregister(via: Node, node_id: int, version: str, timeout_s: int = 90) -> tuple[int, str]:
    """`kafka-cluster unregister --id node_id`, run in `via` (a live broker) against its own listener
    with the cluster's `version` of the tool: the controller forgets the broker's registration.
    (exit code, Kafka's output)."""
    return run_tool(via, cluster_tool(version), f"unregister --bootstrap-server {via.hostname}:{INTERNAL_PORT} --id {int(node_id)}", timeout_s)


def reassign(via: Node, moves: dict[str, list[int]], version: str, action: str = "execute",
             timeout_s: int = 90) -> tuple[int, str]:
    """ReassignPartitionsCommand for many partitions at once ("topic-p" -> its new replica list): `action`
    execute, verify or cancel, run in `via` (a live broker). (exit code, Kafka's output)."""
    partitions = []
    for name, replicas in sorted(moves.items()):
        topic, partition = name.rsplit("-", 1)
        partitions.append({"topic": topic, "partition": int(partition), "replicas": [int(r) for r in replicas]})
    via.exec(f"cat > {PLAN_FILE} <<'EOF'\n{json.dumps({'version': 1, 'partitions': partitions})}\nEOF")
    return run_tool(via, reassign_tool(version), f"--bootstrap-server {via.hostname}:{INTERNAL_PORT} --reassignment-json-file {PLAN_FILE} "
                                        f"--{action}", timeout_s)


def reassigned(output: str) -> bool:
    """Whether a verify's output says every move is done."""
    return "is complete" in output and "still in progress" not in output and "failed" not in output


def replace(replicas: list[int], out: int, into: int) -> list[int]:
    """`replicas` with `out` replaced by `into`, in its place (the preferred leader keeps its position)."""
    return [into if r == out else r for r in replicas]


def spare_for(replicas: list[int], live: list[int], load: dict[int, int]) -> int | None:
    """The live broker that holds none of `replicas` and the fewest replicas overall (then the lowest id)."""
    spare = sorted((load.get(b, 0), b) for b in live if b not in replicas)
    return spare[0][1] if spare else None


def moves_off(topics: dict[str, dict[int, dict[str, Any]]], gone: set[int], live: list[int]) -> tuple[dict[str, list[int]], list[str]]:
    """Every partition (of every topic) whose replicas name a broker of `gone`, with those replaced by
    spare live brokers: ("topic-p" -> new replicas, partitions left as they are for want of a spare)."""
    load: dict[int, int] = {}
    for partitions in topics.values():
        for state in partitions.values():
            for r in state["replicas"]:
                load[r] = load.get(r, 0) + 1
    moves, stuck = {}, []
    for name, partitions in sorted(topics.items()):
        for p, state in sorted(partitions.items()):
            new = list(state["replicas"])
            for out in [r for r in new if r in gone]:
                into = spare_for(new, live, load)
                if into is None:
                    stuck.append(f"{name}-{p}")
                    break
                new = replace(new, out, into)
                load[into] = load.get(into, 0) + 1
            if new != list(state["replicas"]) and f"{name}-{p}" not in stuck:
                moves[f"{name}-{p}"] = new
    return moves, stuck


def wait_reassigned(via: Any, moves: dict[str, list[int]], version: str, timeout_s: float, stopping: Any = None,
                    every_s: float = 2.0) -> dict[str, Any]:
    """Verify (each a JVM) until Kafka says every move is done, bounded; how it ended."""
    began, answer = time.monotonic(), ""
    while time.monotonic() - began < timeout_s and not (stopping is not None and stopping.is_set()):
        code, out = reassign(via(), moves, version, "verify")
        answer = " ".join(out.split())[-300:]
        if code == 0 and reassigned(out):
            return {"complete": True, "waited_s": round(time.monotonic() - began, 2)}
        time.sleep(every_s)
    return {"complete": False, "waited_s": round(time.monotonic() - began, 2), "verify": answer}


__all__ = ["add_broker", "broker_spec", "moves_off", "reassign", "reassigned", "refuse_growth", "registered", "replace",
           "retire", "spare_for", "unregister", "wait_reassigned"]
