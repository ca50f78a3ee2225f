"""The workload protocol and the registry of workloads: what `harness run` needs of a workload,
and which ones exist (`--workload`).

A workload owns its client threads: `start()` returns once every client is open, `stop()` ends
them, `drain(timeout)` reads back what the run wrote and returns a result with `as_json()`,
`errors` lists worker threads that died, and `topics` names every topic it needs, the workload
topic first (the run creates each of them the same way before the workload starts). Everything a
workload does is recorded into the history (harness/history). The Kafka client library beneath its
recorded clients (workloads/clients.py) is a driver, chosen by name (workloads/drivers/:
`librdkafka` by default); a workload records the same history whatever the driver.

The classes load when a workload is made, not when this module is imported: the run command's
option checks read the names here, and the Kafka client costs its import only to a run.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol

from workloads import drivers


class Workload(Protocol):
    name: str
    errors: list[str]
    stuck: list[str]  # threads still inside a client call when the stop's wait ended (never errors)

    @property
    def topics(self) -> tuple[str, ...]: ...

    def start(self, ready_timeout_s: float = 120.0) -> None: ...

    def stop(self, timeout_s: float = 60.0) -> None: ...

    def drain(self, timeout_s: float = 60.0) -> Any: ...

    # Optional: {"transactional_ids": [...], "groups": [...]}, the ids whose coordinators serve the
    # workload, for the faults that aim at a coordinator (nemesis/coordinator.py, nemesis/fence.py).
    # A workload without it offers them nothing to aim at.


@dataclass(frozen=True)
class WorkloadSpec:
    """One workload: where its class lives, which run settings it takes beyond the common ones
    (RunConfig field -> the class's keyword), and a line for --help."""

    name: str
    home: str  # "module:Class"
    takes: tuple[tuple[str, str], ...] = ()
    summary: str = ""

    def load(self) -> type:
        module, cls = self.home.split(":")
        return getattr(importlib.import_module(module), cls)


WORKLOADS: dict[str, WorkloadSpec] = {spec.name: spec for spec in (
    WorkloadSpec("queue", "workloads.queue:QueueWorkload", (("crash_clients_s", "crash_clients_s"),),
                 "sends and polls"),
    WorkloadSpec("txn", "workloads.txn:TxnWorkload", (("abort_probability", "abort_probability"),),
                 "transactions, read_committed"),
    WorkloadSpec("eos", "workloads.eos:EosWorkload", (("abort_probability", "abort_probability"),),
                 "exactly-once pipeline: consume, transform, produce and commit input offsets in one transaction"),
)}


def names() -> tuple[str, ...]:
    return tuple(WORKLOADS)


def make(name: str, config: Any, profile: Any, recorder: Any, bootstrap: str, topic: str, run_id: str,
         driver: Any = None) -> Workload:
    """The workload `name` for a RunConfig-like `config` (partitions, producers, consumers, rate,
    seed, subscribe, and what the workload takes), writing into `recorder`, its clients driven by
    `driver` (a client driver of workloads/drivers/, or a driver's name; None: the default one)."""
    spec = WORKLOADS[name]
    if driver is None or isinstance(driver, str):
        driver = drivers.make(driver or drivers.DEFAULT)
    kwargs: dict[str, Any] = dict(partitions=config.partitions, producers=config.producers, consumers=config.consumers,
                                  rate=config.rate, seed=config.seed, subscribe=config.subscribe, group_id=f"{name}-{run_id}",
                                  driver=driver)
    kwargs.update({keyword: getattr(config, field) for field, keyword in spec.takes})
    return spec.load()(recorder, bootstrap, topic, profile, **kwargs)
