"""`run --target FILE`: one run against a cluster the harness did not start.

The same steps as a local run (harness/run/steps.py RunSteps: workload, faults, heal, drain, the
run directory), with three differences:

- the cluster is a `TargetCluster`, checked by the preflight (harness/target/preflight.py) before
  the run directory exists: a bad key, host, password or CA is exit 2 before any client opens;
- the workload's topic is the run's own, `<topic_prefix><run id>`, created for it and deleted after
  it (unless --keep-topic); no other topic is ever created, written, read or deleted;
- however the run ends, what its faults left on the hosts (iptables rules tagged with its run id,
  brokers it stopped or paused) is healed, and if that fails, the exact commands are printed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from harness.errors import HarnessError
from harness.history import Recorder
from harness.run.directory import RunDirectory
from harness.run.steps import FaultPhase, ProgressFn, RunResult, RunSteps, make_driver, unreachable_bound
from harness.target.cluster import TargetCluster
from harness.target.leftovers import heal_leftovers, manual_commands, remove_empty_chains, survey
from harness.target.preflight import preflight
from harness.target.security import SecuredDriver, client_settings
from harness.target.spec import Target
from harness.target.watch import TargetWatch

log = logging.getLogger(__name__)


def refuse_local_settings(config: Any) -> None:
    """Settings that shape a cluster the harness starts, which a target is not."""
    if config.settings.get("broker"):
        raise HarnessError("--broker-config changes the brokers the harness starts; a target's brokers are its operator's.",
                           hint="leave --broker-config out with --target (topic, producer and consumer settings apply)")
    if config.controllers:
        raise HarnessError("--controllers lays out a cluster the harness starts; a target has its own.", hint="leave it out with --target")
    if config.compare_replicas:
        raise HarnessError("--compare-replicas dumps replicas inside the harness's own containers.", hint="leave it out with --target")


class Sweep:
    """Owned by the run directory, exited after the faults: heals whatever this run's faults left on
    the target (the heal may have failed, or the run died before it) and deletes the run's topics."""

    def __init__(self, steps: "TargetSteps") -> None:
        self.steps = steps
        self.marks: dict[int, int] = {}

    def __enter__(self) -> "Sweep":
        for node in self.steps.cluster.brokers:  # where each broker's log stood when the run began
            self.marks[node.node_id] = node.log_size()
        self.running = {node.node_id for node in self.steps.cluster.brokers if self._alive(node)}
        return self

    @staticmethod
    def _alive(node: Any) -> bool:
        try:
            return node.pid() is not None
        except Exception:  # a host that cannot say is not counted as running
            return False

    def revive(self) -> dict[str, Any]:
        """Start every broker that ran when the run began and runs no more: a target is left as it
        was found. Kafka itself may end a broker after the heal: 4.4.0's KRaft halted broker 2 of the
        standing cluster on 2026-11-26 ("Cannot transition to Follower with leader 2 and epoch 3 since
        it matches the local node.id", a vote response naming itself leader of the epoch it won just
        before a SIGKILL), 9 s after the restart and after the heal had seen every ISR full. Each one
        is recorded with the last fatal line of its log, as a finding, never silently."""
        revived: dict[str, Any] = {}
        for node in self.steps.cluster.brokers:
            if node.node_id not in self.running or self._alive(node):
                continue
            try:
                fatal = [line for line in node.log_tail(400).splitlines()
                         if " FATAL " in line or "fatal fault" in line or "Exception:" in line]
            except Exception as exc:
                fatal = [f"(its log could not be read: {exc})"]
            entry: dict[str, Any] = {"why": (fatal[-1] if fatal else "no fatal line in its log")[:400]}
            try:
                entry["pid"] = node.start_process()
            except Exception as exc:
                entry["failed"] = str(exc)[:400]
            revived[str(node.node_id)] = entry
            log.warning("run %s: broker %s of %s ran when the run began and was down at its end (%s); started again: %s",
                        self.steps.rd.run_id, node.node_id, self.steps.cluster.target.name, entry["why"], entry)
        return revived

    def copy_logs(self) -> None:
        """What each broker logged during the run, into RUN_DIR/brokers/<id>/server.log, where the
        checker's explanations read a local run's (Kafka logs its passwords as [hidden])."""
        for node in self.steps.cluster.brokers:
            try:
                text, _ = node.read_log(self.marks.get(node.node_id, 0))
                folder = self.steps.rd.path / "brokers" / str(node.node_id)
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "server.log").write_text(text)
            except Exception as exc:  # evidence, not the run
                log.warning("could not copy broker %s's log: %s", node.node_id, exc)

    def __exit__(self, *exc: object) -> None:
        steps, cluster = self.steps, self.steps.cluster
        self.copy_logs()
        found = survey(cluster, cluster.run_id)
        if steps.faults is not None and "iptables" in cluster.capabilities:
            for node in cluster.brokers:  # the heal flushed the run's chains; take the empty chains away too
                remove_empty_chains(node)
        if found:
            done, failed = heal_leftovers(cluster, found)
            steps.record["target_sweep"] = {"healed": done, "failed": failed}
            if failed:  # what is still there, looked at again, is what the operator must heal
                commands = "\n".join(manual_commands(cluster, survey(cluster, cluster.run_id)))
                log.error("run %s could NOT heal the target %s: %s\nrun these by hand:\n%s",
                          cluster.run_id, cluster.target.name, "; ".join(failed), commands)
                steps.unhealed = commands
        if "restart" in cluster.capabilities:
            revived = self.revive()
            if revived:
                steps.record["target_revived"] = revived
        if steps.topics and not steps.keep_topic:
            steps.record["target_topics"] = cluster.delete_topics(list(steps.topics))
        elif steps.topics:
            steps.record["target_topics"] = {t: "kept (--keep-topic)" for t in steps.topics}
        try:
            steps.rd.update(target_sweep=steps.record.get("target_sweep"), target_topics=steps.record.get("target_topics"),
                            **({"target_revived": steps.record["target_revived"]} if steps.record.get("target_revived") else {}))
        except Exception:  # the run directory may be failing; the log above has it
            log.exception("could not record the target's sweep")


class TargetSteps(RunSteps):
    """RunSteps whose cluster is a target; see the module docstring."""

    cluster: TargetCluster  # type: ignore[assignment]

    def start_cluster(self, rd: RunDirectory) -> None:
        from workloads import registry

        config, faults, profile, cluster = self.config, self.faults, self.profile, self.cluster
        self.rd = rd
        self.recorder = rd.own(Recorder(rd.path / "history.jsonl"))
        self.notify("connecting", self.recorder)
        began = time.monotonic()
        cluster.claim(rd.run_id)
        self.topics: tuple[str, ...] = ()
        rd.own(Sweep(self))  # exited after the faults and the clients: see Sweep
        rd.write("cluster.json", cluster.describe())
        self.watch = rd.own(TargetWatch(cluster, unreachable_after_s=unreachable_bound(faults)))  # type: ignore[assignment]
        driver = rd.own(make_driver(config, rd.path))
        self.record["client"]["versions"] = driver.versions()
        secured = SecuredDriver(driver, client_settings(cluster.target.security, config.client))
        topic = f"{cluster.target.topic_prefix}{rd.run_id}"
        self.workload = registry.make(config.workload, config, profile, self.recorder, cluster.bootstrap_servers(), topic,
                                      rd.run_id, driver=secured)
        self.topics = tuple(self.workload.topics)
        rd.update(client=self.record["client"], topic=topic, target=cluster.target.describe())
        for name in self.topics:
            cluster.create_topic(name, partitions=config.partitions, replication_factor=profile.replication_factor,
                                 config=profile.topic_config())
        self.seconds["cluster_ready"] = time.monotonic() - began
        if faults is not None:
            faults.setup(cluster, self.recorder, topic)  # type: ignore[arg-type]
            rd.own(faults)


def run_target(config: Any, target: Target, faults: FaultPhase | None = None, progress: ProgressFn | None = None,
               keep_topic: bool = False) -> RunResult:
    """One run against `target`; see the module docstring. Exit-2 problems are raised before the
    run directory is made."""
    refuse_local_settings(config)
    cluster = TargetCluster(target)
    try:
        preflight(cluster, list(faults.packages) if faults is not None else [])
    except BaseException:
        cluster.close()
        raise
    # The profile's replication factor and min.insync.replicas follow the cluster's size.
    config = replace(config, brokers=len(cluster.addresses), kafka_version=config.kafka_version or target.kafka_version)
    with cluster:
        steps = TargetSteps.prepare(config, faults, progress)
        steps.cluster, steps.keep_topic, steps.unhealed = cluster, keep_topic, ""  # type: ignore[attr-defined]
        with RunDirectory(config.store, steps.record) as rd:
            steps.start_cluster(rd)
            steps.run_workload()
            steps.heal()
            steps.drain()
            counts = steps.finish()
    if steps.unhealed:  # type: ignore[attr-defined]
        raise HarnessError(f"run {rd.run_id} finished, but its faults are still on the target {target.name}.",
                           hint="run these commands by hand, or `python -m harness cleanup --target FILE`",
                           details=steps.unhealed, run_dir=rd.path)  # type: ignore[attr-defined]
    return RunResult(rd.run_id, rd.path, steps.record["drain"], counts, steps.seconds)


def run_target_file(path: Any, config: Any, faults: FaultPhase | None, progress: ProgressFn | None,
                    keep_topic: bool = False) -> RunResult:
    """run_target for the target file at `path` (read and checked first: exit 2 on a mistake)."""
    from harness.target.spec import load_target

    return run_target(config, load_target(path), faults, progress, keep_topic)
