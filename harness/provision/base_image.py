"""The broker base image, built locally because no registry can be pulled from.

A minimal Debian root filesystem is made with debootstrap from the mirror the
machine's apt is already configured with, then `docker import`ed. The image
is tagged by a hash of its recipe, so a changed recipe builds a new image and
an unchanged one is never rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import docker
from docker.errors import ImageNotFound

from harness.provision.docker_engine import apt_install
from harness.errors import BootstrapError
from harness.provision.settings import IMAGE_REPOSITORY, cache_dir

log = logging.getLogger(__name__)

# Bump when the build steps change in a way the package list does not show.
RECIPE_REVISION = 1


BASE_PACKAGES = (
    "openjdk-17-jre-headless",  # the broker JVM
    "iproute2",  # ip, ss: inspect and shape the network
    "iptables",  # partitions and packet loss
    "libfaketime",  # per-broker wall-clock offsets
    "procps",  # ps, pgrep, kill
    "tini",  # PID 1 that reaps the broker JVM when it is killed
    "netcat-openbsd",  # TCP reachability checks from inside a broker
)
# What `harness cluster up` adds for its standing cluster (harness/target/standing.py): sshd, so
# that the cluster is acted on over SSH like a cluster the harness did not start. A separate image:
# the runs' own image (and its tag) stays as it was.
SSH_PACKAGES = ("openssh-server",)


@dataclass(frozen=True)
class ImageRecipe:
    """Everything that decides the image's content; its hash is the image tag."""

    suite: str
    packages: tuple[str, ...] = BASE_PACKAGES
    env: tuple[tuple[str, str], ...] = field(
        default=(
            ("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64"),
            ("PATH", "/usr/lib/jvm/java-17-openjdk-amd64/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
        )
    )
    revision: int = RECIPE_REVISION

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]

    def tag(self) -> str:
        return f"{IMAGE_REPOSITORY}:{self.digest()}"


def host_debian_suite() -> str:
    """The Debian codename of this machine (its mirror is known to serve it)."""
    text = Path("/etc/os-release").read_text() if Path("/etc/os-release").exists() else ""
    match = re.search(r"^VERSION_CODENAME=(\w+)", text, re.M)
    if not match:
        raise BootstrapError(
            "cannot tell this machine's Debian release from /etc/os-release.",
            hint="the base image is built with debootstrap and needs a Debian host",
        )
    return match.group(1)


def configured_debian_mirror(suite: str) -> str:
    """The first apt source serving `suite` (not -security/-updates), read from this machine's apt config."""
    candidates: list[tuple[str, list[str]]] = []
    for path in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for stanza in path.read_text().split("\n\n"):
            fields = dict(
                (k.strip().lower(), v.strip())
                for k, _, v in (line.partition(":") for line in stanza.splitlines() if ":" in line and not line.startswith("#"))
            )
            if fields.get("types", "").split()[:1] == ["deb"] and "uris" in fields:
                candidates.append((fields["uris"].split()[0], fields.get("suites", "").split()))
    legacy = Path("/etc/apt/sources.list")
    if legacy.exists():
        for line in legacy.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb":
                uri_at = 2 if parts[1].startswith("[") else 1
                candidates.append((parts[uri_at], parts[uri_at + 1 : uri_at + 2]))
    for uri, suites in candidates:
        if suite in suites:
            return uri
    raise BootstrapError(
        f"no apt source for Debian '{suite}' found in /etc/apt/sources.list*.",
        hint="configure a Debian mirror for apt; the base image is built from the same mirror",
    )


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except ImageNotFound:
        return False


def build_rootfs(recipe: ImageRecipe, target: Path) -> None:
    """debootstrap a minimal root filesystem with the recipe's packages into `target`."""
    if shutil.which("debootstrap") is None:
        apt_install(["debootstrap"], "the base image build")
    mirror = configured_debian_mirror(recipe.suite)
    cmd = [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(recipe.packages)}",
        recipe.suite,
        str(target),
        mirror,
    ]
    log.info("building base image rootfs: %s", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BootstrapError(
            f"debootstrap failed with exit code {proc.returncode}.",
            hint="check that the apt mirror is reachable and the disk has ~1 GB free",
            details=(proc.stdout[-3000:] + proc.stderr[-2000:]).strip(),
        )
    # Never ship host keys baked into an image: every container of it would share them. The standing
    # cluster gives each sshd a key generated for it (harness/target/standing.py).
    for host_key in (target / "etc" / "ssh").glob("ssh_host_*"):
        host_key.unlink()
    # Drop what a broker never reads, to keep the image small.
    for junk in ("usr/share/doc", "usr/share/man", "usr/share/info", "var/cache/apt/archives", "var/lib/apt/lists"):
        shutil.rmtree(target / junk, ignore_errors=True)


def import_rootfs(client: docker.DockerClient, rootfs: Path, recipe: ImageRecipe, scratch: Path) -> None:
    tarball = scratch / "rootfs.tar"
    subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
    repository, tag = recipe.tag().split(":")
    changes = [f"ENV {key}={value}" for key, value in recipe.env]
    changes.append(f"LABEL io.kafka-harness.recipe={recipe.digest()}")
    client.api.import_image_from_file(str(tarball), repository=repository, tag=tag, changes=changes)


def ensure_base_image(client: docker.DockerClient | None = None, extra_packages: tuple[str, ...] = ()) -> str:
    """Idempotent: return the base image tag, building it first if this recipe has no image yet.
    `extra_packages` make another image (its own tag) beside the runs' one."""
    client = client or docker.from_env()
    recipe = ImageRecipe(suite=host_debian_suite(), packages=BASE_PACKAGES + tuple(extra_packages))
    tag = recipe.tag()
    if image_exists(client, tag):
        return tag
    scratch_root = cache_dir() / "build"
    scratch_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="base-image-", dir=scratch_root))
    try:
        rootfs = scratch / "rootfs"
        build_rootfs(recipe, rootfs)
        import_rootfs(client, rootfs, recipe, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not image_exists(client, tag):
        raise BootstrapError(f"docker import finished but image {tag} is missing.", hint="see dockerd's log")
    log.info("built base image %s", tag)
    return tag
