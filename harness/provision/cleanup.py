"""Remove containers, networks, lossy mounts and temporary folders that dead runs left behind.

Everything the harness creates carries the RUN_LABEL label (the run id) and its owner (host,
PID, start time: harness.provision.owner); this is the stand-in for testcontainers' Ryuk reaper,
which cannot be pulled here. A run's resources go together, by what its owner is:

| owner                                   | default | --run-id RUN | --all  |
|-----------------------------------------|---------|--------------|--------|
| dead (exited, or its PID reused)        | removed | removed      | removed|
| alive (same PID and start time)         | kept    | kept         | removed|
| unknown (another host, none recorded)   | kept    | removed      | removed|

So a live run is never touched without --all, and naming a run with --run-id is the user's word
for what cannot be proven dead from here.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker

from harness.provision.lossyfs import SOURCE_PREFIX, mounted, unmount_leftovers
from harness.provision.owner import ALIVE, DEAD, UNKNOWN, Owner, judge, read_owner
from harness.provision.settings import RUN_LABEL

FOLDER_PREFIX = "kafka-harness-"  # a cluster's temporary folder: kafka-harness-<run id>-<random>


@dataclass
class RunLeftovers:
    """What one run has left, and whether it goes."""

    run_id: str
    containers: list[Any] = field(default_factory=list)
    networks: list[Any] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    owners: list[Owner | None] = field(default_factory=list)
    state: str = UNKNOWN
    reason: str = ""
    remove: bool = False

    def names(self) -> list[str]:
        return ([c.name for c in self.containers] + [n.name for n in self.networks]
                + [str(f) for f in self.folders] + self.mounts)


@dataclass
class CleanupReport:
    containers: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)  # lossy data mounts of the power nemesis
    run_ids: set[str] = field(default_factory=set)  # the runs removed (or, in a dry run, to remove)
    runs: list[RunLeftovers] = field(default_factory=list)  # every run found, removed or kept, with why
    errors: list[str] = field(default_factory=list)

    @property
    def kept(self) -> list[RunLeftovers]:
        return [r for r in self.runs if not r.remove]


def labelled(run_id: str | None) -> dict[str, list[str]]:
    return {"label": [f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL]}


def folder_run_id(folder: Path) -> str:
    recorded = read_owner(folder).get(RUN_LABEL)
    return recorded or folder.name[len(FOLDER_PREFIX):].rsplit("-", 1)[0]  # mkdtemp's suffix has no '-'


def survey(run_id: str | None, client: docker.DockerClient) -> dict[str, RunLeftovers]:
    """Every run's labelled containers and networks, temporary folders and lossy mounts."""
    runs: dict[str, RunLeftovers] = {}

    def of(run: str) -> RunLeftovers:
        return runs.setdefault(run, RunLeftovers(run))

    for container in client.containers.list(all=True, filters=labelled(run_id)):
        run = of(container.labels.get(RUN_LABEL, "?"))
        run.containers.append(container)
        run.owners.append(Owner.from_labels(container.labels))
    for network in client.networks.list(filters=labelled(run_id)):
        labels = network.attrs.get("Labels") or {}
        run = of(labels.get(RUN_LABEL, "?"))
        run.networks.append(network)
        run.owners.append(Owner.from_labels(labels))
    for folder in sorted(Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*")):
        name = folder_run_id(folder)
        if folder.is_dir() and (run_id is None or name == run_id):
            of(name).folders.append(folder)
            of(name).owners.append(Owner.from_labels(read_owner(folder)))
    for source, point in mounted(f"{SOURCE_PREFIX}{run_id}:" if run_id else SOURCE_PREFIX):
        of(source[len(SOURCE_PREFIX):].rsplit(":", 1)[0]).mounts.append(str(point))
    return runs


def decide(run: RunLeftovers, named: bool, force: bool) -> None:
    """Judge the run's owner(s) and set whether it goes; see the table in the module docstring.
    One process makes all of a run's resources: a resource without an owner beside ones with it
    (a folder whose owner.json was never written) does not make the owner unknown. Should they
    name different owners, the most alive one counts."""
    recorded = [o for o in dict.fromkeys(run.owners) if o is not None]
    judgements = [judge(o) for o in recorded] or [judge(None)]
    rank = {ALIVE: 0, UNKNOWN: 1, DEAD: 2}
    best = min(judgements, key=lambda j: rank[j.state])
    run.state, run.reason = best.state, best.reason
    if best.state == DEAD:
        run.remove = True
    elif force:
        run.remove, run.reason = True, f"{best.reason}; removed because of --all"
    elif best.state == UNKNOWN and named:
        run.remove, run.reason = True, f"{best.reason}; removed because --run-id names it"
    else:
        run.remove = False
        run.reason += "; kept (--all removes it)" if best.state == ALIVE else "; kept (--run-id or --all removes it)"


def sweep(run_id: str | None = None, client: docker.DockerClient | None = None, *, force: bool = False,
          dry_run: bool = False) -> CleanupReport:
    """Judge every run found (or only `run_id`) and remove the resources of those that go,
    containers first, then networks, mounts and folders; with `dry_run`, only say what would go."""
    client = client or docker.from_env()
    report = CleanupReport()
    for run in survey(run_id, client).values():
        decide(run, named=run_id is not None, force=force)
        report.runs.append(run)
        if run.remove:
            report.run_ids.add(run.run_id)
            remove_run(run, report, dry_run)
    return report


def remove_run(run: RunLeftovers, report: CleanupReport, dry_run: bool) -> None:
    for container in run.containers:
        if attempt(report, container.name, dry_run, lambda: container.remove(force=True)):
            report.containers.append(container.name)
    for network in run.networks:
        if attempt(report, network.name, dry_run, network.remove):
            report.networks.append(network.name)
    if run.mounts:  # once no container holds them; their data went the containers' way
        if dry_run:
            report.mounts += run.mounts
        for point in [] if dry_run else unmount_leftovers(run.run_id):
            shutil.rmtree(Path(point).parent / "backing", ignore_errors=True)
            report.mounts.append(point)
    for folder in run.folders:  # logs and configs of clusters that had no work_dir of their own
        if not dry_run:
            shutil.rmtree(folder, ignore_errors=True)
        report.folders.append(str(folder))


def attempt(report: CleanupReport, name: str, dry_run: bool, action: Any) -> bool:
    if dry_run:
        return True
    try:
        action()
        return True
    except docker.errors.NotFound:  # gone meanwhile: that is what was wanted
        return True
    except docker.errors.APIError as exc:
        report.errors.append(f"{name}: {exc}")
        return False


def leftovers(run_id: str | None = None, client: docker.DockerClient | None = None) -> CleanupReport:
    """Everything that carries the harness label (of one run, or of any), whoever owns it, removing
    nothing. What a cleanup would remove is `sweep(..., dry_run=True)`."""
    return sweep(run_id, client, force=True, dry_run=True)


def cleanup(run_id: str | None = None, client: docker.DockerClient | None = None, *, force: bool = False) -> CleanupReport:
    """Remove what dead runs left (or only `run_id`'s); `force` (--all) also what live or unknown owners hold."""
    return sweep(run_id, client, force=force)
