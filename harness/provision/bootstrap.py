"""One idempotent entry point that prepares a machine: engine, base image, Kafka jars, lossyfs, and
the class archive of the version's jars (its first build starts one broker: ~10 s).

Both README commands call it first (through ./chaos). Each step returns at
once when its result already exists, so a warm machine pays ~1 s.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from harness.provision.base_image import ensure_base_image
from harness.provision.docker_engine import apt_install, ensure_docker_engine
from harness.errors import BootstrapError
from harness.provision.kafka_jars import KafkaDistribution, ensure_kafka_jars
from harness.provision.lossyfs import ensure_lossyfs
from harness.provision.settings import kafka_version

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    image: str
    kafka: KafkaDistribution
    seconds: dict[str, float]
    archive: Path | None = None  # the version's class archive (harness/cluster/class_archive.py), if one could be built


def prepare(version: str | None = None) -> Prepared:
    """Make Docker answer, make the base image exist, resolve Kafka's jars; report how long each took."""
    seconds: dict[str, float] = {}
    start = time.monotonic()
    if shutil.which("java") is None:  # PySpark's driver and Maven need a JVM on the host
        apt_install(["openjdk-17-jre-headless"], "the host JVM for Spark and Maven")
    ensure_docker_engine()
    seconds["docker_engine"] = time.monotonic() - start

    start = time.monotonic()
    image = ensure_base_image()
    seconds["base_image"] = time.monotonic() - start

    start = time.monotonic()
    kafka = ensure_kafka_jars(kafka_version(version))
    seconds["kafka_jars"] = time.monotonic() - start

    start = time.monotonic()
    try:  # only the power nemesis needs it, and it says so (exit 2) when it is missing
        ensure_lossyfs()
    except BootstrapError as exc:
        log.warning("the lossy filesystem helper is not available: %s (%s)", exc.message, exc.hint)
    seconds["lossyfs"] = time.monotonic() - start

    start = time.monotonic()
    from harness.cluster.class_archive import ensure as ensure_class_archive  # a broker started once in the image

    archive = ensure_class_archive(kafka, image)  # never raises: without it the JVMs start as before
    seconds["class_archive"] = time.monotonic() - start
    return Prepared(image=image, kafka=kafka, seconds=seconds, archive=archive)
