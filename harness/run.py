"""One run, start to finish: cluster → workload (→ faults) → heal → drain → run directory.

    <store>/<run-id>/
        config.json      everything needed to reproduce, and the drain's outcome
        cluster.json     brokers, ports, versions, run id
        history.jsonl    the history (format v1, docs/history.md), written as the run goes
        history.parquet  the same events, columnar (written at a clean end)
        brokers/<id>/    server.log, stdout.log, conf/ of every node (KafkaCluster's work_dir)
        FAILED           only when the run failed: the reason

The fault hook is a `Nemesis` (below): `run(..., nemesis=None)` is fault-free.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from harness.cluster import KafkaCluster, new_run_id
from harness.errors import HarnessError
from harness.history import FORMAT_VERSION, Recorder
from harness.provision.settings import kafka_version as resolve_kafka_version

log = logging.getLogger(__name__)

WORKLOADS = ("queue", "txn")
TOPIC = "queue"


class Nemesis(Protocol):
    """What `run` needs from a fault injector."""

    name: str

    def setup(self, cluster: KafkaCluster, recorder: Recorder) -> None:
        """Called once the cluster and topic exist, before the workload starts."""

    def start(self) -> None:
        """Begin the fault schedule in a background thread (bounded); return at once."""

    def heal_and_stop(self) -> Any:
        """Stop the schedule, heal every fault, wait until every ISR is full again (or a timeout).
        What it returns (e.g. how healing went) is stored in config.json as "heal"."""


@dataclass
class RunConfig:
    store: Path
    workload: str = "queue"
    profile: str = "safe"
    brokers: int = 3
    kafka_version: str | None = None
    time_limit_s: float = 60.0
    rate: float = 1000.0
    seed: int = 0
    partitions: int = 8
    producers: int = 2
    consumers: int = 2
    subscribe: bool = False
    abort_probability: float = 0.2
    drain_timeout_s: float = 60.0
    command_line: list[str] = field(default_factory=lambda: list(sys.argv))

    def check(self) -> None:
        """Refuse bad input before anything is created."""
        from workloads.profiles import get_profile

        if self.workload not in WORKLOADS:
            raise HarnessError(f"unknown workload {self.workload!r}.", hint=f"use one of: {', '.join(WORKLOADS)}")
        get_profile(self.profile)
        if not self.rate > 0:
            raise HarnessError(f"rate={self.rate}: the rate must be greater than 0 operations per second.", hint="e.g. --rate 1000")
        if not self.time_limit_s > 0:
            raise HarnessError(f"time limit {self.time_limit_s}: it must be greater than 0 seconds.", hint="e.g. --time-limit 60")
        for name in ("partitions", "producers", "brokers"):
            if getattr(self, name) < 1:
                raise HarnessError(f"{name}={getattr(self, name)}: it must be at least 1.")
        if self.consumers < 0:
            raise HarnessError(f"consumers={self.consumers}: it cannot be negative.")
        if not 0 <= self.abort_probability <= 1:
            raise HarnessError(f"abort probability {self.abort_probability}: it must lie between 0 and 1.")


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    drain: dict[str, Any]
    counts: dict[str, int]
    seconds: dict[str, float]


ProgressFn = Callable[[str, Recorder | None], None]


def prepare_store(store: Path) -> Path:
    """The store folder, created and proven writable, or a HarnessError naming the fix."""
    store = Path(store)
    try:
        store.mkdir(parents=True, exist_ok=True)
        probe = store / f".write-test-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise HarnessError(
            f"the store {str(store)!r} is not a writable folder: {exc.strerror or exc}.",
            hint="pass --store with a folder you can write to (it is created if missing)",
        ) from None
    return store.resolve()


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)  # readers never see half a file


def make_workload(config: RunConfig, recorder: Recorder, bootstrap: str, run_id: str):  # type: ignore[no-untyped-def]
    from workloads.profiles import get_profile
    from workloads.queue import QueueWorkload
    from workloads.txn import TxnWorkload

    profile = get_profile(config.profile).for_brokers(config.brokers)
    kwargs = dict(partitions=config.partitions, producers=config.producers, consumers=config.consumers,
                  rate=config.rate, seed=config.seed, subscribe=config.subscribe, group_id=f"{config.workload}-{run_id}")
    if config.workload == "txn":
        return TxnWorkload(recorder, bootstrap, TOPIC, profile, abort_probability=config.abort_probability, **kwargs)
    return QueueWorkload(recorder, bootstrap, TOPIC, profile, **kwargs)


def run(config: RunConfig, nemesis: Nemesis | None = None, progress: ProgressFn | None = None) -> RunResult:
    """Carry out one run and return where it is; see the module docstring. Raises HarnessError (run dir marked FAILED)."""
    from workloads.profiles import get_profile

    config.check()
    store = prepare_store(config.store)
    run_id = new_run_id()
    run_dir = store / run_id
    run_dir.mkdir()
    notify = progress or (lambda phase, rec: None)
    profile = get_profile(config.profile).for_brokers(config.brokers)
    version = resolve_kafka_version(config.kafka_version)
    record: dict[str, Any] = {
        "history_format": FORMAT_VERSION,
        "run_id": run_id,
        "status": "running",
        "seed": config.seed,
        "kafka_version": version,
        "brokers": config.brokers,
        "workload": config.workload,
        "profile": profile.as_dict(),
        "rate": config.rate,
        "time_limit_s": config.time_limit_s,
        "partitions": config.partitions,
        "replication_factor": profile.replication_factor,
        "producers": config.producers,
        "consumers": config.consumers,
        "subscribe": config.subscribe,
        "abort_probability": config.abort_probability if config.workload == "txn" else None,
        "drain_timeout_s": config.drain_timeout_s,
        "topic": TOPIC,
        "nemesis": nemesis_names(nemesis),
        "nemesis_config": nemesis.describe() if hasattr(nemesis, "describe") else None,
        "command_line": shlex.join(config.command_line),
        "drain": None,
    }
    _write_json(run_dir / "config.json", record)
    recorder: Recorder | None = None
    cluster: KafkaCluster | None = None
    seconds: dict[str, float] = {}
    try:
        recorder = Recorder(run_dir / "history.jsonl")
        notify("starting cluster", recorder)
        began = time.monotonic()
        cluster = KafkaCluster(brokers=config.brokers, kafka_version=version, run_id=run_id, work_dir=run_dir)
        cluster.start()
        seconds["cluster_ready"] = time.monotonic() - began
        _write_json(run_dir / "cluster.json", cluster_description(cluster))
        cluster.create_topic(TOPIC, partitions=config.partitions, replication_factor=profile.replication_factor,
                             config=profile.topic_config())
        workload = make_workload(config, recorder, cluster.bootstrap_servers(), run_id)
        if nemesis is not None:
            if getattr(nemesis, "topic", "") is None:
                nemesis.topic = TOPIC  # so 'leader' targets mean leaders of the workload topic
            nemesis.setup(cluster, recorder)

        notify("opening clients", recorder)
        workload.start()  # returns once every client is open (transactional ids initialised)
        began = time.monotonic()
        if nemesis is not None:
            nemesis.start()
        end = began + config.time_limit_s
        while (now := time.monotonic()) < end:
            notify("workload", recorder)
            time.sleep(min(0.25, end - now))
        seconds["workload"] = time.monotonic() - began
        if nemesis is not None:
            notify("healing", recorder)
            began = time.monotonic()
            record["heal"] = nemesis.heal_and_stop()
            seconds["heal"] = time.monotonic() - began
        notify("stopping clients", recorder)
        workload.stop()
        notify("draining", recorder)
        began = time.monotonic()
        drain = workload.drain(config.drain_timeout_s).as_json()
        seconds["drain"] = time.monotonic() - began
        record["drain"] = drain
        record["worker_errors"] = workload.errors
        notify("writing history", recorder)
        recorder.close()
        counts = dict(recorder.counts)
        record.update(status="completed", counts=counts, seconds={k: round(v, 3) for k, v in seconds.items()})
        _write_json(run_dir / "config.json", record)
    except BaseException as exc:
        reason = str(exc) if isinstance(exc, HarnessError) else f"{type(exc).__name__}: {exc}"
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            reason = f"interrupted ({type(exc).__name__})"
        _mark_failed(run_dir, record, reason, recorder)
        if isinstance(exc, HarnessError | KeyboardInterrupt | SystemExit):
            raise
        raise HarnessError(f"run {run_id} failed: {reason}", hint=f"see {run_dir} (marked FAILED) and the broker logs there") from exc
    finally:
        if cluster is not None:
            notify("tearing down", recorder)
            cluster.stop()  # node folders stay: the run dir is the cluster's work_dir
    return RunResult(run_id, run_dir, record["drain"], counts, seconds)


def nemesis_names(nemesis: Nemesis | None) -> list[str]:
    if nemesis is None:
        return []
    packages = getattr(nemesis, "nemeses", None)
    return list(packages) if isinstance(packages, dict) else [nemesis.name]


def _mark_failed(run_dir: Path, record: dict[str, Any], reason: str, recorder: Recorder | None) -> None:
    try:
        (run_dir / "FAILED").write_text(reason + "\n")
        record.update(status="failed", failure=reason)
        _write_json(run_dir / "config.json", record)
        if recorder is not None:
            recorder.close(parquet=False)  # keep what was recorded; a failed run has no parquet
    except Exception:  # the original failure matters more than the bookkeeping
        log.exception("could not mark %s failed", run_dir)


def cluster_description(cluster: KafkaCluster) -> dict[str, Any]:
    from confluent_kafka import libversion, version

    assert cluster.distribution is not None
    return {
        "run_id": cluster.run_id,
        "cluster_id": cluster.cluster_id,
        "kafka_version": cluster.distribution.version,
        "bootstrap_servers": cluster.bootstrap_servers(),
        "brokers": [
            {"node_id": n.node_id, "hostname": n.hostname, "roles": list(n.roles), "host_port": n.host_port,
             "address": n.address, "container": n.container.get_wrapped_container().name}
            for n in cluster.brokers
        ],
        "controllers": [n.node_id for n in cluster.controllers],
        "client": {"confluent_kafka": version()[0], "librdkafka": libversion()[0]},
        "python": sys.version.split()[0],
        "timings_s": {k: round(v, 3) for k, v in cluster.timings.items()},
    }
