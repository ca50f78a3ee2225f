"""`harness cluster up | down | status`: a standing local cluster, acted on as a target is.

`up` starts KRaft brokers in containers (the runs' machinery: harness/cluster/kafka_cluster.py) from
an image that also has sshd, and leaves them running when it exits. Each broker:

- listens for clients on 127.0.0.1 only, on a SASL_SSL listener (SCRAM-SHA-512, its user made when
  storage is formatted) whose certificate a CA made for this cluster signed;
- runs sshd on a port published on 127.0.0.1, which takes only the key made for this cluster, as
  root (iptables and signals need it), with a host key of its own that known_hosts pins.

Every key and password is generated (harness/target/keys.py) into <cache>/standing/<id>/secrets, a
0700 folder. The target file (<cache>/standing/<id>/target.toml) names those files and holds no
secret itself; `up` prints its path as its last line. Its containers carry the run label but no
owner, so `harness cleanup` keeps them (a dead owner is not proof that they are abandoned);
`cluster down` removes them, the network and the folder with every secret.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from harness.cluster.broker_config import EXTERNAL_PORT, KAFKA_LIBS, NODE_DIR, DATA_DIR
from harness.cluster.kafka_cluster import KafkaCluster, new_run_id
from harness.cluster.node import KafkaNodeContainer, Node, network_address
from harness.errors import ClusterError, HarnessError
from harness.provision.settings import RUN_LABEL, cache_dir
from harness.target.keys import SCRAM_MECHANISM, SCRAM_USER, StandingSecrets, generate, private_folder, write_private

STANDING_LABEL = "io.kafka-harness.standing"
SSH_PORT = 22
SECRETS_MOUNT = "/opt/secrets"


def standing_root() -> Path:
    return cache_dir() / "standing"


def broker_overrides(keystore_password: str) -> dict[str, str]:
    """server.properties for the SASL_SSL client listener; inter-broker and controller traffic stay
    on the cluster's own network (PLAINTEXT), which nothing outside the containers reaches."""
    return {
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "listener.name.external.sasl.enabled.mechanisms": SCRAM_MECHANISM,
        f"listener.name.external.{SCRAM_MECHANISM.lower()}.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.external.ssl.keystore.type": "PKCS12",
        "listener.name.external.ssl.keystore.location": f"{SECRETS_MOUNT}/broker.p12",
        "listener.name.external.ssl.keystore.password": keystore_password,
        "listener.name.external.ssl.key.password": keystore_password,
    }


SSHD = (f"mkdir -p /run/sshd && /usr/sbin/sshd -h {SECRETS_MOUNT}/ssh_host_ed25519_key "
        f"-o AuthorizedKeysFile={SECRETS_MOUNT}/authorized_keys -o PasswordAuthentication=no "
        "-o KbdInteractiveAuthentication=no -o PermitRootLogin=prohibit-password -o UsePAM=no")
FORMAT = (f"cd {NODE_DIR} && java -cp '{KAFKA_LIBS}/*' kafka.tools.StorageTool format --ignore-formatted -t {{cluster_id}} "
          f"-c conf/server.properties --add-scram \"$(cat {SECRETS_MOUNT}/scram.arg)\" > format.log 2>&1 || {{{{ cat format.log; exit 3; }}}}")


class StandingCluster(KafkaCluster):
    """A KafkaCluster whose brokers run sshd and a SASL_SSL listener, and that outlives its process."""

    def __init__(self, folder: Path, brokers: int = 3, kafka_version: str | None = None) -> None:
        self.folder = private_folder(folder)
        self.secrets = generate(folder / "secrets", list(range(1, brokers + 1)))
        super().__init__(brokers=brokers, kafka_version=kafka_version, run_id=f"standing-{new_run_id()}",
                         work_dir=folder, broker_config=broker_overrides(self.secrets.keystore_password()))
        self.ssh_ports: dict[int, int] = {}

    def labels(self) -> dict[str, str]:
        return {RUN_LABEL: self.run_id, STANDING_LABEL: str(self.folder)}  # no owner: see the module docstring

    def client_settings(self) -> dict[str, Any]:
        return {"security.protocol": "sasl_ssl", "sasl.mechanism": SCRAM_MECHANISM, "sasl.username": SCRAM_USER,
                "sasl.password": self.secrets.scram_password(), "ssl.ca.location": str(self.secrets.ca)}

    def admin(self) -> Any:
        import logging

        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient({**self.client_settings(), "bootstrap.servers": self.bootstrap_servers(),
                                       "logger": logging.getLogger("librdkafka.admin")})
        return self._admin

    def broker_views(self) -> Any:
        from harness.cluster.metadata_views import collect_views

        return collect_views({b.node_id: f"127.0.0.1:{b.host_port}" for b in self.brokers}, settings=self.client_settings())

    def _create_nodes(self, image: str) -> None:
        from testcontainers.core.network import Network

        from harness.provision.base_image import SSH_PACKAGES, ensure_base_image

        assert self.distribution is not None
        if not self.is_kraft or tuple(int(x) for x in self.distribution.version.split(".")[:2]) < (3, 5):
            raise HarnessError("a standing cluster needs Kafka 3.5 or later (its SCRAM users are made when storage is formatted).",
                               hint="use --kafka-version 4.4.0 or another 3.5+ release")
        image = ensure_base_image(extra_packages=SSH_PACKAGES)
        self.network = Network(docker_network_kw={"labels": self.labels()})
        self.network.name = f"kh-{self.run_id}"
        self.network.create()
        specs, _ = self._node_specs()
        assert self.distribution is not None
        for spec in specs:
            node_dir = self.work_dir / "brokers" / str(spec.node_id)
            (node_dir / "conf").mkdir(parents=True, exist_ok=True)
            (node_dir / "clock").mkdir(exist_ok=True)
            container = (KafkaNodeContainer(image).with_node(spec, self.run_id).with_kafka_libs(self.distribution.libs)
                         .with_node_dir(node_dir).with_network(self.network)
                         .with_volume_mapping(str(self.secrets.node(spec.node_id)), SECRETS_MOUNT, "ro"))
            container._labels = {**self.labels(), "io.kafka-harness.cluster.node-id": str(spec.node_id)}
            container.ports[f"{SSH_PORT}/tcp"] = ("127.0.0.1",)  # loopback only, as the client listener
            node = Node(spec=spec, container=container, node_dir=node_dir)
            self.brokers.append(node)
            self.controllers.append(node)
            container.start()
            node.host_port = int(container.get_exposed_port(EXTERNAL_PORT))
            self.ssh_ports[spec.node_id] = int(container.get_exposed_port(SSH_PORT))
            node.address = network_address(container, self.network)
            node.write_files(self.distribution.logging, specs, specs, zookeeper_connect=None, overrides=self.broker_config)
            code, out = node.exec(SSHD)
            if code != 0:
                raise ClusterError(f"sshd did not start on node {spec.node_id}: {out.strip()[:400]}")

    def _start_processes(self) -> None:
        for node in self.brokers:  # formatted with the SCRAM user first, then started as every run's node is
            code, out = node.exec(FORMAT.format(cluster_id=self.cluster_id))
            if code != 0:
                raise ClusterError(f"node {node.node_id}: formatting its storage failed", details=out[-2000:])
        for node in self.brokers:
            node.start_process()

    def write_target(self) -> Path:
        """The target file for this cluster (no secret in it: it names the files that hold them)."""
        s: StandingSecrets = self.secrets
        lines = []
        for node in self.brokers:
            public = " ".join(s.host_public_key(node.node_id))
            lines.append(f"[127.0.0.1]:{self.ssh_ports[node.node_id]} {public}")
        write_private(s.known_hosts, "\n".join(lines) + "\n")
        brokers = "\n".join(f"""
[[brokers]]
id = {n.node_id}
host = "127.0.0.1"
port = {self.ssh_ports[n.node_id]}
address = "{n.address}"  # on the cluster's own network: what partitions cut
""" for n in self.brokers)
        assert self.distribution is not None
        text = f"""# A standing local cluster made by `harness cluster up` ({self.run_id}); `harness cluster down` removes it.
name = "{self.run_id}"
bootstrap_servers = "{self.bootstrap_servers()}"
kafka_version = "{self.distribution.version}"

[security]
protocol = "SASL_SSL"
sasl_mechanism = "{SCRAM_MECHANISM}"
username = "{SCRAM_USER}"
password_file = "secrets/{s.password_file.name}"
ca_file = "secrets/{s.ca.name}"

[ssh]
user = "root"
key_file = "secrets/{s.client_key.name}"
known_hosts = "secrets/{s.known_hosts.name}"
start = "{NODE_DIR}/start.sh"
stop = "kill $(cat {NODE_DIR}/kafka.pid)"
pid = "p=$(cat {NODE_DIR}/kafka.pid 2>/dev/null) && kill -0 \\"$p\\" 2>/dev/null && echo \\"$p\\""
log_file = "{NODE_DIR}/server.log"
metadata_dir = "{DATA_DIR}"
{brokers}"""
        path = write_private(self.folder / "target.toml", text)
        (self.folder / "standing.json").write_text(json.dumps({"run_id": self.run_id, "target": str(path),
                                                               "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
        return path


def up(brokers: int = 3, kafka_version: str | None = None) -> Path:
    """Start a standing cluster; the path of its target file. A failure removes what was made."""
    folder = standing_root() / time.strftime("%Y%m%dT%H%M%S")
    cluster = StandingCluster(folder, brokers, kafka_version)
    try:
        cluster.start()
        return cluster.write_target()
    except BaseException:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
        raise


def standing() -> list[dict[str, Any]]:
    """Every standing cluster of this machine: its record, folder and containers' states."""
    import docker

    found = []
    client = docker.from_env()
    for record_path in sorted(standing_root().glob("*/standing.json")):
        record = json.loads(record_path.read_text())
        listed = client.api.containers(all=True, filters={"label": f"{RUN_LABEL}={record['run_id']}"})
        record.update(folder=str(record_path.parent),
                      containers={c["Names"][0].lstrip("/"): c.get("State", "") for c in listed})
        found.append(record)
    return found


def down(which: str | None = None) -> list[str]:
    """Remove the standing cluster `which` (run id or folder; None: every one): containers, network,
    folder and secrets. What was removed, one line each."""
    import docker

    client = docker.from_env()
    removed: list[str] = []
    clusters = [c for c in standing() if which in (None, c["run_id"], c["folder"], Path(c["folder"]).name)]
    if which is not None and not clusters:
        raise HarnessError(f"no standing cluster {which!r}.", hint="`harness cluster status` lists them")
    for cluster in clusters:
        label = {"label": f"{RUN_LABEL}={cluster['run_id']}"}
        for container in client.containers.list(all=True, filters=label):
            container.remove(force=True)
            removed.append(f"container {container.name}")
        for network in client.networks.list(filters=label):
            network.remove()
            removed.append(f"network {network.name}")
        shutil.rmtree(cluster["folder"])
        removed.append(f"folder {cluster['folder']} (its keys, CA and passwords)")
    return removed
