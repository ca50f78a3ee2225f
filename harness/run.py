"""One run, start to finish: cluster → workload (→ faults) → heal → drain → run directory.

    <store>/<run-id>/
        config.json      everything needed to reproduce, and the drain's outcome
        cluster.json     brokers, ports, versions, run id
        history.jsonl    the history (format v1, docs/history.md), written as the run goes
        history.parquet  the same events, columnar (written at a clean end)
        brokers/<id>/    server.log, stdout.log, conf/ of every node (KafkaCluster's work_dir)
        FAILED           only when the run failed: the reason

The run directory's lifecycle (config.json, FAILED, tearing down) is `harness.run_dir`. The
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
from harness.cluster.watch import ClusterWatch
from harness.errors import ClusterError
from harness.history import Recorder
from harness.provision.settings import kafka_version as resolve_kafka_version
from harness.run_config import TOPIC, WORKLOADS, RunConfig
from harness.run_dir import RunDirectory, prepare_store

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


def make_workload(config: RunConfig, profile: Any, recorder: Recorder, bootstrap: str, run_id: str):  # type: ignore[no-untyped-def]
    from workloads.queue import QueueWorkload
    from workloads.eos import EosWorkload
    from workloads.txn import TxnWorkload

    kwargs: dict[str, Any] = dict(partitions=config.partitions, producers=config.producers, consumers=config.consumers,
                                  rate=config.rate, seed=config.seed, subscribe=config.subscribe,
                                  group_id=f"{config.workload}-{run_id}")
    if config.workload == "txn":
        return TxnWorkload(recorder, bootstrap, TOPIC, profile, abort_probability=config.abort_probability, **kwargs)
    if config.workload == "eos":
        return EosWorkload(recorder, bootstrap, TOPIC, profile, abort_probability=config.abort_probability, **kwargs)
    return QueueWorkload(recorder, bootstrap, TOPIC, profile, crash_clients_s=config.crash_clients_s, **kwargs)


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
    checker reads (analysis/replica_evidence.py). Returns a summary for config.json; a failure is
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
    carrying the run directory (marked FAILED)."""
    from workloads.profiles import get_profile, refuse_unsupported

    config.check()  # bad input: exit 2 before anything is created
    notify = progress or (lambda phase, rec: None)
    profile = get_profile(config.profile).for_brokers(config.brokers)  # resolved once, here
    version = resolve_kafka_version(config.kafka_version)
    refuse_unsupported(profile, config.workload, version)  # e.g. safe (idempotence) on 0.10.2.2: exit 2 now
    seconds: dict[str, float] = {}
    phases: dict[str, float] = {}  # when each phase began, seconds on the history's clock
    record: dict[str, Any] = {
        "seed": config.seed, "kafka_version": version, "brokers": config.brokers, "workload": config.workload,
        "profile": profile.as_dict(), "rate": config.rate, "time_limit_s": config.time_limit_s,
        "partitions": config.partitions, "replication_factor": profile.replication_factor,
        "producers": config.producers, "consumers": config.consumers, "subscribe": config.subscribe,
        "abort_probability": config.abort_probability if config.workload in ("txn", "eos") else None,
        "drain_timeout_s": config.drain_timeout_s, "allow_worker_errors": config.allow_worker_errors,
        "compare_replicas": config.compare_replicas, "crash_clients_s": config.crash_clients_s,
        "power_writeback_s": config.power_writeback_s, "topic": TOPIC,
        "nemesis": list(faults.packages) if faults is not None else [],
        "nemesis_config": faults.describe() if faults is not None else None,
        "replay_of": config.replay_of, "command_line": shlex.join(config.command_line), "drain": None,
    }
    with RunDirectory(config.store, record) as rd:
        recorder = rd.own(Recorder(rd.path / "history.jsonl"))
        notify("starting cluster", recorder)
        began = time.monotonic()
        cluster = rd.own(KafkaCluster(brokers=config.brokers, kafka_version=version, run_id=rd.run_id, work_dir=rd.path,
                                      lossy_data=faults is not None and "lossy_data" in faults.requires,
                                      lossy_writeback_s=config.power_writeback_s))  # nemesis/registry.py: requires
        seconds["cluster_ready"] = time.monotonic() - began
        rd.write("cluster.json", cluster.describe())
        watch = rd.own(ClusterWatch(cluster, unreachable_after_s=unreachable_bound(faults)))  # exits before the cluster
        cluster.create_topic(TOPIC, partitions=config.partitions, replication_factor=profile.replication_factor,
                             config=profile.topic_config())
        workload = make_workload(config, profile, recorder, cluster.bootstrap_servers(), rd.run_id)
        for extra in getattr(workload, "extra_topics", ()):  # eos: its output topic, made like the input
            cluster.create_topic(extra, partitions=config.partitions, replication_factor=profile.replication_factor,
                                 config=profile.topic_config())
        if faults is not None:
            faults.setup(cluster, recorder)
            rd.own(faults)  # its threads stop before the cluster goes, even when the run fails

        notify("opening clients", recorder)
        workload.start()  # returns once every client is open (transactional ids initialised)
        began = time.monotonic()
        phases["workload"] = round(recorder.elapsed_ns() / 1e9, 3)
        if faults is not None:
            faults.start()
        end = began + config.time_limit_s
        while (now := time.monotonic()) < end:
            notify("workload", recorder)
            fail_if_gone(watch, workload)
            if watch.unresponsive is not None:
                break  # Kafka stopped answering: stop now, record and check it (below)
            time.sleep(min(0.25, end - now))
        seconds["workload"] = time.monotonic() - began
        drain_timeout_s = config.drain_timeout_s
        if watch.unresponsive is not None:
            # Not a failure (harness/cluster/watch.py): what was read so far is still checked. Waiting
            # the heal's 120 s for ISRs and a full drain from brokers that answer nothing proves nothing.
            record["unresponsive"] = {"at_s": round(recorder.elapsed_ns() / 1e9, 3), "reason": watch.unresponsive}
            drain_timeout_s = min(drain_timeout_s, UNRESPONSIVE_BOUND_S)
            if faults is not None:
                faults.isr_timeout_s = min(faults.isr_timeout_s, UNRESPONSIVE_BOUND_S)
        if faults is not None:
            notify("healing", recorder)
            began = time.monotonic()
            phases["heal"] = round(recorder.elapsed_ns() / 1e9, 3)
            record["heal"] = watched(watch, workload, faults.heal_and_stop)
            record["nemesis_config"] = faults.describe()  # the schedule as executed: times and targets
            seconds["heal"] = time.monotonic() - began
        notify("stopping clients", recorder)
        watched(watch, workload, workload.stop)
        notify("draining", recorder)
        began = time.monotonic()
        phases["drain"] = round(recorder.elapsed_ns() / 1e9, 3)
        drain = watched(watch, workload, lambda: workload.drain(drain_timeout_s).as_json())
        seconds["drain"] = time.monotonic() - began
        record["drain"] = drain
        record["worker_errors"] = workload.errors
        if config.compare_replicas and watch.unresponsive is None:
            notify("comparing replicas", recorder)
            began = time.monotonic()
            record["replicas"] = compare_replicas(cluster, version, rd.path)
            seconds["replicas"] = time.monotonic() - began
        notify("writing history", recorder)
        recorder.close()
        counts = dict(recorder.counts)
        rd.update(status="completed", counts=counts, replicas=record.get("replicas"), phases_s=phases, seconds={k: round(v, 3) for k, v in seconds.items()})
        notify("tearing down", recorder)
    return RunResult(rd.run_id, rd.path, record["drain"], counts, seconds)

