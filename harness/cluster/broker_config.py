"""server.properties and logging configuration for one Kafka node.

Pure functions from a node's place in the cluster to the text of its files,
so they can be read and tested without Docker.
"""

from __future__ import annotations

from dataclasses import dataclass

# Paths inside every node container.
NODE_DIR = "/opt/harness/node"  # bind-mounted per node: conf, logs, pid, clock offset
KAFKA_LIBS = "/opt/kafka/libs"  # bind-mounted read-only: the version's jars
DATA_DIR = "/var/lib/kafka/data"  # inside the container, so it survives process restarts

INTERNAL_PORT = 9092  # broker-to-broker and in-network clients
CONTROLLER_PORT = 9093  # KRaft quorum
EXTERNAL_PORT = 19092  # published on 127.0.0.1 for host clients


@dataclass(frozen=True)
class NodeSpec:
    """One Kafka process's identity: its id, its hostname on the cluster network, its roles."""

    node_id: int
    hostname: str
    roles: tuple[str, ...]  # subset of ("broker", "controller"); () is a ZooKeeper-mode broker; ("zookeeper",)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles or not self.roles

    @property
    def is_zookeeper(self) -> bool:
        return "zookeeper" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles


def quorum_voters(controllers: list[NodeSpec]) -> str:
    return ",".join(f"{c.node_id}@{c.hostname}:{CONTROLLER_PORT}" for c in controllers)


def server_properties(
    node: NodeSpec,
    *,
    controllers: list[NodeSpec],
    broker_count: int,
    host_port: int | None,
    zookeeper_connect: str | None = None,
    overrides: dict[str, object] | None = None,
) -> str:
    """Render server.properties. KRaft unless `zookeeper_connect` is given."""
    props: dict[str, object] = {}
    listeners: list[str] = []
    advertised: list[str] = []
    protocol_map = ["CONTROLLER:PLAINTEXT"]
    if node.is_broker:
        listeners += [f"INTERNAL://0.0.0.0:{INTERNAL_PORT}", f"EXTERNAL://0.0.0.0:{EXTERNAL_PORT}"]
        advertised += [f"INTERNAL://{node.hostname}:{INTERNAL_PORT}"]
        if host_port is not None:
            advertised.append(f"EXTERNAL://127.0.0.1:{host_port}")
        protocol_map += ["INTERNAL:PLAINTEXT", "EXTERNAL:PLAINTEXT"]
        props["inter.broker.listener.name"] = "INTERNAL"
    if zookeeper_connect:
        props["broker.id"] = node.node_id
        props["zookeeper.connect"] = zookeeper_connect
        protocol_map.remove("CONTROLLER:PLAINTEXT")
    else:
        props["process.roles"] = ",".join(r for r in ("broker", "controller") if r in node.roles)
        props["node.id"] = node.node_id
        props["controller.quorum.voters"] = quorum_voters(controllers)
        props["controller.listener.names"] = "CONTROLLER"
        if node.is_controller:
            listeners.append(f"CONTROLLER://0.0.0.0:{CONTROLLER_PORT}")
    props["listeners"] = ",".join(listeners)
    if advertised:
        props["advertised.listeners"] = ",".join(advertised)
    props["listener.security.protocol.map"] = ",".join(protocol_map)
    props["log.dirs"] = DATA_DIR
    internal_rf = min(3, broker_count)
    props.update(
        {
            "offsets.topic.replication.factor": internal_rf,
            "transaction.state.log.replication.factor": internal_rf,
            "transaction.state.log.min.isr": min(2, internal_rf),
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "false",  # a typo in a workload must not create a topic silently
            "unclean.leader.election.enable": "false",
        }
    )
    props.update(overrides or {})
    lines = [f"# node {node.node_id} ({node.hostname}), written by the harness"]
    lines += [f"{key}={value}" for key, value in props.items()]
    return "\n".join(lines) + "\n"


ZOOKEEPER_PORT = 2181


def zookeeper_properties() -> str:
    """A standalone ZooKeeper for ZooKeeper-era Kafka, run from the Kafka version's own jars."""
    return (
        "dataDir=/var/lib/zookeeper\n"
        f"clientPort={ZOOKEEPER_PORT}\n"
        "maxClientCnxns=0\n"
        "admin.enableServer=false\n"
        "4lw.commands.whitelist=*\n"
    )


def log4j2_properties() -> str:
    """Log4j 2 configuration (Kafka 4.x): everything at INFO into NODE_DIR/server.log."""
    return f"""status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {NODE_DIR}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d{{ISO8601}}] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


def log4j1_properties() -> str:
    """Log4j 1 / reload4j configuration (Kafka before 4.0), same file and format."""
    return f"""log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={NODE_DIR}/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
"""
