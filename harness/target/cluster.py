"""`TargetCluster`: a Kafka cluster the harness did not start, served to the run and its nemeses
as `KafkaCluster` is (nodes, brokers, node(id), broker_views, active_controller, admin, ...).

It creates nothing on the cluster but the run's own topic, and stops nothing it did not stop
itself: leaving the context closes the SSH connections and no more. Each broker is a `Node`
(harness/cluster/node.py) whose transport is SSH or docker-by-name (harness/cluster/ssh_transport.py).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Self

from harness.cluster.broker_config import NodeSpec
from harness.cluster.metadata_views import AgreedMetadata, BrokerView, collect_views
from harness.cluster.node import Node
from harness.cluster.quorum import parse_quorum_state
from harness.cluster.ssh_transport import CommandTransport, DockerExecTransport, SshTransport
from harness.errors import ClusterError, HarnessError
from harness.target.security import librdkafka_settings
from harness.target.spec import BrokerTarget, Target

log = logging.getLogger(__name__)


def make_transport(broker: BrokerTarget) -> CommandTransport:
    a = broker.access
    commands = dict(start=a.start, stop=a.stop, pid=a.pid, log_file=a.log_file, metadata_dir=a.metadata_dir, sudo=a.sudo)
    if a.transport == "docker":
        return DockerExecTransport(a.container_name, **commands)
    return SshTransport(a.host, a.port, a.user, str(a.key_file) if a.key_file else None,
                        str(a.known_hosts) if a.known_hosts else None, a.host_key_check, a.connect_timeout_s, **commands)


class TargetCluster(AgreedMetadata):
    """See the module docstring. `run_id` tags what the run's faults leave on the hosts."""

    is_kraft = True
    metadata = "kraft"
    zookeeper = None
    lossy_writeback_s = None

    def __init__(self, target: Target, run_id: str = "") -> None:
        self.target, self.run_id = target, run_id
        self.client_settings = librdkafka_settings(target.security)
        self.broker_config: dict[str, Any] = {}
        self.disks: dict[int, Any] = {}
        self.brokers: list[Node] = []
        self.controllers: list[Node] = []
        self.addresses: dict[int, str] = {}  # broker id -> its advertised listener, from metadata
        self.distribution = SimpleNamespace(version=target.kafka_version or "unknown")
        self.capability_gaps: dict[int, dict[str, str]] = {}
        self._admin: Any = None
        for broker in target.brokers:
            transport = make_transport(broker)
            transport.run_tag = run_id or None
            hosts = [b.access.host for b in target.brokers]
            name = broker.access.host if hosts.count(broker.access.host) == 1 else f"{broker.access.host}:{broker.access.port}"
            node = Node(spec=NodeSpec(broker.node_id, name, broker.roles), container=None,  # type: ignore[arg-type]
                        node_dir=Path("."), address=broker.address, transport=transport)
            self.brokers.append(node)
            if "controller" in broker.roles:
                self.controllers.append(node)

    def claim(self, run_id: str) -> None:
        """The run that now acts on the target: its id names its topic and tags its faults' leftovers."""
        self.run_id = run_id
        for node in self.brokers:
            transport = node.transport
            if isinstance(transport, CommandTransport):
                transport.run_tag = run_id

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections; nothing on the cluster is stopped or removed."""
        self._admin = None
        for node in self.brokers:
            transport = node.transport
            if isinstance(transport, CommandTransport):
                transport.close()

    # --- what runs and nemeses ask -----------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        return list(self.brokers)

    @property
    def capabilities(self) -> frozenset[str]:
        return frozenset.intersection(*(b.capabilities for b in self.brokers)) if self.brokers else frozenset()

    def set_capabilities(self, node_id: int, capabilities: frozenset[str], gaps: dict[str, str]) -> None:
        transport = self.node(node_id).transport
        assert transport is not None
        transport.capabilities = capabilities
        self.capability_gaps[node_id] = gaps

    def bootstrap_servers(self) -> str:
        return self.target.bootstrap_servers

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient({**self.client_settings, "bootstrap.servers": self.bootstrap_servers(),
                                       "logger": logging.getLogger("librdkafka.admin")})
        return self._admin

    def learn_addresses(self, timeout_s: float = 10.0) -> dict[int, str]:
        """Each broker's advertised address, from the cluster's own metadata (what broker_views asks)."""
        metadata = self.admin().list_topics(timeout=timeout_s)
        self.addresses = {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}
        return self.addresses

    def node(self, node_id: int) -> Node:
        for node in self.brokers:
            if node.node_id == node_id:
                return node
        raise ClusterError(f"no broker {node_id} in the target (it lists {[n.node_id for n in self.brokers]})")

    def broker_views(self) -> dict[int, BrokerView]:
        addresses = self.addresses or {b.node_id: self.bootstrap_servers() for b in self.brokers}
        return collect_views(addresses, settings=self.client_settings)

    def active_controller(self) -> Node | None:
        """The KRaft quorum leader with the highest epoch, from the controllers' quorum-state files."""
        views = []
        for node in self.controllers:
            transport = node.transport
            assert isinstance(transport, CommandTransport)
            code, out = node.exec(f"cat {transport.metadata_dir}/__cluster_metadata-0/quorum-state")
            view = parse_quorum_state(out) if code == 0 else None
            if view is not None:
                views.append(view)
        if not views:
            return None
        leader = max(views)[1]
        return self.node(leader) if any(b.node_id == leader for b in self.brokers) else None

    # --- the run's own topic -------------------------------------------------------------------------
    def owns(self, topic: str) -> bool:
        """Only a topic named with the target's prefix and this run's id is the run's."""
        return bool(self.run_id) and topic.startswith(f"{self.target.topic_prefix}{self.run_id}")

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     config: dict[str, Any] | None = None, timeout_s: float = 60.0, **_: Any) -> None:
        from confluent_kafka.admin import NewTopic

        from harness.cluster.topics import request_topic

        if not self.owns(name):
            raise HarnessError(f"the run may only create topics of its own (prefix {self.target.topic_prefix}{self.run_id}), not {name!r}.")
        if replication_factor > len(self.brokers):
            raise HarnessError(f"replication factor {replication_factor} exceeds the {len(self.brokers)} brokers the target lists.",
                               hint="list every broker in the target file, or lower the replication factor (--topic-config replication.factor=N)")
        new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                       config={k: str(v) for k, v in (config or {}).items()})
        request_topic(self.admin(), new, timeout_s)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = self.partition_state(name)
            if len(state) == partitions and all(p["leader"] >= 0 for p in state.values()):
                return
            time.sleep(0.3)
        raise ClusterError(f"topic {name!r} was created but not every partition had a leader within {timeout_s:.0f} s")

    def delete_topics(self, names: list[str], timeout_s: float = 30.0) -> dict[str, str]:
        """Delete the run's own topics (never another's); name -> "deleted" or the error."""
        outcome: dict[str, str] = {}
        mine = [n for n in names if self.owns(n)]
        for name in sorted(set(names) - set(mine)):
            outcome[name] = "not deleted: not this run's topic"
        if mine:
            for name, future in self.admin().delete_topics(mine, operation_timeout=timeout_s).items():
                try:
                    future.result(timeout=timeout_s)
                    outcome[name] = "deleted"
                except Exception as exc:
                    outcome[name] = f"not deleted: {exc}"
        return outcome

    def describe(self) -> dict[str, Any]:
        """cluster.json: the target as described (no secret), the brokers' advertised addresses."""
        return {"run_id": self.run_id, "target": self.target.describe(), "kafka_version": self.distribution.version,
                "bootstrap_servers": self.bootstrap_servers(),
                "brokers": [{"node_id": n.node_id, "hostname": n.hostname, "roles": list(n.roles), "address": n.address,
                             "listener": self.addresses.get(n.node_id), "capabilities": sorted(n.capabilities)}
                            for n in self.brokers],
                "controllers": [n.node_id for n in self.controllers], "dedicated_controllers": [],
                "capability_gaps": {str(k): v for k, v in self.capability_gaps.items()}}

