"""The queue workload: W producers send unique integers to P partitions, C consumers poll them.

Schedule: each producer w sends `rate / W` values per second; its n-th value
is `n * W + w` (unique in the run) and its partition comes from
`Random(seed, w)`, so a seed fixes which value goes where. Consumers poll
continuously in batches whose size also comes from the seed. Consumers
`assign` their share of the partitions by default (seek: committed, which
without commits falls back to auto.offset.reset) or `subscribe` to a group.

After the faults end comes the **final drain** (`drain`): every consumer, as
a fresh client, assigns every partition from the beginning and polls until
it has read to each partition's high watermark, or until a timeout, which is
recorded. Only then is a record that nobody read really missing.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from harness.errors import HarnessError
from harness.history import Recorder
from workloads.clients import ConsumerClient, ProcessIds, ProducerClient
from workloads.profiles import Profile

log = logging.getLogger(__name__)

MAX_BURST = 2000  # sends between checks of the stop flag at very high rates


@dataclass
class DrainResult:
    complete: bool
    high_watermarks: dict[int, int]
    timed_out_partitions: list[int]
    processes: list[int] = field(default_factory=list)
    seconds: float = 0.0
    first_index: int = 0  # history index of the drain's first event

    def as_json(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "high_watermarks": {str(p): o for p, o in sorted(self.high_watermarks.items())},
            "timed_out_partitions": sorted(self.timed_out_partitions),
            "processes": self.processes,
            "first_index": self.first_index,
            "seconds": round(self.seconds, 3),
        }


class QueueWorkload:
    name = "queue"

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
    ) -> None:
        self.recorder, self.bootstrap, self.topic, self.profile = recorder, bootstrap, topic, profile
        self.partitions, self.producers, self.consumers = partitions, producers, consumers
        self.rate, self.seed, self.subscribe, self.group_id = rate, seed, subscribe, group_id
        self.process_ids = ProcessIds()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []  # unexpected exceptions in worker threads
        self._ready: list[threading.Event] = []
        self.started_ns = 0

    # --- the main phase ---------------------------------------------------------------
    def start(self, ready_timeout_s: float = 120.0) -> None:
        """Start every client thread; return once each has opened its client (so the time limit
        measures operations, not the transaction coordinator's start-up) or after `ready_timeout_s`."""
        for w in range(self.producers):
            self._spawn(f"producer-{w}", self._producer_loop, w)
        for c in range(self.consumers):
            self._spawn(f"consumer-{c}", self._consumer_loop, c)
        deadline = time.monotonic() + ready_timeout_s
        for event in self._ready:
            event.wait(max(0.0, deadline - time.monotonic()))
        if self.errors:  # a client that cannot even open means broken settings, not a finding
            self._stop.set()
            raise HarnessError(
                f"{len(self.errors)} client(s) could not start: {'; '.join(self.errors[:3])}",
                hint="fix the client settings named above (profile or workload options); nothing was measured",
            )
        self.started_ns = self.recorder.elapsed_ns()

    def _opened(self) -> None:
        self._ready[self._thread_index()].set()

    def _thread_index(self) -> int:
        return [t.ident for t in self._threads].index(threading.get_ident())

    def _spawn(self, name: str, target: Any, arg: int) -> None:
        ready = threading.Event()

        def guarded() -> None:
            try:
                target(arg)
            except Exception as exc:  # recorded for the run, never silently lost
                log.exception("%s died", name)
                self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
            finally:
                ready.set()

        self._ready.append(ready)

        thread = threading.Thread(target=guarded, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop issuing operations; producers wait for their delivery reports, consumers close."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(timeout=max(0.1, deadline - time.monotonic()))
        stuck = [t.name for t in self._threads if t.is_alive()]
        if stuck:
            self.errors.append(f"threads still running {timeout_s:.0f} s after stop: {stuck}")

    def new_producer(self) -> ProducerClient:
        return ProducerClient(self.process_ids(), self.recorder, self.bootstrap, self.topic, self.profile).open()

    def _producer_loop(self, w: int) -> None:
        rng = random.Random(self.seed * 1_000_003 + w)
        per_second = self.rate / self.producers
        client, n = self.new_producer(), 0
        self._opened()
        began = time.monotonic()
        try:
            while not self._stop.is_set():
                due = int(per_second * (time.monotonic() - began)) - n
                if due <= 0:
                    client.poll(min(0.005, 1.0 / per_second))
                    continue
                for _ in range(min(due, MAX_BURST)):
                    client.send(rng.randrange(self.partitions), n * self.producers + w)
                    n += 1
                    if client.fatal:
                        client = self._replace(client)
                        break
        finally:
            client.close()

    def _replace(self, client: ProducerClient) -> ProducerClient:
        self.recorder.record(client.process, "info", "crash", {"reason": client.fatal})
        client.close(timeout_s=5)
        return self.new_producer()

    def new_consumer(self, group: bool = False) -> ConsumerClient:
        """A fresh consumer; `group` joins the workload's group, otherwise a group of its own (assign, no commits shared)."""
        process = self.process_ids()
        group_id = self.group_id if group else f"{self.group_id}-{process}"
        return ConsumerClient(process, self.recorder, self.bootstrap, self.topic, self.profile, group_id).open()

    def _consumer_loop(self, c: int) -> None:
        rng = random.Random(self.seed * 1_000_003 + 10_000 + c)
        client = self.new_consumer(group=self.subscribe)
        self._opened()
        try:
            if self.subscribe:
                client.subscribe(list(range(self.partitions)))
            else:
                share = [p for p in range(self.partitions) if p % self.consumers == c] or list(range(self.partitions))
                # Without auto-commit nothing is ever committed, so read from the beginning rather than wait
                # on the group coordinator for offsets that cannot exist.
                client.assign(share, "committed" if self.profile.enable_auto_commit else "beginning")
            while not self._stop.is_set():
                client.poll(max_records=rng.randint(100, 500), timeout_s=0.1)
        finally:
            client.close()

    # --- the final drain ------------------------------------------------------------
    def high_watermarks(self, timeout_s: float = 60.0) -> dict[int, int]:
        """Every partition's high watermark. Right after an election a new leader answers
        OFFSET_NOT_AVAILABLE until its high watermark catches up, so retriable errors are retried
        until `timeout_s`."""
        probe = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{self.group_id}-hwm",
                          "logger": logging.getLogger("librdkafka.consumer")})
        deadline = time.monotonic() + timeout_s
        high: dict[int, int] = {}
        try:
            for p in range(self.partitions):
                while True:
                    try:
                        high[p] = probe.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1]
                        break
                    except KafkaException as exc:
                        err = exc.args[0]
                        if not (err.retriable() or err.code() == KafkaError.OFFSET_NOT_AVAILABLE) or time.monotonic() > deadline:
                            raise
                        time.sleep(0.5)
            return high
        finally:
            probe.close()

    def drain(self, timeout_s: float = 60.0) -> DrainResult:
        """Every consumer (at least one) re-reads every partition from the beginning to its high watermark."""
        began = time.monotonic()
        first_index = self.recorder.events_recorded
        high = self.high_watermarks()
        results: list[set[int]] = []
        processes: list[int] = []
        lock = threading.Lock()

        def one(_: int) -> None:
            client = self.new_consumer()
            with lock:
                processes.append(client.process)
            try:
                timed_out = drain_one(client, self.partitions, high, began + timeout_s)
            finally:
                client.close()
            with lock:
                results.append(timed_out)

        threads = [threading.Thread(target=one, args=(i,), name=f"drain-{i}", daemon=True) for i in range(max(1, self.consumers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=timeout_s + 30)
        timed_out_partitions = set().union(*results) if results else set(range(self.partitions))
        complete = len(results) == len(threads) and not timed_out_partitions
        return DrainResult(complete, high, sorted(timed_out_partitions), sorted(processes), time.monotonic() - began, first_index)


def drain_one(client: ConsumerClient, partitions: int, high: dict[int, int], deadline: float) -> set[int]:
    """Assign every partition from the beginning and poll until each is read to `high`; return those that were not."""
    client.assign(list(range(partitions)), "beginning")

    def remaining() -> set[int]:
        return {
            p for p in range(partitions)
            if high[p] > 0 and max(client.next_offset.get(p, 0), client.eof.get(p, 0)) < high[p]
        }

    left = remaining()
    while left and time.monotonic() < deadline:
        client.poll(max_records=5000, timeout_s=0.2)
        left = remaining()
    return left
