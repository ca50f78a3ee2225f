"""The queue workload: W producers send unique integers to P partitions, C consumers poll them.

Schedule: each producer w sends `rate / W` values per second; its n-th value
is `n * W + w` (unique in the run) and its partition comes from
`Random(seed, w)`, so a seed fixes which value goes where. Consumers poll
continuously in batches whose size also comes from the seed. Consumers
`assign` their share of the partitions by default (seek: committed, which
without commits falls back to auto.offset.reset) or `subscribe` to a group.
The loops are workloads/loops.py's (`Feed`, `Readers`), shared with the txn and eos workloads.

After the faults end comes the **final drain** (`drain`): every consumer, as
a fresh client, assigns every partition from the beginning and polls until
it has read to each partition's high watermark, or until a timeout, which is
recorded. Only then is a record that nobody read really missing.
"""

from __future__ import annotations

import threading

from harness.history import Recorder
from workloads.clients import Clients, ConsumerClient, ProducerClient
from workloads.drain import DrainResult, drain_topic
from workloads.drivers.base import Driver
from workloads.loops import CRASH_CLOSE_S, Feed, Readers
from workloads.profiles import Profile
from workloads.threads import ClientThreads


class QueueWorkload:
    name = "queue"
    CRASH_CLOSE_S = CRASH_CLOSE_S  # a crashed producer's sends still unresolved this long after are purged

    def __init__(
        self,
        recorder: Recorder,
        bootstrap: str,
        topic: str,
        profile: Profile,
        *,
        partitions: int = 8,
        producers: int = 2,
        consumers: int = 2,
        rate: float = 1000.0,
        seed: int = 0,
        subscribe: bool = False,
        group_id: str = "queue",
        crash_clients_s: float | None = None,
        driver: Driver | None = None,
    ) -> None:
        self.recorder, self.bootstrap, self.topic, self.profile = recorder, bootstrap, topic, profile
        self.partitions, self.producers, self.consumers = partitions, producers, consumers
        self.rate, self.seed, self.subscribe, self.group_id = rate, seed, subscribe, group_id
        self.crash_clients_s = crash_clients_s
        self.clients = Clients(recorder, bootstrap, profile, driver)
        self.threads = ClientThreads()
        self._stop = threading.Event()

    @property
    def errors(self) -> list[str]:
        """Unexpected exceptions in worker threads."""
        return self.threads.errors

    @property
    def stuck(self) -> list[str]:
        """Worker threads still inside a client call when the stop's wait ended (threads.py)."""
        return self.threads.stuck

    @property
    def topics(self) -> tuple[str, ...]:
        """Every topic this workload needs, its own first (workloads/registry.py)."""
        return (self.topic,)

    @property
    def coordinated(self) -> dict[str, list[str]]:
        """The ids whose coordinators serve this workload: its consumer group when it subscribes."""
        return {"transactional_ids": [], "groups": [self.group_id] if self.subscribe else []}

    # --- the main phase ---------------------------------------------------------------
    def start(self, ready_timeout_s: float = 120.0) -> None:
        """Start every client thread; return once each has opened its client (so the time limit
        measures operations, not the transaction coordinator's start-up) or after `ready_timeout_s`."""
        feed = Feed(self.new_producer, self.recorder, self.threads, self._stop, partitions=self.partitions,
                    producers=self.producers, rate=self.rate, seed=self.seed, crash_clients_s=self.crash_clients_s,
                    crash_close_s=self.CRASH_CLOSE_S)
        readers = Readers(self.new_consumer, self.threads, self._stop, partitions=self.partitions,
                          consumers=self.consumers, seed=self.seed, subscribe=self.subscribe,
                          auto_commit=self.profile.enable_auto_commit)
        for w in range(self.producers):
            self.threads.spawn(f"producer-{w}", feed.loop, w)
        for c in range(self.consumers):
            self.threads.spawn(f"consumer-{c}", readers.loop, c)
        self.threads.wait_ready(ready_timeout_s, on_failure=self._stop.set)

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop issuing operations; producers wait for their delivery reports, consumers close."""
        self._stop.set()
        self.threads.join(timeout_s)

    def new_producer(self) -> ProducerClient:
        return self.clients.producer(self.topic)

    def new_consumer(self, group: bool = False) -> ConsumerClient:
        """A fresh consumer, open; `group` joins the workload's group, otherwise a group of its own (assign, no commits shared)."""
        return self.clients.consumer(self.topic, self.group_id, own_group=not group).open()

    # --- the final drain ------------------------------------------------------------
    def drain(self, timeout_s: float = 60.0) -> DrainResult:
        """Every consumer (at least one) re-reads every partition from the beginning to its high
        watermark (workloads/drain.py)."""
        return drain_topic(self.new_consumer, self.consumers, self.bootstrap, self.topic, self.partitions, self.group_id,
                           self.recorder.events_recorded, timeout_s, self.clients.driver)
