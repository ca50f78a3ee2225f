"""Maven, as the bootstrap runs it: installed from Debian when missing, quiet, its output kept for
the error that names what failed (Kafka's jars: kafka_jars.py; the Java client worker: java_client.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

NOT_FOUND = re.compile(r"Could not find artifact|was not found in|could not be resolved")


def run(goals: list[str], cwd: Path, purpose: str) -> tuple[int, str]:
    """`mvn -B -q GOALS` in `cwd`: its exit code and its output (stdout and stderr)."""
    if shutil.which("mvn") is None:
        from harness.provision.docker_engine import apt_install  # docker_engine imports the Docker client: 0.3 s

        apt_install(["maven"], purpose)
    proc = subprocess.run(["mvn", "-B", "-q", *goals], cwd=cwd, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def missing(output: str, artifact: str) -> bool:
    """Whether Maven's output says the artifact matching the regular expression `artifact` does not exist."""
    return bool(re.search(artifact, output) and NOT_FOUND.search(output))
