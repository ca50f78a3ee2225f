"""Who leads the KRaft controller quorum, read from the controllers' own state.

Each voter persists `quorum-state` (JSON with leaderId and leaderEpoch) in
the metadata log directory when the epoch changes. The entry with the
highest epoch is the newest view; a voter cut off from the quorum may still
show an older leader at a lower epoch, which this ignores.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from harness.cluster.broker_config import CONTROLLER_PORT, DATA_DIR, KAFKA_LIBS, NODE_DIR

if TYPE_CHECKING:
    from pathlib import Path

    from harness.cluster.broker_config import NodeSpec
    from harness.cluster.node import Node

QUORUM_STATE = f"{DATA_DIR}/__cluster_metadata-0/quorum-state"


def parse_quorum_state(text: str) -> tuple[int, int] | None:
    """(leader epoch, leader id) from a quorum-state file's text; None if it names no leader."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    leader, epoch = data.get("leaderId", -1), data.get("leaderEpoch", -1)
    return (epoch, leader) if isinstance(leader, int) and leader >= 0 else None


def read_active_controller(controllers: list["Node"]) -> int | None:
    """The node id of the quorum leader with the highest epoch among the controllers that answer."""
    def read(node: "Node") -> tuple[int, int] | None:
        code, out = node.exec(f"cat {QUORUM_STATE}")
        return parse_quorum_state(out) if code == 0 else None

    # Every controller at once: each read is a docker exec. Measured on a quiet host, 10 looks
    # each: the controller read 0.15 s one after another, 0.085 s at once (median), and a whole
    # look of the roles 0.24 s against 0.17 s.
    with ThreadPoolExecutor(max_workers=max(1, len(controllers))) as pool:
        views = [v for v in pool.map(read, controllers) if v is not None]
    return max(views)[1] if views else None


# --- a dynamic controller quorum (KIP-853) ----------------------------------------------------------
# Only a run whose packages ask for it (nemesis/quorum.py requires `dynamic_quorum`) gets one; every
# other cluster keeps the static `controller.quorum.voters` and its format, byte for byte.
# The flags are in 3.9's jars as in 4.4's (StorageTool format --initial-controllers, MetadataQuorumCommand
# add-controller / remove-controller); a dedicated quorum of 3 or more lets one voter go without losing
# the majority (a combined node's removal would also take a broker away: not built).
DYNAMIC_MIN_VERSION = (3, 9)
DYNAMIC_MIN_CONTROLLERS = 3
QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"
STORAGE_TOOL = "kafka.tools.StorageTool"


def refuse_dynamic(version: str, dedicated_controllers: int) -> None:
    """ClusterError (exit 2) when a dynamic quorum cannot be made: checked by the run before anything is
    created (harness/run/steps.py), and again by the cluster before any container starts."""
    from harness.errors import ClusterError
    from harness.provision.kafka_jars import parse_version

    if tuple(parse_version(version)[:2]) < DYNAMIC_MIN_VERSION:
        raise ClusterError(f"a dynamic controller quorum (KIP-853) needs Kafka 3.9 or later, not {version}.",
                           hint="use --kafka-version 3.9.1 or later (4.4.0 is the default), or leave quorum out of --nemesis")
    if dedicated_controllers < DYNAMIC_MIN_CONTROLLERS:
        raise ClusterError(f"the quorum package needs {DYNAMIC_MIN_CONTROLLERS} or more dedicated controllers, and this run has "
                           f"{dedicated_controllers or 'none (every broker is also a controller)'}: removing one voter of fewer "
                           "would leave no majority.",
                           hint="add --controllers 3 (or 5)")


def new_directory_id() -> str:
    """A Kafka Uuid in its text form (unpadded URL-safe base64 of 16 bytes), never one that starts with "-"."""
    import base64
    import uuid

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def bootstrap_servers(controllers: list["NodeSpec"]) -> str:
    return ",".join(f"{c.hostname}:{CONTROLLER_PORT}" for c in controllers)


def initial_controllers(controllers: list["NodeSpec"], directory_ids: dict[int, str]) -> str:
    """StorageTool's --initial-controllers: id@host:port:directoryId for every voter, the same on each controller."""
    return ",".join(f"{c.node_id}@{c.hostname}:{CONTROLLER_PORT}:{directory_ids[c.node_id]}" for c in controllers)


def dynamic_properties(text: str, spec: "NodeSpec", controllers: list["NodeSpec"]) -> str:
    """A node's server.properties for a dynamic quorum: `controller.quorum.bootstrap.servers` instead of
    the static `controller.quorum.voters`; a dedicated controller also advertises its CONTROLLER
    listener by name (add-controller registers the advertised endpoint; the listener is 0.0.0.0)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("controller.quorum.voters="):
            line = f"controller.quorum.bootstrap.servers={bootstrap_servers(controllers)}"
        lines.append(line)
    if spec.is_controller and not spec.is_broker:
        lines.append(f"advertised.listeners=CONTROLLER://{spec.hostname}:{CONTROLLER_PORT}")
    return "\n".join(lines) + "\n"


def write_dynamic(path: "Path", spec: "NodeSpec", controllers: list["NodeSpec"]) -> None:
    path.write_text(dynamic_properties(path.read_text(), spec, controllers))


def format_dynamic(cluster: Any) -> list["Node"]:
    """Format each dedicated controller's storage with the initial voter set (kraft.version 1), each
    under a new metadata directory id (kept in `cluster.directory_ids`); the controllers formatted.
    Brokers are formatted by their start script as always (a broker needs no voter set)."""
    from harness.cluster.node import share_opt
    from harness.errors import ClusterError

    controllers = [n for n in cluster.controllers if not n.spec.is_broker]
    cluster.directory_ids = directory_ids = {n.node_id: new_directory_id() for n in controllers}
    cluster_id = cluster.cluster_id
    voters = initial_controllers([c.spec for c in controllers], directory_ids)

    def one(node: "Node") -> tuple["Node", int, str]:
        # start.sh's own format line (harness/cluster/node.py), with the voters it cannot be given
        code, out = node.exec(f"cd {NODE_DIR} && timeout 120 java {share_opt(KAFKA_LIBS)} -cp '{KAFKA_LIBS}/*' {STORAGE_TOOL} format --ignore-formatted "
                              f"-t {cluster_id} -c conf/server.properties --initial-controllers {voters} > format.log 2>&1 "
                              "|| { cat format.log; exit 3; }")
        return node, code, out

    with ThreadPoolExecutor(max_workers=max(1, len(controllers))) as pool:
        for node, code, out in pool.map(one, controllers):
            if code != 0:
                raise ClusterError(f"controller {node.node_id} ({node.hostname}): Kafka refused to format a dynamic quorum.",
                                   hint="the storage tool's output is below", details=out[-3000:])
    return controllers


def parse_voters(status: str) -> list[dict[str, object]] | None:
    """`describe --status`'s CurrentVoters: [{"id": 101, "directoryId": "...", ...}], None when absent."""
    for line in status.splitlines():
        key, _, rest = line.partition(":")
        if key.strip() == "CurrentVoters":
            try:
                voters = json.loads(rest.strip())
            except json.JSONDecodeError:
                return None
            return [{"id": v.get("id"), "directory_id": v.get("directoryId")} for v in voters if isinstance(v, dict)]
    return None
