"""A class-data-sharing archive of each Kafka version's classes, so that its JVMs start sooner.

A Kafka JVM spends most of its start-up loading and verifying classes from ~90 jars. JDK 17 can
map the classes one JVM loaded, already parsed and verified, into every later JVM of the same
JDK and class path (AppCDS, `-XX:SharedArchiveFile`). Measured 2026-12-01 on the 2-core machine,
one node alone in its container, 3 samples each: a broker from launch to "Kafka Server started"
2.55-2.93 s without the archive, 1.38-1.55 s with it; the storage tool's format 1.01-1.14 s
against 0.50-0.61 s. What that gives a whole cluster (three JVMs starting at once) and a kill's
restart is measured by bench/bench_class_archive.py (docs/cluster.md).

The archive is built once per Kafka version and base image, in a container of that image: one
KRaft node, formatted and started by the node's own start script (the same class path and JVM
options as every node), stopped with SIGTERM once started; the JVM writes the archive as it exits
(`-XX:ArchiveClassesAtExit`). Every node container then mounts it read-only beside the jars
(`KafkaNodeContainer.with_kafka_libs(..., archive=)`) and its start script passes it when the file is there.
A JVM that cannot use an archive (another JDK build, changed jars) says so on its stdout.log and
starts as before: the archive can make a start faster, never make it fail.

None for ZooKeeper-era versions (before 3.3): one node of those cannot start without a ZooKeeper,
and they are the old-bug scenarios' versions, not the nightly's. `KAFKA_HARNESS_CLASS_ARCHIVE=0`
builds and mounts none (the bench's side-by-side baseline).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import logging
import os
import secrets
import signal
import tempfile
import time
from pathlib import Path

from harness.errors import ClusterError
from harness.provision.kafka_jars import KafkaDistribution

log = logging.getLogger(__name__)

ENV = "KAFKA_HARNESS_CLASS_ARCHIVE"  # "0": no archive built or mounted
NAME = "classes.jsa"
# How long the one-node build may take to start, and then to write its archive and exit: 10-15 s
# in all on the idle 2-core machine; bounded so that a starved machine gives up and runs without.
START_BOUND_S, EXIT_BOUND_S = 120.0, 90.0
# The throwaway node's cluster id (any valid one: nothing else ever joins it).
BUILD_CLUSTER_ID = "q8bS3LNhTVSy8KjzQ1Fp7g"
# A build that failed is not tried again by every run for this long (its reason is in the marker).
RETRY_AFTER_S = 3600.0


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip() != "0"


@functools.lru_cache(maxsize=None)
def image_key(image: str) -> str:
    """The image's content id (short): an archive holds one JDK build's classes, and a base image
    rebuilt from the same recipe (the same tag) may carry another build."""
    import docker

    return docker.from_env().images.get(image).id.split(":")[-1][:16]


def archive_path(libs: Path, image: str) -> Path:
    """Where the archive of the jars at `libs`, made in `image`, lives (built or not). Its name holds
    the jars' names, sizes and times as well: the JVM refuses an archive of other jars, so jars
    resolved again get an archive of their own instead of a stale one."""
    jars = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in Path(libs).glob("*.jar"))
    return Path(libs).parent / "cds" / f"{image_key(image)}-{hashlib.sha256(repr(jars).encode()).hexdigest()[:12]}.jsa"


def ensure(dist: KafkaDistribution, image: str) -> Path | None:
    """The archive of `dist` in `image`, built now if it is missing (10-15 s, once); None when
    disabled, for a ZooKeeper-era version, or when the build failed (logged, marked, retried after
    RETRY_AFTER_S). Never raises: without an archive a cluster starts as it always did."""
    if not enabled() or not dist.supports_kraft:
        return None
    try:
        path = archive_path(dist.libs, image)
    except Exception as exc:  # noqa: BLE001
        log.warning("no class archive for Kafka %s: the image %s has no id (%s)", dist.version, image, exc)
        return None
    if path.is_file():
        return path
    failed = path.with_suffix(".failed")
    if failed.is_file() and time.time() - failed.stat().st_mtime < RETRY_AFTER_S:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs starting at once build it once
        if path.is_file():
            return path
        began = time.monotonic()
        try:
            build(dist, image, path)
        except Exception as exc:  # noqa: BLE001 - a slower start, not a failed one
            reason = exc.message if isinstance(exc, ClusterError) else f"{type(exc).__name__}: {exc}"
            failed.write_text(reason + "\n")
            log.warning("could not build the class archive of Kafka %s (%s); its JVMs start without one", dist.version, reason)
            return None
        failed.unlink(missing_ok=True)
        log.info("class archive of Kafka %s built in %.1f s (%d MB)", dist.version, time.monotonic() - began,
                 path.stat().st_size >> 20)
    return path


def build(dist: KafkaDistribution, image: str, path: Path) -> None:
    """One KRaft node in a container of `image`: format, start, SIGTERM, and its archive moved to `path`."""
    from harness.cluster.broker_config import NODE_DIR, NodeSpec
    from harness.cluster.node import KafkaNodeContainer, Node

    spec = NodeSpec(1, "kafka-1", ("broker", "controller"))
    with tempfile.TemporaryDirectory(prefix="build-", dir=path.parent, ignore_cleanup_errors=True) as scratch:
        node_dir = Path(scratch) / "node"
        (node_dir / "conf").mkdir(parents=True)
        (node_dir / "clock").mkdir()
        container = (KafkaNodeContainer(image).with_node(spec, f"cds-{secrets.token_hex(4)}")  # its owner's labels: `cleanup` knows it
                     .with_kafka_libs(dist.libs).with_node_dir(node_dir))
        node = Node(spec=spec, container=container, node_dir=node_dir)
        container.start()
        try:
            node.write_files(dist.logging, [spec], [spec], zookeeper_connect=None, overrides=None)
            # The start script reads run.env after its defaults: no archive to read, one to write.
            (node_dir / "run.env").write_text(f"ARCHIVE=''\nDUMP_OPT='-XX:ArchiveClassesAtExit={NODE_DIR}/{NAME}'\n")
            node.start_process(format_cluster_id=BUILD_CLUSTER_ID)
            _wait(lambda: "Kafka Server started" in node.read_log()[0], node, START_BOUND_S, "did not start", alive=True)
            node.send_signal(signal.SIGTERM)
            _wait(lambda: node.pid() is None, node, EXIT_BOUND_S, "did not exit after SIGTERM")
            made = node_dir / NAME
            if not made.is_file() or made.stat().st_size < (1 << 20):
                raise ClusterError("the JVM exited without writing its class archive.", hint="its stdout.log is below",
                                   details=node.log_tail(20))
            os.replace(made, path)  # the same file system: a reader never sees half an archive
        finally:
            node.remove()


def _wait(done, node, bound_s: float, what: str, alive: bool = False) -> None:
    """Until done(), at most bound_s; a node whose JVM must stay alive (the start) fails at once when it is gone."""
    deadline = time.monotonic() + bound_s
    while not done():
        if time.monotonic() > deadline or (alive and node.pid() is None):
            raise ClusterError(f"the class archive's node {what} within {bound_s:.0f} s.", hint="its log is below",
                               details=node.log_tail(20))
        time.sleep(0.2)
