"""Make sure a Docker engine answers: install Debian's package and start it if needed.

The machines this runs on ship only a Docker client. The engine comes from
Debian's `docker.io` package and is started as a background daemon that
outlives the harness process (the next run reuses it).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

import docker
from docker.errors import DockerException

from harness.errors import BootstrapError

log = logging.getLogger(__name__)

DOCKERD_LOG = Path("/var/log/kafka-harness-dockerd.log")
ENGINE_PACKAGES = ["docker.io", "iptables"]


def docker_answers(timeout: float = 5.0) -> bool:
    """True when a Docker daemon answers a ping on the default socket."""
    try:
        client = docker.from_env(timeout=int(max(timeout, 1)))
        try:
            return bool(client.ping())
        finally:
            client.close()
    except DockerException:
        return False


def apt_install(packages: list[str], why: str) -> None:
    """Install Debian packages non-interactively, or explain why it cannot be done."""
    if os.geteuid() != 0:
        raise BootstrapError(
            f"{why} needs the Debian packages {', '.join(packages)}, and installing them needs root.",
            hint=f"run as root, or install them yourself: sudo apt-get install -y {' '.join(packages)}",
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *packages]):
        log.info("running %s", " ".join(cmd))
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BootstrapError(
                f"`{' '.join(cmd)}` failed with exit code {proc.returncode} while installing {why}.",
                hint="check that Debian's package mirror in /etc/apt/sources.list* is reachable and no other apt is running",
                details=(proc.stdout[-2000:] + proc.stderr[-2000:]).strip(),
            )


def start_dockerd() -> None:
    """Start dockerd detached from this process so that it keeps running after the harness exits."""
    DOCKERD_LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(DOCKERD_LOG, "ab") as out:
        subprocess.Popen(
            ["dockerd"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def ensure_docker_engine(wait_s: float = 90.0) -> None:
    """Idempotent: return at once if Docker answers; otherwise install and start the engine."""
    if docker_answers():
        return
    if shutil.which("dockerd") is None:
        log.info("no Docker engine installed: installing Debian's docker.io")
        apt_install(ENGINE_PACKAGES, "the Docker engine")
    log.info("starting dockerd (log: %s)", DOCKERD_LOG)
    start_dockerd()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if docker_answers(timeout=2):
            return
        time.sleep(0.5)
    tail = DOCKERD_LOG.read_text(errors="replace")[-3000:] if DOCKERD_LOG.exists() else ""
    raise BootstrapError(
        f"dockerd was started but did not answer within {wait_s:.0f} s.",
        hint=f"read {DOCKERD_LOG}; another dockerd may hold /var/run/docker.pid, or the kernel may lack overlayfs/iptables",
        details=tail,
    )
