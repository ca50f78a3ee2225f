"""Settings that live in exactly one place: versions, cache folder, labels.

Every value here can be overridden from the environment so that CI and
nightly jobs choose without editing code.
"""

from __future__ import annotations

import os
from pathlib import Path

# The Kafka version a run uses unless told otherwise (newest complete 4.x
# release on Maven Central when this was pinned). Override: --kafka-version
# or KAFKA_HARNESS_KAFKA_VERSION.
DEFAULT_KAFKA_VERSION = "4.4.0"
# The nightly matrix's versions (`pytest -m chaos --kafka-versions`): the newest release and the one
# before it, so that a finding on the newest is read against the last release that had none.
NIGHTLY_KAFKA_VERSIONS = (DEFAULT_KAFKA_VERSION, "4.3.1")
KAFKA_VERSION_ENV = "KAFKA_HARNESS_KAFKA_VERSION"

# Docker label put on every container and network the harness creates;
# its value is the run id. `cleanup` removes what carries it.
RUN_LABEL = "io.kafka-harness.run.steps-id"
IMAGE_REPOSITORY = "kafka-harness-base"


def kafka_version(requested: str | None = None) -> str:
    """The Kafka version to use: explicit argument, then environment, then default."""
    return requested or os.environ.get(KAFKA_VERSION_ENV) or DEFAULT_KAFKA_VERSION


def cache_dir() -> Path:
    """Where downloaded jars and build scratch live (KAFKA_HARNESS_CACHE overrides)."""
    root = os.environ.get("KAFKA_HARNESS_CACHE")
    path = Path(root) if root else Path.home() / ".cache" / "kafka-harness"
    return path.expanduser()
