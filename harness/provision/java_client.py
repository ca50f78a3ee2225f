"""The Java client worker (clients/java/) for one kafka-clients version, built with Maven.

Each build lives in `<cache>/java-client/<version>/<sources>/`: `worker.jar` (the worker's own
classes), `libs/` (kafka-clients and the rest of its runtime classpath, copied from Maven Central)
and a `manifest.json`, written last, that marks the folder complete. `<sources>` is a hash of
clients/java's sources: an edited worker is built anew beside the old build instead of over it,
because a checkout at another commit may be running the old one (a JVM loads its classes from its
jars lazily, so replacing them under it would break it later). Built on first use under a file
lock (two runs wanting the same version wait for each other).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.provision import maven
from harness.errors import BootstrapError, HarnessError
from harness.provision.settings import cache_dir

log = logging.getLogger(__name__)

# The newest kafka-clients 4.x on Maven Central when this was pinned (4.0.0 ... 4.3.1 resolve too).
# Override: the driver's `version`, or KAFKA_HARNESS_JAVA_CLIENT_VERSION.
DEFAULT_VERSION = "4.4.0"
VERSION_ENV = "KAFKA_HARNESS_JAVA_CLIENT_VERSION"
# Seen to resolve from Maven Central and build (3.9.1 and 4.0.0 built and ran on 2026-11-25).
KNOWN_VERSIONS = ("3.9.1", "4.0.0", "4.0.1", "4.0.2", "4.1.0", "4.1.1", "4.1.2", "4.2.0", "4.2.1", "4.3.0", "4.3.1", "4.4.0")
SOURCES = Path(__file__).resolve().parents[2] / "clients" / "java"
MAIN_CLASS = "kafkaharness.worker.Worker"
VERSION_PATTERN = re.compile(r"^\d+\.\d+\.\d+(\.\d+)?$")
# The worker calls Java APIs of kafka-clients 3.0 and later (Consumer.currentLag).
MINIMUM = (3, 0)


@dataclass(frozen=True)
class JavaClient:
    """A built worker: how to start it."""

    version: str  # kafka-clients
    root: Path

    @property
    def classpath(self) -> str:
        return os.pathsep.join([str(self.root / "worker.jar"), str(self.root / "libs" / "*")])

    def command(self, *jvm_options: str) -> list[str]:
        """The `java` command line that starts the worker (its main class; `--bare` after it runs the bench loop)."""
        return [java_binary(), *jvm_options, "-cp", self.classpath, MAIN_CLASS]


def client_version(requested: str | None = None) -> str:
    """The kafka-clients version: explicit argument, then environment, then default."""
    return requested or os.environ.get(VERSION_ENV) or DEFAULT_VERSION


def java_binary() -> str:
    found = shutil.which("java")
    if found is None:
        raise BootstrapError("no `java` on PATH: the Java client worker needs a Java 11+ runtime.",
                             hint="install one (Debian: apt-get install -y openjdk-17-jdk-headless maven)")
    return found


def sources_hash() -> str:
    """sha256 over clients/java's pom.xml and sources: a build older than the sources is rebuilt."""
    digest = hashlib.sha256()
    for path in sorted([SOURCES / "pom.xml", *(SOURCES / "src").rglob("*.java")]):
        digest.update(str(path.relative_to(SOURCES)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def client_dir(version: str, sources: str | None = None) -> Path:
    """The build of `version` from the current sources (or from `sources`, a sources_hash())."""
    return cache_dir() / "java-client" / version / (sources or sources_hash())[:16]


def check_version(version: str) -> None:
    hint = f"versions that resolve from Maven Central include: {', '.join(KNOWN_VERSIONS)}"
    if not VERSION_PATTERN.match(version):
        raise HarnessError(f"'{version}' is not a kafka-clients version.", hint=hint)
    if tuple(int(x) for x in version.split(".")[:2]) < MINIMUM:
        raise HarnessError(f"kafka-clients {version} is older than the Java worker supports "
                           f"({'.'.join(map(str, MINIMUM))} and later: it reads Consumer.currentLag).", hint=hint)


def load_cached(version: str) -> JavaClient | None:
    sources = sources_hash()
    root = client_dir(version, sources)
    try:
        manifest = json.loads((root / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("sources") != sources or manifest.get("kafka_clients") != version:
        return None
    return JavaClient(version, root)


def ensure_java_client(version: str | None = None) -> JavaClient:
    """Idempotent: the worker for kafka-clients `version` (default DEFAULT_VERSION), built on first use."""
    version = client_version(version)
    check_version(version)
    cached = load_cached(version)
    if cached:
        return cached
    root = client_dir(version)
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = load_cached(version)
        if cached:
            return cached
        return build_into(version, root)


def build_into(version: str, root: Path) -> JavaClient:
    scratch = Path(tempfile.mkdtemp(prefix=f"build-{version}-", dir=root.parent))
    try:
        project = scratch / "project"  # a copy: the build's target/ never lands in the repository
        shutil.copytree(SOURCES, project, ignore=shutil.ignore_patterns("target"))
        source_hash = sources_hash()
        log.info("building the Java client worker for kafka-clients %s with Maven", version)
        run_maven(["package", "dependency:copy-dependencies", f"-Dkafka.clients.version={version}",
                   f"-DoutputDirectory={scratch / 'out' / 'libs'}", "-DincludeScope=runtime"], project, version)
        out = scratch / "out"
        shutil.copy2(project / "target" / "worker.jar", out / "worker.jar")
        jars = sorted(p.name for p in (out / "libs").glob("*.jar"))
        (out / "manifest.json").write_text(json.dumps(
            {"kafka_clients": version, "sources": source_hash, "main": MAIN_CLASS, "jars": jars}, indent=1))
        shutil.rmtree(root, ignore_errors=True)  # an incomplete build of these very sources (no manifest)
        out.rename(root)  # atomic: a folder with a manifest is always complete
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return JavaClient(version, root)


def run_maven(goals: list[str], cwd: Path, version: str) -> None:
    code, output = maven.run(goals, cwd, "the Java client worker (Maven)")
    if code == 0:
        return
    if maven.missing(output, rf"org\.apache\.kafka:kafka-clients:jar:{re.escape(version)}"):
        raise HarnessError(f"kafka-clients {version} is not available on Maven Central.",
                           hint=f"versions that resolve include: {', '.join(KNOWN_VERSIONS)}",
                           details=output[-1500:].strip())
    raise BootstrapError(f"Maven failed (exit {code}) while building the Java client worker for "
                         f"kafka-clients {version}.",
                         hint="check that Maven Central is reachable; the full output is below",
                         details=output[-3000:].strip())
