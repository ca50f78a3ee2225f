"""The transactional workload: transactions over several partitions, some aborted on purpose, read with read_committed.

Each producer has its own `transactional.id`; a transaction writes 2–4 values
to distinct partitions (seeded), then commits, or aborts with probability
`abort_probability`. It is recorded as one `txn` operation whose value lists
its sends (with the offsets and epochs the delivery reports gave): `ok` when
commit_transaction() returned, `fail` when abort_transaction() returned,
`info` when neither is known (the recorded client: workloads/txn_client.py).
Consumers are the queue workload's (workloads/loops.py's `Readers`), forced to
`isolation.level=read_committed`, so no record of a `fail` transaction may
ever appear in a poll; the final drain is the queue workload's too.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import replace

from harness.history import Recorder
from workloads.clients import Clients, ConsumerClient
from workloads.drain import DrainResult, drain_topic
from workloads.drivers.base import Driver
from workloads.loops import Readers
from workloads.pacing import Pacer
from workloads.profiles import Profile
from workloads.threads import ClientThreads
from workloads.txn_client import COMMIT_ATTEMPTS, TXN_TIMEOUT_S, TxnProducerClient

__all__ = ["COMMIT_ATTEMPTS", "TXN_TIMEOUT_S", "TxnProducerClient", "TxnWorkload"]  # the client's home was here


class TxnWorkload:
    name = "txn"

    def __init__(self, recorder: Recorder, bootstrap: str, topic: str, profile: Profile, *, partitions: int = 8,
                 producers: int = 2, consumers: int = 2, rate: float = 1000.0, seed: int = 0, subscribe: bool = False,
                 group_id: str = "txn", abort_probability: float = 0.2, driver: Driver | None = None) -> None:
        self.recorder, self.bootstrap, self.topic = recorder, bootstrap, topic
        self.profile = replace(profile, isolation_level="read_committed")
        self.partitions, self.producers, self.consumers = partitions, producers, consumers
        self.rate, self.seed, self.subscribe, self.group_id = rate, seed, subscribe, group_id
        self.abort_probability = abort_probability
        self.clients = Clients(recorder, bootstrap, self.profile, driver)
        self.threads = ClientThreads()
        self._stop = threading.Event()

    @property
    def errors(self) -> list[str]:
        return self.threads.errors

    @property
    def stuck(self) -> list[str]:
        return self.threads.stuck

    @property
    def topics(self) -> tuple[str, ...]:
        return (self.topic,)

    @property
    def coordinated(self) -> dict[str, list[str]]:
        """The ids whose coordinators serve this workload (the `coordinator` and `fence` faults aim at them)."""
        return {"transactional_ids": [f"{self.group_id}-txn-{w}" for w in range(self.producers)], "groups": []}

    def start(self, ready_timeout_s: float = 120.0) -> None:
        """Start every client thread; return once each has opened its client (init_transactions
        done, so the time limit measures transactions, not the coordinator's start-up)."""
        readers = Readers(self.new_consumer, self.threads, self._stop, partitions=self.partitions,
                          consumers=self.consumers, seed=self.seed, subscribe=self.subscribe,
                          auto_commit=self.profile.enable_auto_commit)
        for w in range(self.producers):
            self.threads.spawn(f"producer-{w}", self._producer_loop, w)
        for c in range(self.consumers):
            self.threads.spawn(f"consumer-{c}", readers.loop, c)
        self.threads.wait_ready(ready_timeout_s, on_failure=self._stop.set)

    def stop(self, timeout_s: float = 60.0) -> None:
        self._stop.set()
        self.threads.join(timeout_s)

    def new_consumer(self, group: bool = False) -> ConsumerClient:
        return self.clients.consumer(self.topic, self.group_id, own_group=not group).open()

    def new_txn_producer(self, w: int) -> TxnProducerClient:
        return self.clients.txn_producer(self.topic, f"{self.group_id}-txn-{w}").open()

    def _producer_loop(self, w: int) -> None:
        rng = random.Random(self.seed * 1_000_003 + w)
        pacer = Pacer(self.rate / self.producers)
        client, n = self.new_txn_producer(w), 0
        self.threads.opened()
        pacer.begin()
        try:
            while not self._stop.is_set():
                if pacer.due(n) <= 0:
                    time.sleep(min(0.01, pacer.gap_s))
                    continue
                keys = rng.sample(range(self.partitions), min(self.partitions, rng.randint(2, 4)))
                sends = [(k, (n + i) * self.producers + w) for i, k in enumerate(keys)]
                n += len(sends)
                client.transaction(sends, abort=rng.random() < self.abort_probability)
                if client.fatal:
                    self.recorder.record(client.process, "info", "crash", {"reason": client.fatal})
                    client = self.new_txn_producer(w)  # same transactional.id: fences the old one
        finally:
            client.close()

    def drain(self, timeout_s: float = 60.0) -> DrainResult:
        """The queue workload's drain, read_committed (workloads/drain.py)."""
        return drain_topic(self.new_consumer, self.consumers, self.bootstrap, self.topic, self.partitions, self.group_id,
                           self.recorder.events_recorded, timeout_s, self.clients.driver)
