"""Kafka broker jars for one version, resolved from Maven Central with Maven.

Each version lives in `<cache>/kafka/<version>/`: a `libs/` folder of jars
and a `manifest.json`, written last, that marks the folder complete. A
logging backend is added where the version does not bring one, so every
broker writes its log to a file the harness collects.
"""

from __future__ import annotations

import fcntl
import json
import logging
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.provision import maven
from harness.errors import BootstrapError, KafkaVersionError
from harness.provision.settings import cache_dir

log = logging.getLogger(__name__)

VERSION_PATTERN = re.compile(r"^\d+\.\d+\.\d+(\.\d+)?$")
# Bump when what goes into a version's folder changes, so old caches are resolved again.
RESOLVER_REVISION = 2
RELOAD4J_VERSION = "1.2.25"
# Kafka before 1.0 base64-encodes its cluster id with javax.xml.bind, which Java 11+ no longer ships.
JAXB_API = "javax.xml.bind:jaxb-api:2.3.1"
LOG4J1_VERSION = "1.2.17"


@dataclass(frozen=True)
class KafkaDistribution:
    """A resolved Kafka version: where its jars are and how it logs."""

    version: str
    scala: str
    libs: Path
    logging: str  # "log4j2" or "log4j1": decides the logging config file format

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return parse_version(self.version)

    @property
    def supports_kraft(self) -> bool:
        return kraft_supported(self.version)

    @property
    def requires_kraft(self) -> bool:
        return self.version_tuple >= (4, 0)


def kraft_supported(version: str) -> bool:
    """KRaft is production-ready from 3.3; 4.0 removed ZooKeeper."""
    return parse_version(version) >= (3, 3)


def parse_version(version: str) -> tuple[int, ...]:
    if not VERSION_PATTERN.match(version):
        raise KafkaVersionError(
            f"'{version}' is not a Kafka version.",
            hint="give a release number such as 4.3.1, 3.9.2 or 0.10.2.2",
        )
    return tuple(int(part) for part in version.split("."))


def scala_suffix(version: str) -> str:
    """The Scala binary version the broker artifact was published for."""
    v = parse_version(version)
    if v >= (2, 4):
        return "2.13"
    if v >= (0, 10, 2):
        return "2.12"
    return "2.11"


def distribution_dir(version: str) -> Path:
    return cache_dir() / "kafka" / version


def load_cached(version: str) -> KafkaDistribution | None:
    manifest = distribution_dir(version) / "manifest.json"
    if not manifest.exists():
        return None
    data = json.loads(manifest.read_text())
    if data.get("revision") != RESOLVER_REVISION:
        return None
    return KafkaDistribution(version=version, scala=data["scala"], libs=distribution_dir(version) / "libs", logging=data["logging"])


def ensure_kafka_jars(version: str) -> KafkaDistribution:
    """Idempotent: the jars of `version`, resolved with Maven on first use."""
    parse_version(version)
    cached = load_cached(version)
    if cached:
        return cached
    root = distribution_dir(version)
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs resolving the same version wait for each other
        cached = load_cached(version)
        if cached:
            return cached
        return resolve_into(version, root)


def resolve_into(version: str, root: Path) -> KafkaDistribution:
    scala = scala_suffix(version)
    scratch = Path(tempfile.mkdtemp(prefix=f"kafka-{version}-", dir=root.parent))
    try:
        libs = scratch / "libs"
        (scratch / "pom.xml").write_text(broker_pom(version, scala))
        log.info("resolving Kafka %s (kafka_%s) from Maven Central", version, scala)
        run_maven(
            ["dependency:copy-dependencies", f"-DoutputDirectory={libs}", "-DincludeScope=runtime"],
            cwd=scratch,
            version=version,
            scala=scala,
        )
        logging_kind = add_logging_backend(libs, scratch)
        if parse_version(version) < (1, 0):
            copy_artifact(JAXB_API, libs, scratch)
        (scratch / "manifest.json").write_text(
            json.dumps({"revision": RESOLVER_REVISION, "version": version, "scala": scala, "logging": logging_kind, "jars": sorted(p.name for p in libs.glob("*.jar"))}, indent=1)
        )
        shutil.rmtree(root, ignore_errors=True)
        (scratch / "pom.xml").unlink()
        scratch.rename(root)  # atomic: a folder with a manifest is always complete
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return KafkaDistribution(version=version, scala=scala, libs=root / "libs", logging=logging_kind)


def broker_pom(version: str, scala: str) -> str:
    deps = [("org.apache.kafka", f"kafka_{scala}", version)]
    if parse_version(version) >= (3, 0):
        deps.append(("org.apache.kafka", "kafka-tools", version))  # metadata-quorum and other admin tools
    dep_xml = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>" for g, a, v in deps
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        f"<groupId>kafka-harness</groupId><artifactId>kafka-broker-{version}</artifactId><version>1</version>"
        f"<packaging>pom</packaging><dependencies>{dep_xml}</dependencies></project>"
    )


def run_maven(goals: list[str], cwd: Path, version: str, scala: str) -> None:
    code, output = maven.run(goals, cwd, "Kafka jar resolution (Maven)")
    if code == 0:
        return
    if maven.missing(output, rf"org\.apache\.kafka:[\w.\-]+:jar:{re.escape(version)}"):
        known = known_versions(scala)
        raise KafkaVersionError(
            f"Kafka {version} is not available on Maven Central (org.apache.kafka:kafka_{scala}:{version} or one of its jars is missing).",
            hint=("known versions include: " + ", ".join(known[-12:])) if known else "check the version number",
            details=output[-1500:].strip(),
        )
    raise BootstrapError(
        f"Maven failed (exit {code}) while resolving Kafka {version}.",
        hint="check that Maven Central is reachable; the full output is below",
        details=output[-3000:].strip(),
    )


def known_versions(scala: str) -> list[str]:
    """Versions listed in Maven's local metadata cache, if it has any."""
    repo = Path.home() / ".m2" / "repository" / "org" / "apache" / "kafka" / f"kafka_{scala}"
    found: set[str] = set()
    for meta in repo.glob("maven-metadata*.xml"):
        found.update(re.findall(r"<version>([^<]+)</version>", meta.read_text(errors="replace")))
    if repo.exists():
        found.update(p.name for p in repo.iterdir() if p.is_dir() and any(p.glob("*.jar")))
    valid = [v for v in found if VERSION_PATTERN.match(v)]
    return sorted(valid, key=lambda v: tuple(int(x) for x in v.split(".")))


def jar_version(libs: Path, artifact: str) -> str | None:
    for jar in libs.glob(f"{artifact}-*.jar"):
        match = re.fullmatch(rf"{re.escape(artifact)}-(\d[\w.\-]*)\.jar", jar.name)
        if match:
            return match.group(1)
    return None


def add_logging_backend(libs: Path, scratch: Path) -> str:
    """Add the slf4j binding the version lacks; return which log4j config format it reads."""
    slf4j = jar_version(libs, "slf4j-api") or "1.7.36"
    log4j2 = jar_version(libs, "log4j-core")
    extra: list[str] = []
    if log4j2:
        binding = "log4j-slf4j2-impl" if slf4j.startswith("2.") else "log4j-slf4j-impl"
        if not jar_version(libs, binding):
            extra.append(f"org.apache.logging.log4j:{binding}:{log4j2}")
        kind = "log4j2"
    else:
        kind = "log4j1"
        if not (jar_version(libs, "slf4j-log4j12") or jar_version(libs, "slf4j-reload4j")):
            if tuple(int(x) for x in slf4j.split(".")[:3]) >= (1, 7, 33):
                extra += [f"org.slf4j:slf4j-reload4j:{slf4j}", f"ch.qos.reload4j:reload4j:{RELOAD4J_VERSION}"]
            else:
                extra += [f"org.slf4j:slf4j-log4j12:{slf4j}", f"log4j:log4j:{LOG4J1_VERSION}"]
    for coordinate in extra:
        copy_artifact(coordinate, libs, scratch)
    return kind


def copy_artifact(coordinate: str, libs: Path, scratch: Path) -> None:
    """Copy one artifact (no transitive dependencies) into `libs`."""
    run_maven(["dependency:copy", f"-Dartifact={coordinate}", f"-DoutputDirectory={libs}"], cwd=scratch, version=coordinate, scala="")
