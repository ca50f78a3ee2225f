"""Two Kafka versions in one cluster: a rolling upgrade's jars, and Kafka's feature levels.

Every node container mounts the cluster's version A at KAFKA_LIBS; a cluster started with
`upgrade_to=B` also mounts B's jars read-only at UPGRADE_LIBS (a container's mounts cannot change
after it starts). A node's start script (harness/cluster/node.py) runs the jars that `run.env` in
its folder names, A's when it has none; `use(node, version)` rewrites that file, so the node's next
start (a rolling upgrade's, or any fault's restart) runs that version. Kafka 4.0 dropped log4j 1, so
the file also names the logging config the version reads (a 3.9 -> 4.x upgrade changes it).

Finalizing the upgrade (Kafka's feature levels) is harness/cluster/features.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cluster import class_archive
from harness.cluster.broker_config import KAFKA_LIBS
from harness.errors import HarnessError, KafkaVersionError
from harness.provision.kafka_jars import KafkaDistribution, ensure_kafka_jars, kraft_supported, parse_version

if TYPE_CHECKING:
    from harness.cluster.node import KafkaNodeContainer, Node

UPGRADE_LIBS = "/opt/kafka/libs-upgrade"  # B's jars, read-only, beside A's
RUN_ENV = "run.env"  # in a node's folder: LIBS and LOG_OPT of the version its next start runs
OLDEST_TARGET = (3, 9)  # FeatureCommand's version-mapping names a release's levels (KIP-1022): features.py


def check_upgrade(source: str, target: str | None) -> None:
    """Refuse (HarnessError, exit 2) an upgrade that cannot be run, before anything starts."""
    if target is None:
        return
    a, b = parse_version(source), parse_version(target)
    if not kraft_supported(source):
        raise HarnessError(f"--upgrade-to {target} from Kafka {source}: a rolling upgrade here starts from a KRaft cluster, "
                           f"and {source} predates KRaft (3.3); its ZooKeeper-era upgrade path is not built.",
                           hint="use --kafka-version 3.3.1 or later (e.g. 3.9.1 or 4.1.1)")
    if b <= a:
        raise HarnessError(f"--upgrade-to {target} is not newer than --kafka-version {source}.",
                           hint="give --upgrade-to a later release than --kafka-version (e.g. --kafka-version 4.1.1 --upgrade-to 4.4.0)")
    if b[:2] < OLDEST_TARGET:
        raise HarnessError(f"--upgrade-to {target}: finalizing an upgrade needs the new version's FeatureCommand "
                           "version-mapping (Kafka 3.9 and later).", hint="upgrade to 3.9.0 or later")


def resolve_target(source: str, target: str | None) -> KafkaDistribution | None:
    """B's jars (resolved from Maven Central on first use), after check_upgrade; None without an upgrade.
    A version Maven Central does not have is a KafkaVersionError (exit 2) naming the known ones."""
    check_upgrade(source, target)
    if target is None:
        return None
    try:
        return ensure_kafka_jars(target)
    except KafkaVersionError as exc:
        raise KafkaVersionError(f"--upgrade-to: {exc.message}", hint=exc.hint, details=exc.details) from None


@dataclass
class Upgrade:
    """A cluster's two versions, and what the upgrade finalized (set by the nemesis that runs it)."""

    source: KafkaDistribution
    target: KafkaDistribution
    features: dict[str, Any] = field(default_factory=dict)
    target_archive: Path | None = None  # B's class archive (harness/cluster/class_archive.py), mounted beside its jars

    def libs(self, version: str) -> str:
        return UPGRADE_LIBS if version == self.target.version else KAFKA_LIBS

    def mount(self, container: "KafkaNodeContainer") -> None:
        container.with_kafka_libs(self.target.libs, at=UPGRADE_LIBS, archive=self.target_archive)

    def prepare(self, conf: Any) -> None:
        """Write B's logging config beside A's in a node's conf folder (the same file when they log alike)."""
        from harness.cluster.node import write_logging

        write_logging(conf, self.target.logging)

    def use(self, node: "Node", version: str) -> None:
        """The node's next start runs `version` (A or B); the running JVM is not touched."""
        from harness.cluster.node import LOG_OPTS, archive_at

        dist = self.target if version == self.target.version else self.source
        if dist.version != version:
            raise ValueError(f"version {version} is neither {self.source.version} nor {self.target.version}")
        assert node.transport is not None
        libs = self.libs(version)  # and its class archive, where one is mounted (harness/cluster/class_archive.py)
        node.transport.write_file(RUN_ENV, f"LIBS='{libs}' LOG_OPT='{LOG_OPTS[dist.logging]}' ARCHIVE='{archive_at(libs)}'\n")

    def version_of(self, node: "Node") -> str:
        """The version the node's next start runs (and its running JVM, unless `use` was called since it started)."""
        assert node.transport is not None
        named = node.transport.read_file(RUN_ENV)[0].decode(errors="replace")
        return self.target.version if UPGRADE_LIBS in named else self.source.version

    def describe(self, nodes: list["Node"]) -> dict[str, Any]:
        """config.json's `upgrade`: both versions, the version each node runs now, the features finalized."""
        return {"from": self.source.version, "to": self.target.version,
                "nodes": {str(n.node_id): self.version_of(n) for n in nodes}, "features": self.features}


def for_cluster(source: KafkaDistribution, target: str | None, image: str | None = None) -> Upgrade | None:
    """The Upgrade of a cluster started on `source` with `upgrade_to=target`, its jars resolved (and,
    given the cluster's image, their class archive: harness/cluster/class_archive.py); None without one."""
    resolved = resolve_target(source.version, target)
    if resolved is None:
        return None
    return Upgrade(source, resolved, target_archive=class_archive.ensure(resolved, image) if image is not None else None)
