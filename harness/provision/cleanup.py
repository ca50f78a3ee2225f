"""Remove containers, networks and lossy mounts that runs left behind (a killed harness cannot tear down).

Everything the harness creates carries the RUN_LABEL label; this is the
stand-in for testcontainers' Ryuk reaper, which cannot be pulled here.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import docker

from harness.provision.lossyfs import unmount_leftovers
from harness.provision.settings import RUN_LABEL


@dataclass
class CleanupReport:
    containers: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)  # lossy data mounts of the power nemesis
    run_ids: set[str] = field(default_factory=set)


def labelled(run_id: str | None) -> dict[str, list[str]]:
    return {"label": [f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL]}


def leftovers(run_id: str | None = None, client: docker.DockerClient | None = None) -> CleanupReport:
    """What carries the harness label (of one run, or of any run), without removing it."""
    client = client or docker.from_env()
    report = CleanupReport()
    for container in client.containers.list(all=True, filters=labelled(run_id)):
        report.containers.append(container.name)
        report.run_ids.add(container.labels.get(RUN_LABEL, "?"))
    for network in client.networks.list(filters=labelled(run_id)):
        report.networks.append(network.name)
        report.run_ids.add(network.attrs.get("Labels", {}).get(RUN_LABEL, "?"))
    return report


def cleanup(run_id: str | None = None, client: docker.DockerClient | None = None) -> CleanupReport:
    """Force-remove labelled containers, then labelled networks. Returns what was removed."""
    client = client or docker.from_env()
    report = CleanupReport()
    for container in client.containers.list(all=True, filters=labelled(run_id)):
        report.run_ids.add(container.labels.get(RUN_LABEL, "?"))
        container.remove(force=True)
        report.containers.append(container.name)
    for network in client.networks.list(filters=labelled(run_id)):
        report.run_ids.add(network.attrs.get("Labels", {}).get(RUN_LABEL, "?"))
        network.remove()
        report.networks.append(network.name)
    # Lossy data mounts, once no container holds them; their data went the containers' way.
    for point in unmount_leftovers(run_id):
        shutil.rmtree(Path(point).parent / "backing", ignore_errors=True)
        report.mounts.append(point)
    # Temporary node folders (logs, configs) of clusters that had no work_dir of their own.
    for run in report.run_ids if run_id is None else {run_id}:
        for folder in Path(tempfile.gettempdir()).glob(f"kafka-harness-{run}-*"):
            shutil.rmtree(folder, ignore_errors=True)
            report.folders.append(str(folder))
    return report
