"""One Kafka node: a long-lived container and the Kafka JVM inside it.

The container's PID 1 is tini running `sleep infinity`; the JVM is started
by `docker exec` of a small script, detached, and adopted by tini. So a
fault injector can SIGKILL, SIGSTOP or restart the JVM by its PID while the
container, its address and its data directory stay. The JVM is started
under libfaketime reading `clock/offset` (default "+0"), with the monotonic
clock left alone, so its wall clock can be shifted later. libfaketime's
"monotonic fix" for old glibc is forced off: with it on, the JVM's timed
condition waits return early and every thread spins (100 % system CPU, no
KRaft election).
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.errors
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from harness.cluster.transport import DockerTransport, Transport
from harness.cluster.broker_config import (DATA_DIR, EXTERNAL_PORT, KAFKA_LIBS, NODE_DIR, NodeSpec, log4j1_properties,
                                          log4j2_properties, server_properties, zookeeper_properties)
from harness.errors import ClusterError
from harness.provision.owner import run_labels

# Ryuk (testcontainers' reaper) is an image we cannot pull; `cleanup` does its job. Here, where
# every node container is made: the class archive's build makes one before any cluster exists.
testcontainers_config.ryuk_disabled = True

FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
DEFAULT_HEAP = "-Xms256m -Xmx1g"

START_SCRIPT = """#!/bin/sh
# Start this node's Kafka JVM detached from `docker exec`: tini (PID 1) adopts it,
# and its PID goes to kafka.pid. With --format CLUSTER_ID, format storage first.
set -eu
cd {node_dir}
# Running means alive and not a zombie: kill -0 answers for a SIGKILLed JVM that tini has not reaped
# yet, and a roll's restart 1 s after its kill then started nothing (2026-11-26, run 20261126T015316-c1f2f4:
# broker 3 down for 93 s, until the heal).
if [ -s kafka.pid ] && state=$(ps -o stat= -p "$(cat kafka.pid)" 2>/dev/null) && [ "${{state#Z}}" = "$state" ]; then cat kafka.pid; exit 0; fi
# The jars, their logging option and their class archive (harness/cluster/class_archive.py); a
# rolling upgrade names others in run.env (harness/cluster/versions.py), the archive's build a DUMP_OPT.
LIBS='{libs}' LOG_OPT='{log_opt}' ARCHIVE='{archive}' DUMP_OPT=''
if [ -s run.env ]; then . ./run.env; fi
CDS_OPT=''
if [ -n "$ARCHIVE" ] && [ -s "$ARCHIVE" ]; then CDS_OPT="-XX:SharedArchiveFile=$ARCHIVE"; fi
if [ "${{1:-}}" = "--format" ]; then
  java $CDS_OPT -cp "$LIBS/*" $LOG_OPT kafka.tools.StorageTool format --ignore-formatted -t "$2" -c conf/server.properties > format.log 2>&1 || {{ cat format.log; exit 3; }}
fi
echo "--- start $(date -u +%FT%TZ) jars $LIBS" >> stdout.log
LD_PRELOAD={faketime} FAKETIME_TIMESTAMP_FILE={node_dir}/clock/offset FAKETIME_DONT_FAKE_MONOTONIC=1 FAKETIME_FORCE_MONOTONIC_FIX=0 FAKETIME_CACHE_DURATION=1 \\
  nohup java {jvm_opts} $CDS_OPT $DUMP_OPT $LOG_OPT -cp "$LIBS/*" {main} >> stdout.log 2>&1 < /dev/null &
echo $! > kafka.pid
cat kafka.pid
"""


# Kafka before 2.x reaches into JDK internals (mmap'd index unmapping through
# sun.nio.ch.DirectBuffer); Java 17 refuses that unless these are opened.
JDK17_OPENS = "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-exports=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED"

KAFKA_MAIN = "kafka.Kafka conf/server.properties"
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain conf/zookeeper.properties"


def archive_at(libs_at: str) -> str:
    """Where a node container mounts the class archive of the jars it mounts at `libs_at`:
    /opt/kafka/libs -> /opt/kafka/libs.jsa, the upgrade's /opt/kafka/libs-upgrade -> libs-upgrade.jsa."""
    return libs_at.rstrip("/") + ".jsa"


def share_opt(libs_at: str) -> str:
    """A shell word for a command run in a node container: the class archive of the jars at
    `libs_at` when the container mounts one, else nothing (a Kafka tool started inside a node)."""
    archive = archive_at(libs_at)
    return f"$([ -s {archive} ] && echo -XX:SharedArchiveFile={archive})"


def start_script(log_opt: str, main: str = KAFKA_MAIN, heap: str = DEFAULT_HEAP) -> str:
    """The node's start script; `main` is the JVM's main class and arguments (Kafka or ZooKeeper)."""
    jvm_opts = f"{heap} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true -Dkafka.logs.dir={NODE_DIR} {JDK17_OPENS}"
    return START_SCRIPT.format(node_dir=NODE_DIR, libs=KAFKA_LIBS, archive=archive_at(KAFKA_LIBS), log_opt=log_opt, faketime=FAKETIME_LIB, jvm_opts=jvm_opts, main=main)


# The JVM option that reads each kind of logging config (a node's conf/, written by write_logging).
LOG_OPTS = {"log4j2": f"-Dlog4j2.configurationFile={NODE_DIR}/conf/log4j2.properties",
            "log4j1": f"-Dlog4j.configuration=file:{NODE_DIR}/conf/log4j.properties"}


def write_logging(conf: Path, logging: str) -> str:
    """Write the logging config of kind `logging` (log4j2 or log4j1) into `conf`; the JVM option that reads it."""
    if logging == "log4j2":
        (conf / "log4j2.properties").write_text(log4j2_properties())
    else:
        (conf / "log4j.properties").write_text(log4j1_properties())
    return LOG_OPTS["log4j2" if logging == "log4j2" else "log4j1"]


class KafkaNodeContainer(DockerContainer):
    """A testcontainers container that hosts one Kafka process (not as PID 1)."""

    def __init__(self, image: str) -> None:
        super().__init__(image)
        self.with_command(["tini", "--", "sleep", "infinity"])
        self._labels: dict[str, str] = {}
        self._extra: dict[str, object] = {"cap_add": ["NET_ADMIN"]}  # iptables for partitions; never privileged

    def with_node(self, spec: NodeSpec, run_id: str) -> "KafkaNodeContainer":
        self.with_name(f"kh-{run_id}-{spec.hostname}")
        self.with_network_aliases(spec.hostname)
        self._extra["hostname"] = spec.hostname
        # The run id and its owner (host, PID, start time): `cleanup` never removes what a live process owns.
        self._labels.update({**run_labels(run_id), "io.kafka-harness.cluster.node-id": str(spec.node_id)})
        if spec.is_broker:
            self.ports[f"{EXTERNAL_PORT}/tcp"] = ("127.0.0.1",)  # loopback only, random host port
        return self

    def with_kafka_libs(self, libs: Path, at: str = KAFKA_LIBS, archive: Path | None = None) -> "KafkaNodeContainer":
        """Mount a version's jars read-only (a rolling upgrade's second version goes beside the first),
        and their class archive beside them when one was built (harness/cluster/class_archive.py)."""
        self.with_volume_mapping(str(libs), at, "ro")
        if archive is not None:
            self.with_volume_mapping(str(archive), archive_at(at), "ro")
        return self

    def with_node_dir(self, node_dir: Path) -> "KafkaNodeContainer":
        return self.with_volume_mapping(str(node_dir), NODE_DIR, "rw")

    def start(self) -> "KafkaNodeContainer":
        self.with_kwargs(labels=self._labels, **self._extra)
        super().start()
        return self


@dataclass
class Node:
    """A started node: its identity, container, host port (brokers) and cluster-network address.
    Every action on it goes through `transport` (harness/cluster/transport.py); `disk` is its
    lossy data directory (harness/cluster/lossy_mount.py) when the cluster has one."""

    spec: NodeSpec
    container: KafkaNodeContainer
    node_dir: Path
    host_port: int | None = None
    address: str = ""
    last_ps: tuple[int, str] | None = None  # the last `ps` of pid(): (exit code, output)
    transport: Transport | None = None
    disk: Any = None

    def __post_init__(self) -> None:
        if self.transport is None:
            self.transport = DockerTransport(self.container, self.node_dir, NODE_DIR)

    @property
    def capabilities(self) -> frozenset[str]:
        """What a nemesis may do to this node (nemesis/registry.py CAPABILITIES)."""
        assert self.transport is not None
        return self.transport.capabilities | ({"lossy_data"} if self.disk is not None else frozenset())

    @property
    def node_id(self) -> int:
        return self.spec.node_id

    @property
    def hostname(self) -> str:
        return self.spec.hostname

    @property
    def roles(self) -> tuple[str, ...]:
        return self.spec.roles

    @property
    def clock_offset_path(self) -> Path:
        return self.node_dir / "clock" / "offset"

    def write_files(self, logging: str, broker_specs: list[NodeSpec], controller_specs: list[NodeSpec],
                    zookeeper_connect: str | None, overrides: dict[str, object] | None) -> None:
        """conf/ (server or ZooKeeper properties, the logging config), start.sh and a zero clock
        offset, in the node folder that the container mounts."""
        conf = self.node_dir / "conf"
        main = KAFKA_MAIN
        if self.spec.is_zookeeper:
            (conf / "zookeeper.properties").write_text(zookeeper_properties())
            main = ZOOKEEPER_MAIN
        else:
            (conf / "server.properties").write_text(server_properties(
                self.spec, controllers=controller_specs, broker_count=len(broker_specs), host_port=self.host_port,
                zookeeper_connect=zookeeper_connect, overrides=overrides))
        log_opt = write_logging(conf, logging)
        script = self.node_dir / "start.sh"
        script.write_text(start_script(log_opt, main=main))
        script.chmod(0o755)
        self.clock_offset_path.write_text("+0\n")

    def remove(self) -> None:
        """Force-remove the container; one already gone (removed from outside the harness) is no failure."""
        try:
            self.container.stop(force=True)
        except docker.errors.NotFound:
            pass

    def exec(self, command: str) -> tuple[int, str]:
        """Run `sh -c command` on the node; return (exit code, combined output)."""
        assert self.transport is not None
        return self.transport.run(command)

    def read_address(self, network: Network) -> str:
        """The node's address on `network`, read again from Docker (a separate KRaft controller's
        was still "" when first read, and every iptables cut aimed at it failed)."""
        self.address = network_address(self.container, network)
        return self.address

    def log_size(self, name: str = "server.log") -> int:
        """How many bytes the node's log `name` holds now: a mark to read what it logs after."""
        assert self.transport is not None
        return self.transport.size(name)

    def read_log(self, offset: int = 0, name: str = "server.log") -> tuple[str, int]:
        """What the node's log `name` holds from byte `offset` on, and the offset after it."""
        assert self.transport is not None
        data, end = self.transport.read_file(name, offset)
        return data.decode(errors="replace"), end

    def start_process(self, format_cluster_id: str | None = None) -> int:
        """Start the Kafka JVM (a no-op if it runs); format storage first when given a cluster id."""
        args = f" --format {format_cluster_id}" if format_cluster_id else ""
        assert self.transport is not None
        code, out = self.transport.start_broker(args)
        if code != 0:
            raise ClusterError(
                f"node {self.node_id} ({self.hostname}) could not start Kafka: {first_error_line(out)}",
                hint="Kafka rejected its configuration or storage; see the output below",
                details=out[-3000:],
            )
        last = (out.strip().splitlines() or [""])[-1]
        if last.isdigit():
            return int(last)
        # docker exec under CPU starvation can answer exit 0 with no output (seen for ps at load 41,
        # and for this start at load ~15 in today's soak: "kill stop: list index out of range", the
        # broker left down until the heal). The script writes its PID to kafka.pid before printing it.
        for attempt in range(5):
            pid = self.pid_on_file()
            if pid is not None:
                return pid
            time.sleep(0.2 * (attempt + 1))
        raise ClusterError(f"node {self.node_id} ({self.hostname}): the start script gave no PID and wrote no kafka.pid.",
                           hint="the Docker engine may be starved of CPU; see the output below", details=out[-3000:])

    def pid_on_file(self) -> int | None:
        """The PID that start.sh last wrote, read on the host with no exec into the container:
        what a fault records as it strikes (a `ps` exec took 0.1-1 s under load, and that wait
        sat between a replayed fault's moment and its record). `pid()` says if it still runs."""
        assert self.transport is not None
        text = self.transport.read_file("kafka.pid")[0].decode(errors="replace").strip()
        return int(text) if text else None

    def pid(self) -> int | None:
        """The PID of the running Kafka JVM inside the container, or None if it is not running."""
        pid = self.pid_on_file()
        if pid is None:
            return None
        # ps exits 0 with the state, or 1 for no such process. Any other exit is the exec failing,
        # not an answer: a 4.3.1 detection run at load ~18 failed "exited during start-up" while
        # that broker's JVM logged until the teardown a second later. Ask again; still no answer
        # is not proof of death (the caller's own deadline decides).
        for attempt in range(3):
            code, out = self.exec(f"ps -o stat= -p {pid}")
            self.last_ps = (code, out.strip()[:200])
            state = out.strip()
            if code == 1 or (code == 0 and state):  # exit 0 with no state is no answer either: seen
                # at load 41, when a 1.1.1 run failed "zookeeper exited during start-up (ps: (0, ''))"
                return pid if code == 0 and not state.startswith("Z") else None
            time.sleep(0.3 * (attempt + 1))
        return pid

    def send_signal(self, sig: int) -> int | None:
        """Send `sig` to the Kafka JVM; return the PID signalled, or None if it was not running."""
        pid = self.pid()
        if pid is not None:
            assert self.transport is not None
            self.transport.signal(pid, sig)
        return pid

    def kill_process(self, wait_s: float = 10.0) -> int | None:
        """SIGKILL the JVM and wait until it is gone; the container and data directory stay."""
        pid = self.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + wait_s
        while pid is not None and self.pid() is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        return pid

    def set_clock_offset(self, offset: str) -> None:
        """Write a libfaketime offset such as "+0", "+90s" or "-5m"; the JVM reads it within ~1 s."""
        assert self.transport is not None
        self.transport.write_file("clock/offset", offset + "\n")  # atomic: the JVM never reads half an offset

    def log_tail(self, lines: int = 40) -> str:
        """Last lines of server.log, or stdout.log when the JVM died before logging started."""
        chunks = []
        for name in ("server.log", "stdout.log"):
            assert self.transport is not None
            if self.transport.size(name):
                text = self.read_log(0, name)[0].splitlines()[-lines:]
                chunks.append(f"--- {self.hostname} {name} (last {len(text)} lines)\n" + "\n".join(text))
        return "\n".join(chunks)


def first_error_line(output: str) -> str:
    """The most telling line of a Kafka tool's failure output (its exception message)."""
    for line in output.splitlines():
        if "Exception" in line or "Error" in line or "error" in line:
            return line.strip()[:400]
    stripped = output.strip().splitlines()
    return stripped[-1][:400] if stripped else "no output"


def network_address(container: DockerContainer, network: Network) -> str:
    # Reloaded: the attributes are cached from before start, when no address is assigned yet. A
    # broker's got refreshed by the port lookup before this; a separate KRaft controller's stayed
    # "" and every iptables cut aimed at it failed ("Bad argument `DROP'").
    wrapped = container.get_wrapped_container()
    wrapped.reload()
    info = wrapped.attrs["NetworkSettings"]["Networks"]
    return info.get(network.name, {}).get("IPAddress", "")


def empty_data_dir(node: Any, keep: tuple[str, ...] = ()) -> tuple[int, list[str], str]:
    """Remove every entry of the node's data directory but those named in `keep`, as an operator's
    replaced disk leaves it (its JVM must be down): the shell's exit code, the names removed
    (sorted) and its output. membership's swap-disk and the kip966-replaced-disk scenario both do it."""
    spared = " ".join(f"! -name '{k}'" for k in keep)
    code, out = node.exec(f"cd {DATA_DIR} && find . -mindepth 1 -maxdepth 1 {spared} -printf '%f\\n' -exec rm -rf {{}} +")
    return code, sorted(line.strip() for line in out.splitlines() if line.strip()), out
