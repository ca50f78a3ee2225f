"""`KafkaCluster`: a real multi-node Kafka cluster in containers, owned by a context manager.

    with KafkaCluster(brokers=3) as cluster:
        cluster.create_topic("events", partitions=6, replication_factor=3,
                             config={"min.insync.replicas": "2"})
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers()})

KRaft combined mode (every node broker+controller) by default, or a separate controller quorum
with `controllers=n`. Versions before KRaft (and 3.x on request, `metadata="zookeeper"`) run with
one ZooKeeper node, started from the same version's jars. Every container and network carries the
run-id label; teardown removes them also on exceptions and Ctrl-C, and `python -m harness cleanup`
removes what a killed run left.
"""

from __future__ import annotations

import base64
import logging
import secrets
import shutil
import tempfile
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from testcontainers.core.network import Network

from harness.provision.bootstrap import prepare
from harness.cluster import versions
from harness.cluster.broker_config import DATA_DIR, ZOOKEEPER_PORT, NodeSpec
from harness.errors import ClusterError
from harness.provision.kafka_jars import KafkaDistribution
from harness.cluster.lossy_mount import LossyMount, unmount_disks
from harness.cluster.node import KafkaNodeContainer, Node, network_address
from harness.cluster.metadata_views import AgreedMetadata, BrokerView, collect_views
from harness.cluster import quorum
from harness.cluster.quorum import read_active_controller
from harness.cluster.topics import request_topic
from harness.provision.owner import run_labels, write_owner

log = logging.getLogger(__name__)


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)


def new_cluster_id() -> str:
    """A Kafka cluster id: a random UUID in unpadded URL-safe base64 (22 characters).

    Never one that starts with "-": the storage tool would read it as an option (Kafka's own
    Uuid.randomUuid() rejects those for the same reason)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaCluster(AgreedMetadata):
    """A Kafka cluster of `brokers` nodes; see the module docstring."""

    def __init__(
        self,
        brokers: int = 3,
        kafka_version: str | None = None,
        broker_config: dict[str, Any] | None = None,
        *,
        controllers: int = 0,
        metadata: str | None = None,
        run_id: str | None = None,
        work_dir: Path | str | None = None,
        ready_timeout_s: float = 120.0,
        lossy_data: bool = False, lossy_writeback_s: float | None = None,
        upgrade_to: str | None = None, dynamic_quorum: bool = False,
    ) -> None:
        if not isinstance(brokers, int) or isinstance(brokers, bool) or not 1 <= brokers <= 9:
            raise ClusterError(f"brokers={brokers!r}: a cluster needs between 1 and 9 brokers.", hint="use brokers=3 for replication tests")
        if not isinstance(controllers, int) or controllers < 0 or controllers > 5:
            raise ClusterError(f"controllers={controllers!r}: use 0 (combined mode) or 1 to 5 separate controllers.")
        if metadata not in (None, "kraft", "zookeeper"):
            raise ClusterError(f"metadata={metadata!r}: use 'kraft' or 'zookeeper' (or leave it out to choose by version).")
        self.metadata, self.broker_count, self.controller_count, self.kafka_version = metadata, brokers, controllers, kafka_version
        self.broker_config: dict[str, Any] = dict(broker_config or {})
        self.run_id = run_id or new_run_id()
        self.ready_timeout_s = ready_timeout_s
        self._work_dir = Path(work_dir) if work_dir else None
        self._owns_work_dir = work_dir is None
        self.brokers: list[Node] = []
        self.controllers: list[Node] = []
        self.zookeeper: Node | None = None
        self.network: Network | None = None
        self.distribution: KafkaDistribution | None = None
        self.cluster_id = new_cluster_id()
        self.timings: dict[str, float] = {}
        self._admin: AdminClient | None = None
        self.lossy_data, self.lossy_writeback_s = lossy_data, lossy_writeback_s  # see nemesis/power.py
        self.disks: dict[int, LossyMount] = {}  # node id -> the lossy mount that is its data directory
        self.archive: Path | None = None  # the version's class archive, mounted by every node (harness/cluster/class_archive.py)
        self.upgrade_to, self.upgrade = upgrade_to, None  # a rolling upgrade's second version (harness/cluster/versions.py)
        self.dynamic_quorum, self.directory_ids = dynamic_quorum, {}  # KIP-853 (harness/cluster/quorum.py): node id -> metadata dir id

    # --- lifecycle ------------------------------------------------------------
    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def work_dir(self) -> Path:
        assert self._work_dir is not None, "the cluster has not been started"
        return self._work_dir

    @property
    def nodes(self) -> list[Node]:
        """Every node, brokers first; in combined mode brokers are the controllers."""
        extra = [self.zookeeper] if self.zookeeper else []
        return extra + self.brokers + [c for c in self.controllers if c not in self.brokers]

    def start(self) -> Self:
        began = time.monotonic()
        prepared = prepare(self.kafka_version)
        self.distribution = prepared.kafka
        self.metadata = self._metadata_mode(self.distribution)
        if self.dynamic_quorum:  # before any container: exit 2 with the fix
            quorum.refuse_dynamic(self.distribution.version, self.controller_count)
        self.upgrade = versions.for_cluster(self.distribution, self.upgrade_to, prepared.image)  # B's jars mounted beside A's
        self.archive = prepared.archive  # the version's class archive: its JVMs start sooner
        self.timings["prepare_s"] = time.monotonic() - began
        try:
            self._create_nodes(prepared.image)
            self._start_processes()
            self._wait_ready(began)
        except BaseException:
            self.stop()
            raise
        self.timings["ready_s"] = time.monotonic() - began
        log.info("cluster %s ready in %.1f s: %s", self.run_id, self.timings["ready_s"], self.bootstrap_servers())
        return self

    def _metadata_mode(self, dist: KafkaDistribution) -> str:
        if self.metadata is None:
            return "kraft" if dist.supports_kraft else "zookeeper"
        if self.metadata == "kraft" and not dist.supports_kraft:
            raise ClusterError(f"Kafka {dist.version} predates KRaft (3.3).", hint="leave metadata unset or use 'zookeeper'")
        if self.metadata == "zookeeper" and dist.requires_kraft:
            raise ClusterError(f"Kafka {dist.version} has no ZooKeeper mode (removed in 4.0).", hint="use 'kraft' or a 3.x version")
        if self.metadata == "zookeeper" and self.controller_count:
            raise ClusterError("separate controllers are a KRaft feature; ZooKeeper mode elects its controller among brokers.")
        return self.metadata

    @property
    def is_kraft(self) -> bool:
        return self.metadata == "kraft"

    def _node_specs(self) -> tuple[list[NodeSpec], list[NodeSpec]]:
        if not self.is_kraft:
            return [NodeSpec(i, f"kafka-{i}", ()) for i in range(1, self.broker_count + 1)], []
        if self.controller_count == 0:
            brokers = [NodeSpec(i, f"kafka-{i}", ("broker", "controller")) for i in range(1, self.broker_count + 1)]
            return brokers, brokers
        brokers = [NodeSpec(i, f"kafka-{i}", ("broker",)) for i in range(1, self.broker_count + 1)]
        controllers = [NodeSpec(100 + i, f"controller-{i}", ("controller",)) for i in range(1, self.controller_count + 1)]
        return brokers, controllers

    def _create_nodes(self, image: str) -> None:
        if self._work_dir is None:
            self._work_dir = Path(tempfile.mkdtemp(prefix=f"kafka-harness-{self.run_id}-"))
            write_owner(self._work_dir, self.run_id)  # `cleanup` removes the folder once its owner is dead
        self.network = Network(docker_network_kw={"labels": run_labels(self.run_id)})  # run id and owner
        self.network.name = f"kh-{self.run_id}"
        self.network.create()
        broker_specs, controller_specs = self._node_specs()
        all_specs = broker_specs + [c for c in controller_specs if c not in broker_specs]
        if not self.is_kraft:
            all_specs.insert(0, NodeSpec(0, "zookeeper", ("zookeeper",)))
        assert self.distribution is not None
        for spec in all_specs:
            node_dir = self.work_dir / "brokers" / str(spec.node_id)
            (node_dir / "conf").mkdir(parents=True, exist_ok=True)
            (node_dir / "clock").mkdir(exist_ok=True)
            container = (
                KafkaNodeContainer(image)
                .with_node(spec, self.run_id)
                .with_kafka_libs(self.distribution.libs, archive=self.archive)
                .with_node_dir(node_dir)
                .with_network(self.network)
            )
            if self.upgrade is not None:
                self.upgrade.mount(container)
            if self.lossy_data and not spec.is_zookeeper:  # registered before mounting: stop() unmounts it
                disk = self.disks[spec.node_id] = LossyMount(self.work_dir / "power" / str(spec.node_id), f"{self.run_id}:{spec.hostname}", self.lossy_writeback_s)
                container.with_volume_mapping(str(disk.mount().mountpoint), DATA_DIR, "rw")
            node = Node(spec=spec, container=container, node_dir=node_dir, disk=self.disks.get(spec.node_id))
            # Registered before start so that teardown finds it even if start fails halfway.
            if spec.is_zookeeper:
                self.zookeeper = node
            else:
                (self.brokers if spec.is_broker else self.controllers).append(node)
            if spec.is_controller and spec.is_broker:
                self.controllers.append(node)
            container.start()
            if spec.is_broker:
                node.host_port = int(container.get_exposed_port(19092))
            node.address = network_address(container, self.network)
            node.write_files(self.distribution.logging, broker_specs, controller_specs,
                             zookeeper_connect=None if self.is_kraft else f"zookeeper:{ZOOKEEPER_PORT}",
                             overrides=self.broker_config if spec.is_broker else None)
            if self.dynamic_quorum:
                quorum.write_dynamic(node_dir / "conf" / "server.properties", spec, controller_specs)
            if self.upgrade is not None:
                self.upgrade.prepare(node_dir / "conf")

    def _start_processes(self) -> None:
        if self.zookeeper is not None:
            self.zookeeper.start_process()
            self._wait_zookeeper()
        kafka_nodes = [n for n in self.nodes if n is not self.zookeeper]
        format_id = self.cluster_id if self.is_kraft else None  # ZooKeeper-mode storage needs no format
        formatted = quorum.format_dynamic(self) if self.dynamic_quorum else []  # its controllers, with the initial voters
        with ThreadPoolExecutor(max_workers=len(kafka_nodes)) as pool:
            list(pool.map(lambda n: n.start_process(format_cluster_id=None if n in formatted else format_id), kafka_nodes))

    def _wait_zookeeper(self, timeout_s: float = 60.0) -> None:
        assert self.zookeeper is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            code, out = self.zookeeper.exec(f"echo ruok | nc -w 2 localhost {ZOOKEEPER_PORT}")
            if "imok" in out:
                return
            if self.zookeeper.pid() is None:
                break
            time.sleep(0.3)
        raise ClusterError("ZooKeeper did not start.", hint="its log is below", details=self.zookeeper.log_tail())

    def _wait_ready(self, began: float) -> None:
        """Ready: every node's JVM runs and a metadata request from the host lists every broker."""
        deadline = began + self.ready_timeout_s
        seen: set[int] = set()
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.pid() is None:
                    raise ClusterError(
                        f"node {node.node_id} ({node.hostname}) exited during start-up "
                        f"(ps in its container: {node.last_ps}).",
                        hint="the log below usually names the rejected setting",
                        details=node.log_tail(),
                    )
            try:
                seen = set(self.admin().list_topics(timeout=2).brokers)
                if len(seen) == self.broker_count:
                    return
            except KafkaException:
                pass
            time.sleep(0.5)
        raise ClusterError(
            f"cluster not ready after {self.ready_timeout_s:.0f} s: brokers {sorted(seen)} of {self.broker_count} registered.",
            hint="a slow or overloaded machine may need a larger ready_timeout_s; broker logs below",
            details="\n".join(n.log_tail(15) for n in self.nodes),
        )

    def stop(self) -> None:
        """Remove every container and the network; idempotent. Node logs stay in work_dir unless it was temporary."""
        began = time.monotonic()
        self._admin = None
        failures: list[str] = []

        def remove(node: Node) -> None:
            try:
                node.remove()
            except Exception as exc:  # keep removing the others
                failures.append(f"{node.hostname}: {exc}")

        nodes = self.nodes
        if nodes:
            with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
                list(pool.map(remove, nodes))
        self.brokers, self.controllers, self.zookeeper = [], [], None
        if self.network is not None and self.network._network is not None:
            try:
                self.network.remove()
            except Exception as exc:
                failures.append(f"network {self.network.name}: {exc}")
        self.network = None
        failures += unmount_disks(self.disks)  # after the containers: they hold the mounts
        self.disks = {}
        if self._owns_work_dir and self._work_dir is not None:
            shutil.rmtree(self._work_dir, ignore_errors=True)
        self.timings["teardown_s"] = time.monotonic() - began
        if failures:
            raise ClusterError(
                f"teardown of run {self.run_id} left resources behind: {'; '.join(failures)}",
                hint=f"once this process has exited, `python -m harness cleanup` removes them (now: add `--run-id {self.run_id} --all`)",
            )

    def describe(self) -> dict[str, Any]:
        """cluster.json: brokers, dedicated controllers, ports, addresses, containers, version, run id,
        timings. The client library is the run's (config.json `client`, from its driver), not the cluster's."""
        assert self.distribution is not None, "the cluster has not been started"
        return {
            "run_id": self.run_id,
            "cluster_id": self.cluster_id,
            "kafka_version": self.distribution.version,
            **({"upgrade_to": self.upgrade_to} if self.upgrade_to else {}),
            **({"dynamic_quorum": {"directory_ids": self.directory_ids}} if self.directory_ids else {}),
            "bootstrap_servers": self.bootstrap_servers(),
            "brokers": [
                {"node_id": n.node_id, "hostname": n.hostname, "roles": list(n.roles), "host_port": n.host_port,
                 "address": n.address, "container": n.container.get_wrapped_container().name}
                for n in self.brokers
            ],
            "controllers": [n.node_id for n in self.controllers],
            "dedicated_controllers": [{"node_id": n.node_id, "hostname": n.hostname, "roles": list(n.roles)}
                                      for n in self.controllers if not n.spec.is_broker],
            "python": sys.version.split()[0],
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
        }

    # --- queries --------------------------------------------------------------
    @property
    def capabilities(self) -> frozenset[str]:  # what a nemesis may do to every broker: their nodes' own
        found = frozenset.intersection(*(b.capabilities for b in self.brokers)) if self.brokers else frozenset()
        return found | ({"dynamic_quorum"} if self.dynamic_quorum and self.directory_ids else frozenset())

    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{b.host_port}" for b in self.brokers)

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(
                {"bootstrap.servers": self.bootstrap_servers(), "logger": logging.getLogger("librdkafka.admin")}
            )
        return self._admin

    def node(self, node_id: int) -> Node:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise ClusterError(f"no node {node_id} in this cluster (nodes: {[n.node_id for n in self.nodes]})")

    def broker_views(self) -> dict[int, BrokerView]:
        """Each reachable broker's own metadata, keyed by broker id (see harness.cluster.metadata_views)."""
        return collect_views({b.node_id: f"127.0.0.1:{b.host_port}" for b in self.brokers})

    def active_controller(self) -> Node | None:
        """The active controller, None during an election. KRaft: the quorum leader, read from the
        controllers' own quorum state. ZooKeeper mode: the broker that metadata names as controller."""
        if not self.is_kraft:
            controller_id = self.admin().list_topics(timeout=10).controller_id
            return self.node(controller_id) if controller_id >= 0 else None
        leader_id = read_active_controller(self.controllers)
        return self.node(leader_id) if leader_id is not None else None

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 3,
        config: dict[str, Any] | None = None,
        timeout_s: float = 60.0,
        replica_assignment: list[list[int]] | None = None,
    ) -> None:
        """Create a topic and wait until every partition has a leader.

        `replica_assignment` places replicas explicitly (one list of broker ids per
        partition, preferred leader first); it overrides `partitions` and
        `replication_factor`."""
        topic_config = {k: str(v) for k, v in (config or {}).items()}
        if replica_assignment is not None:
            known = {b.node_id for b in self.brokers}
            unknown = sorted({r for replicas in replica_assignment for r in replicas} - known)
            if unknown:
                raise ClusterError(f"replica assignment names brokers {unknown} that this cluster does not have (it has {sorted(known)}).")
            partitions = len(replica_assignment)
            new = NewTopic(name, num_partitions=partitions, replica_assignment=replica_assignment, config=topic_config)
        elif replication_factor > self.broker_count:
            raise ClusterError(
                f"replication_factor={replication_factor} exceeds the {self.broker_count} brokers of this cluster.",
                hint="lower the replication factor or start more brokers",
            )
        else:
            new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=topic_config)
        request_topic(self.admin(), new, timeout_s)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = self.partition_state(name)
            if len(state) == partitions and all(p["leader"] >= 0 for p in state.values()):
                return
            time.sleep(0.2)
        raise ClusterError(f"topic {name!r} was created but not every partition had a leader within {timeout_s:.0f} s")
