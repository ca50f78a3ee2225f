"""One run, start to finish: cluster → workload (→ faults) → heal → drain → run directory.

    <store>/<run-id>/
        config.json      everything needed to reproduce, and the drain's outcome
        cluster.json     brokers, ports, versions, run id
        history.jsonl    the history (format v1, docs/history.md), written as the run goes
        history.parquet  the same events, columnar (written at a clean end)
        brokers/<id>/    server.log, stdout.log, conf/ of every node (KafkaCluster's work_dir)
        FAILED           only when the run failed: the reason

The run directory's lifecycle (config.json, FAILED, tearing down) is `harness.run.directory`. The
fault hook is a `FaultPhase` (below), e.g. nemesis/runner.py's FaultRunner: `run(config)`
without one is fault-free.
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, TypeVar

from harness.cluster import KafkaCluster
from harness.cluster.versions import resolve_target
from harness.cluster.watch import ClusterWatch
from harness.errors import ClusterError
from harness.history import Recorder
from harness.kafka_settings.given import redact_argv, redacted
from harness.provision.settings import kafka_version as resolve_kafka_version
from harness.cluster.quorum import refuse_dynamic
from harness.run.config import TOPIC, WORKLOADS, RunConfig
from harness.run.directory import RunDirectory, prepare_store

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["FaultPhase", "RunConfig", "RunResult", "TOPIC", "WORKLOADS", "prepare_store", "run"]


class FaultPhase(Protocol):
    """What `run` needs from the fault phase (not a nemesis: it drives them by a schedule)."""

    packages: list[str]
    requires: frozenset[str]  # what the faults need of the cluster (nemesis/registry.py CAPABILITIES)
    isr_timeout_s: float  # how long heal_and_stop waits for full ISRs; cut short when Kafka stops answering

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc: object) -> None:
        """However the run ends, no fault thread acts after this (healing is heal_and_stop's job)."""

    def setup(self, cluster: KafkaCluster, recorder: Recorder) -> Any:
        """Called once the cluster and topic exist, before the workload starts."""

    def start(self) -> None:
        """Begin the fault schedule in a background thread (bounded); return at once."""

    def heal_and_stop(self) -> Any:
        """Stop the schedule, heal every fault, wait until every ISR is full again (or a timeout).
        What it returns (e.g. how healing went) is stored in config.json as "heal"."""

    def describe(self) -> dict[str, Any]:
        """The settings and the schedule, for config.json (the executed one once it has run)."""


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    drain: dict[str, Any]
    counts: dict[str, int]
    seconds: dict[str, float]


ProgressFn = Callable[[str, Recorder | None], None]


def make_workload(config: RunConfig, profile: Any, recorder: Recorder, bootstrap: str, run_id: str,
                  driver: Any = None) -> Any:
    """The configured workload (workloads/registry.py), recording into `recorder`, its clients on
    `driver` (None: a new driver of the configured client)."""
    from workloads import registry

    return registry.make(config.workload, config, profile, recorder, bootstrap, TOPIC, run_id, driver=driver)


def make_driver(config: RunConfig, run_dir: Path) -> Any:
    """The configured client driver (workloads/drivers/), owned by the run: closed when it ends. A
    client that logs on its own (the Java client) writes RUN_DIR/client.log."""
    import contextlib

    from workloads import drivers

    driver = drivers.make(config.client, config.client_version, log_path=run_dir / "client.log")
    return contextlib.closing(driver) if hasattr(driver, "close") else contextlib.nullcontext(driver)


# How long the faults wait for the workload's first acknowledged write (RunSteps.await_first_write):
# `./chaos run` on a fresh 4.4.0 cluster had its first write acknowledged 2.0 s after the clients
# opened (2026-11-29): the idempotent producers' id comes first.
FIRST_WRITE_BOUND_S = 30.0

# How long the heal waits for full ISRs, and the drain for high watermarks, once no broker answers.
UNRESPONSIVE_BOUND_S = 15.0


def unreachable_bound(faults: FaultPhase | None) -> float:
    """How long no broker may answer before the run counts its cluster unresponsive (it then stops its
    workload and is checked: harness/cluster/watch.py). A fault may take every broker (kill,
    pause or power-off of 'all') for up to 1.5 schedule intervals (nemesis/schedule.py), so
    twice the interval, and never less than a minute: a JVM restart under load took 10-20 s here."""
    interval = (faults.describe().get("interval_s") or 0) if faults is not None else 0
    return max(60.0, 2.0 * float(interval))


def fail_if_gone(watch: ClusterWatch, workload: Any) -> None:
    """Fail the run at once (FAILED names the cause) when the watch has seen its cluster vanish;
    the clients get 2 s to stop (their sends go nowhere now), so that no thread sends into nothing for minutes."""
    if watch.failure is None:
        return
    workload.stop(timeout_s=2.0)
    raise ClusterError(f"the cluster vanished during the run: {watch.failure}.",
                       hint="the run's history up to that moment stays in its run directory; nothing was checked")


def watched(watch: ClusterWatch, workload: Any, step: Callable[[], T]) -> T:
    """`step()` (heal, stop, drain: each bounded by its own timeouts) in a helper thread while the
    watch is checked four times a second: a cluster that vanishes meanwhile fails the run now, not
    when the step's timeout runs out (the heal waits up to 120 s for full ISRs). An abandoned step
    ends by its own timeout."""
    outcome: dict[str, Any] = {}

    def body() -> None:
        try:
            outcome["value"] = step()
        except BaseException as exc:  # handed to the run's thread below
            outcome["error"] = exc

    thread = threading.Thread(target=body, name="run-step", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.25)
        fail_if_gone(watch, workload)
    if "error" in outcome:
        raise outcome["error"]
    fail_if_gone(watch, workload)  # e.g. a drain from a vanished cluster proves nothing
    return outcome["value"]


def compare_replicas(cluster: KafkaCluster, version: str, run_dir: Any) -> dict[str, Any]:
    """Dump and compare every replica of the workload topic into RUN_DIR/replicas.json, which the
    checker reads (analysis/explain/replica_evidence.py). Returns a summary for config.json; a failure is
    recorded there with its reason and leaves the run to be checked without replica evidence."""
    from harness.cluster.replicas import collect

    try:
        meta = cluster.admin().list_topics(TOPIC, timeout=30).topics[TOPIC]
        ids = {p: list(meta.partitions[p].replicas) for p in sorted(meta.partitions)}
        isrs = {p: list(meta.partitions[p].isrs) for p in sorted(meta.partitions)}
        down = {b.node_id: "its JVM was not running when dumped" for b in cluster.brokers if b.pid() is None}
        evidence = collect(cluster, TOPIC, sorted(ids), version, ids, run_dir, isrs=isrs, down=down)
    except Exception as exc:  # evidence, not the run: the history is still checked
        return {"error": f"{type(exc).__name__}: {exc}"}
    parts = evidence["partitions"]
    return {"partitions": len(parts),
            "diverged": sorted(p for p, info in parts.items() if info["divergence"]["diverged"]),
            "not_compared": {f"{p}/{b}": why for p, info in parts.items() for b, why in info["divergence"].get("not_compared", {}).items()},
            "errors": {f"{p}/{b}": r["error"] for p, info in parts.items() for b, r in info["replicas"].items() if r.get("error")}}


def run(config: RunConfig, faults: FaultPhase | None = None, progress: ProgressFn | None = None) -> RunResult:
    """Carry out one run and return where it is; see the module docstring. Raises HarnessError
    carrying the run directory (marked FAILED). Produce -> fault -> heal -> drain, one step each."""
    steps = RunSteps.prepare(config, faults, progress)  # bad input: exit 2 before anything is created
    with RunDirectory(config.store, steps.record) as rd:
        steps.start_cluster(rd)
        steps.run_workload()
        steps.heal()
        steps.drain()
        steps.compare_replicas()
        counts = steps.finish()
    return RunResult(rd.run_id, rd.path, steps.record["drain"], counts, steps.seconds)


class RunSteps:
    """One run's steps and what they share. Each step does one job and times itself."""

    def __init__(self, config: RunConfig, faults: FaultPhase | None, notify: ProgressFn, profile: Any, version: str) -> None:
        self.config, self.faults, self.notify, self.profile, self.version = config, faults, notify, profile, version
        self.seconds: dict[str, float] = {}
        self.phases: dict[str, float] = {}  # when each phase began, seconds on the history's clock
        self.record = self.initial_record()
        self.drain_timeout_s = config.drain_timeout_s

    @classmethod
    def prepare(cls, config: RunConfig, faults: FaultPhase | None, progress: ProgressFn | None) -> "RunSteps":
        """Refuse bad input and resolve the profile and the Kafka version, before anything is created."""
        from harness.run.profile import effective_profile
        from workloads.profiles import get_profile, refuse_unsupported

        config.check()
        profile = get_profile(config.profile).for_brokers(config.brokers)  # resolved once, here
        version = resolve_kafka_version(config.kafka_version)
        resolve_target(version, config.upgrade_to)  # a ZooKeeper-era A, an older B, a B Maven lacks: exit 2 now
        if faults is not None and "dynamic_quorum" in faults.requires:  # KIP-853 (nemesis/quorum.py): before 3.9, fewer than 3 controllers: exit 2 now
            refuse_dynamic(version, config.controllers)
        refuse_unsupported(profile, config.workload, version)  # e.g. safe (idempotence) on 0.10.2.2: exit 2 now
        profile = effective_profile(config, profile, version)  # the user's settings on top, checked: exit 2 now
        return cls(config, faults, progress or (lambda phase, rec: None), profile, version)

    def initial_record(self) -> dict[str, Any]:
        """config.json as it starts: everything that reproduces the run (the drain's outcome comes later)."""
        config, faults, profile = self.config, self.faults, self.profile
        return {
            "seed": config.seed, "kafka_version": self.version, "upgrade_to": config.upgrade_to, "brokers": config.brokers,
            "workload": config.workload,
            "profile": profile.as_dict(), "rate": config.rate, "time_limit_s": config.time_limit_s,
            "partitions": config.partitions, "replication_factor": profile.replication_factor,
            "producers": config.producers, "consumers": config.consumers, "subscribe": config.subscribe,
            "abort_probability": config.abort_probability if config.workload in ("txn", "eos") else None,
            "drain_timeout_s": config.drain_timeout_s, "allow_worker_errors": config.allow_worker_errors,
            "compare_replicas": config.compare_replicas, "crash_clients_s": config.crash_clients_s,
            "power_writeback_s": config.power_writeback_s, "topic": TOPIC,
            "nemesis": list(faults.packages) if faults is not None else [],
            "nemesis_config": faults.describe() if faults is not None else None,
            "replay_of": config.replay_of, "command_line": shlex.join(redact_argv(config.command_line)), "drain": None,
            "client": {"name": config.client, "version": config.client_version}, "group_protocol": config.group_protocol,
            "controllers": config.controllers, "settings": redacted(config.settings),
        }

    def start_cluster(self, rd: RunDirectory) -> None:
        """The history, the cluster, its watch, the workload's topics and the faults' setup, each owned by the run directory."""
        config, faults, profile = self.config, self.faults, self.profile
        self.rd = rd
        self.recorder = rd.own(Recorder(rd.path / "history.jsonl"))
        self.notify("starting cluster", self.recorder)
        began = time.monotonic()
        self.cluster = rd.own(KafkaCluster(brokers=config.brokers, kafka_version=self.version, run_id=rd.run_id, work_dir=rd.path,
                                           broker_config=config.settings.get("broker"), controllers=config.controllers,
                                           lossy_data=faults is not None and "lossy_data" in faults.requires,
                                           dynamic_quorum=faults is not None and "dynamic_quorum" in faults.requires,
                                           lossy_writeback_s=config.power_writeback_s, upgrade_to=config.upgrade_to))  # nemesis/registry.py: requires
        self.seconds["cluster_ready"] = time.monotonic() - began
        rd.write("cluster.json", self.cluster.describe())
        self.watch = rd.own(ClusterWatch(self.cluster, unreachable_after_s=unreachable_bound(faults)))  # exits before the cluster
        driver = rd.own(make_driver(config, rd.path))
        self.record["client"]["versions"] = driver.versions()
        rd.update(client=self.record["client"])
        self.workload = make_workload(config, profile, self.recorder, self.cluster.bootstrap_servers(), rd.run_id, driver)
        for topic in self.workload.topics:  # e.g. eos's output topic, made like the workload topic
            self.cluster.create_topic(topic, partitions=config.partitions, replication_factor=profile.replication_factor,
                                      config=profile.topic_config())
        if faults is not None:
            faults.setup(self.cluster, self.recorder, coordinated=getattr(self.workload, "coordinated", None))
            rd.own(faults)  # its threads stop before the cluster goes, even when the run fails

    def run_workload(self) -> None:
        """Open the clients, start the faults, and run until the time limit or until Kafka stops answering."""
        recorder, watch = self.recorder, self.watch
        self.notify("opening clients", recorder)
        self.workload.start()  # returns once every client is open (transactional ids initialised)
        began = time.monotonic()
        self.phases["workload"] = round(recorder.elapsed_ns() / 1e9, 3)
        end = began + self.config.time_limit_s
        if self.faults is not None:
            self.await_first_write(began)
            self.phases["faults"] = round(recorder.elapsed_ns() / 1e9, 3)
            self.faults.start()
        while (now := time.monotonic()) < end:
            self.notify("workload", recorder)
            fail_if_gone(watch, self.workload)
            if watch.unresponsive is not None:
                break  # Kafka stopped answering: stop now, record and check it (below)
            time.sleep(min(0.25, end - now))
        self.seconds["workload"] = time.monotonic() - began
        if watch.unresponsive is not None:
            # Not a failure (harness/cluster/watch.py): what was read so far is still checked. Waiting
            # the heal's 120 s for ISRs and a full drain from brokers that answer nothing proves nothing.
            self.record["unresponsive"] = {"at_s": round(recorder.elapsed_ns() / 1e9, 3), "reason": watch.unresponsive}
            self.drain_timeout_s = min(self.drain_timeout_s, UNRESPONSIVE_BOUND_S)
            if self.faults is not None:
                self.faults.isr_timeout_s = min(self.faults.isr_timeout_s, UNRESPONSIVE_BOUND_S)

    def await_first_write(self, began: float) -> None:
        """Wait, at most FIRST_WRITE_BOUND_S and half the time limit, until a write was acknowledged,
        so that faults strike a cluster that is taking writes (kafkatest's produce, then fault). Why:
        a CI run of 20 s (2026-11-29) killed the controller 2.6 s in, while both idempotent producers
        still waited for their producer id ("Coordinator load in progress"); the cluster stayed down
        for the rest and the run ended `unknown`, nothing acknowledged. When the bound passes the
        faults start anyway, with a warning that says so."""
        bound = min(FIRST_WRITE_BOUND_S, self.config.time_limit_s / 2)
        while not self.recorder.first_write.wait(0.25):
            self.notify("workload", self.recorder)
            fail_if_gone(self.watch, self.workload)
            if time.monotonic() - began >= bound or self.watch.unresponsive is not None:
                log.warning("no write was acknowledged in the first %.0f s of the workload; the faults start anyway", bound)
                return

    def heal(self) -> None:
        """Undo every fault and wait for full ISRs; config.json gets the schedule as executed."""
        if self.faults is None:
            return
        self.notify("healing", self.recorder)
        began = time.monotonic()
        self.phases["heal"] = round(self.recorder.elapsed_ns() / 1e9, 3)
        self.record["heal"] = watched(self.watch, self.workload, self.faults.heal_and_stop)
        self.record["nemesis_config"] = self.faults.describe()  # the schedule as executed: times and targets
        if getattr(self.cluster, "upgrade", None) is not None:  # each node's version after the heal, and the features finalized
            self.record["upgrade"] = self.cluster.upgrade.describe(self.cluster.nodes)
        self.seconds["heal"] = time.monotonic() - began

    def drain(self) -> None:
        """Stop the clients, then read back everything the run wrote."""
        workload, watch = self.workload, self.watch
        self.notify("stopping clients", self.recorder)
        watched(watch, workload, workload.stop)
        self.notify("draining", self.recorder)
        began = time.monotonic()
        self.phases["drain"] = round(self.recorder.elapsed_ns() / 1e9, 3)
        self.record["drain"] = watched(watch, workload, lambda: workload.drain(self.drain_timeout_s).as_json())
        self.seconds["drain"] = time.monotonic() - began
        self.record["worker_errors"] = workload.errors
        self.record["stuck_workers"] = list(workload.stuck)

    def compare_replicas(self) -> None:
        if not self.config.compare_replicas or self.watch.unresponsive is not None:
            return
        self.notify("comparing replicas", self.recorder)
        began = time.monotonic()
        self.record["replicas"] = compare_replicas(self.cluster, self.version, self.rd.path)
        self.seconds["replicas"] = time.monotonic() - began

    def finish(self) -> dict[str, int]:
        """Close the history and mark the run completed; the run directory then tears the cluster down."""
        self.notify("writing history", self.recorder)
        self.recorder.close()
        counts = dict(self.recorder.counts)
        self.rd.update(status="completed", counts=counts, replicas=self.record.get("replicas"), phases_s=self.phases,
                       seconds={k: round(v, 3) for k, v in self.seconds.items()})
        self.notify("tearing down", self.recorder)
        return counts
