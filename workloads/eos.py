"""The exactly-once pipeline workload: consume, transform, produce, in one transaction.

Producers (the queue workload's, `producers` of them: workloads/loops.py's `Feed`) feed unique
values into the input topic.
Each of the `consumers` pipeline workers owns a share of the input partitions (assigned, not
subscribed, with its own fixed `transactional.id`, so that a replacement worker fences the one
it replaces, as Kafka's exactly-once pattern before KIP-447 does) and loops: consume a batch of
input records, then in one transaction produce one output record per input record (to the same
partition number of the output topic, value V' = v + 1e9 * attempt: harness/history/eos.py),
commit the input offsets with `send_offsets_to_transaction`, and commit (or abort on purpose with
`abort_probability`). After an abort the worker rewinds to the group's committed offsets; after a
transaction of unknown outcome or a fatal error it is replaced (a new process). The worker and
the bounds of its transactions (one deadline a transaction, so a fault never hangs the run) are
in workloads/eos_pipeline.py.

Each transaction is one `txn` op: its `records` are the input records the worker consumed for it
(consumed just before its invoke), its `sends` the output records. `consumers` more clients read
the output topic with read_committed, recorded at keys 1000 + p.

At the end the feeders stop first; the pipeline then gets up to the stop timeout to commit input
offsets up to the input's high watermarks (`pipeline` in config.json's drain says whether it
caught up); then both topics are drained.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from harness.errors import HarnessError
from harness.history import Recorder
from harness.history.eos import OUTPUT_KEY_BASE, output_key
from workloads.clients import Clients, ConsumerClient, ProducerClient
from workloads.drain import DRAIN_CAP_FACTOR, DrainResult, drain_one, drain_topic, not_read, probe_high_watermarks
from workloads.drivers.base import ClientException, Driver
from workloads.eos_pipeline import PipelineWorker
from workloads.loops import Feed, poll_until, share
from workloads.profiles import Profile
from workloads.threads import ClientThreads

log = logging.getLogger(__name__)


@dataclass
class EosDrain:
    """The drain of both topics, and whether the pipeline caught up before it; as_json is
    config.json's `drain` (docs/history.md): the output's partitions appear at keys 1000 + p."""
    input: DrainResult
    output: DrainResult
    pipeline: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        a, b = self.input.as_json(), self.output.as_json()
        out = {
            "complete": a["complete"] and b["complete"],
            "high_watermarks": {**a["high_watermarks"], **b["high_watermarks"]},
            "timed_out_partitions": a["timed_out_partitions"] + b["timed_out_partitions"],
            "undrained": {**a["undrained"], **b["undrained"]},
            "processes": a["processes"] + b["processes"],
            "first_index": a["first_index"],
            "seconds": round(a["seconds"] + b["seconds"], 3),
            "pipeline": self.pipeline,
        }
        return out


class EosWorkload:
    name = "eos"

    def __init__(self, recorder: Recorder, bootstrap: str, topic: str, profile: Profile, *, partitions: int = 8,
                 producers: int = 2, consumers: int = 2, rate: float = 1000.0, seed: int = 0, subscribe: bool = False,
                 group_id: str = "eos", abort_probability: float = 0.1, driver: Driver | None = None) -> None:
        if partitions > OUTPUT_KEY_BASE:
            raise HarnessError(f"the eos workload records its output topic at keys {OUTPUT_KEY_BASE} + p, so it "
                               f"takes at most {OUTPUT_KEY_BASE} partitions, not {partitions}.",
                               hint=f"use --partitions {OUTPUT_KEY_BASE} or fewer")
        if consumers < 1:
            raise HarnessError("the eos workload needs at least one pipeline worker (--consumers).", hint="e.g. --consumers 2")
        self.recorder, self.bootstrap, self.topic = recorder, bootstrap, topic
        self.profile = replace(profile, isolation_level="read_committed")
        self.partitions, self.producers, self.consumers = partitions, producers, consumers
        self.rate, self.seed, self.subscribe, self.group_id = rate, seed, subscribe, group_id  # subscribe: unused, workers assign
        self.abort_probability = abort_probability
        self.output_topic = f"{topic}-out"
        self.clients = Clients(recorder, bootstrap, self.profile, driver)
        self.threads = ClientThreads()
        self._attempts = itertools.count(1)
        self._attempt_lock = threading.Lock()
        self._stop = threading.Event()  # stops the pipeline and the readers
        self._feed_stop = threading.Event()  # the feeders stop first (stop())
        self.pipeline: dict[str, Any] = {}

    @property
    def errors(self) -> list[str]:
        return self.threads.errors

    @property
    def stuck(self) -> list[str]:
        return self.threads.stuck

    @property
    def topics(self) -> tuple[str, ...]:
        return (self.topic, self.output_topic)  # the run creates the output topic like the input

    @property
    def coordinated(self) -> dict[str, list[str]]:
        """The ids whose coordinators serve this workload: each pipeline worker's transactional.id,
        and the group whose offsets its transactions commit."""
        return {"transactional_ids": [f"{self.group_id}-eos-{c}" for c in range(self.consumers)], "groups": [self.group_id]}

    def start(self, ready_timeout_s: float = 120.0) -> None:
        """The feeders and the pipeline workers, each once open (init_transactions done); then the
        output readers."""
        feed = Feed(self.new_producer, self.recorder, self.threads, self._feed_stop, partitions=self.partitions,
                    producers=self.producers, rate=self.rate, seed=self.seed)
        for w in range(self.producers):
            self.threads.spawn(f"producer-{w}", feed.loop, w)
        for c in range(self.consumers):
            self.threads.spawn(f"consumer-{c}", self._worker_loop, c)

        def stop_all() -> None:
            self._stop.set()
            self._feed_stop.set()

        self.threads.wait_ready(ready_timeout_s, on_failure=stop_all)
        for c in range(self.consumers):
            self.threads.spawn(f"output-reader-{c}", self._reader_loop, c)

    def new_producer(self) -> ProducerClient:
        return self.clients.producer(self.topic)

    def _worker_loop(self, c: int) -> None:
        rng = random.Random(self.seed * 1_000_003 + 20_000 + c)
        mine = share(c, self.consumers, self.partitions)
        worker = self._open_worker(c, mine)
        self.threads.opened()
        # Ends within TXN_DEADLINE_S + ABORT_S (+ OPEN_S for a replacement) of the stop: each
        # transaction is bounded (workloads/eos_pipeline.py), and so is each try to open a worker.
        while worker is not None and not self._stop.is_set():
            with self._attempt_lock:
                attempt = next(self._attempts)
            worker.step(attempt, abort=rng.random() < self.abort_probability and not self._feed_stop.is_set())
            if worker.txn.fatal:
                self.recorder.record(worker.process, "info", "crash", {"reason": worker.txn.fatal})
                worker.close()
                worker = self._open_worker(c, mine)
        if worker is not None:
            worker.close()

    def _open_worker(self, c: int, mine: list[int]) -> PipelineWorker | None:
        """A new incarnation of worker c; None once the run stops. During a fault init_transactions
        may time out (no coordinator): retried, each try a new process bounded by OPEN_S, a second
        apart, until it opens or the run stops."""
        while not self._stop.is_set():
            worker = PipelineWorker.made(self.clients, self.topic, self.output_topic, self.group_id,
                                         f"{self.group_id}-eos-{c}", mine)
            try:
                return worker.open()
            except ClientException as exc:
                worker.close()
                log.info("pipeline worker %d: open failed, retrying: %s", c, exc)
                self._stop.wait(1.0)
        return None

    def _reader_loop(self, c: int) -> None:
        rng = random.Random(self.seed * 1_000_003 + 30_000 + c)
        client = self._output_consumer()
        try:
            client.assign(share(c, self.consumers, self.partitions), "beginning")
            poll_until(client, rng, self._stop)
        finally:
            client.close()

    def _output_consumer(self) -> ConsumerClient:
        return self.clients.consumer(self.output_topic, f"{self.group_id}-out", own_group=True,
                                     key_base=OUTPUT_KEY_BASE).open()

    def _input_consumer(self, group: bool = False) -> ConsumerClient:
        return self.clients.consumer(self.topic, self.group_id, own_group=not group).open()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop the feeders, let the pipeline commit up to the input's end (within `timeout_s`),
        then stop the pipeline and the readers."""
        began = time.monotonic()
        self._feed_stop.set()
        self.threads.join(timeout_s, prefix="producer-")
        self.pipeline = self._catch_up(began + timeout_s)
        self.pipeline["seconds"] = round(time.monotonic() - began, 3)
        self._stop.set()
        self.threads.join(max(5.0, began + timeout_s + 30 - time.monotonic()))

    def _catch_up(self, deadline: float) -> dict[str, Any]:
        high, offline = probe_high_watermarks(self.bootstrap, self.topic, range(self.partitions), f"{self.group_id}-hwm",
                                              timeout_s=max(1.0, deadline - time.monotonic()), driver=self.clients.driver)
        probe = self.clients.driver.consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group_id,
                                              "isolation.level": "read_committed", "enable.auto.commit": False},
                                             report_eof=False)
        committed: dict[int, int] = {}
        try:
            while True:
                try:
                    got = probe.committed(self.topic, sorted(high), min(10.0, max(1.0, deadline - time.monotonic())))
                    committed = {p: max(o, 0) for p, o in got.items()}
                except ClientException as exc:
                    log.info("eos catch-up: committed offsets: %s", exc)
                behind = {p: high[p] - committed.get(p, 0) for p in high if committed.get(p, 0) < high[p]}
                if not behind or time.monotonic() > deadline or self.errors:
                    break
                time.sleep(0.5)
        finally:
            probe.close()
        return {"caught_up": not behind and not offline, "output_topic": self.output_topic,
                "input_high_watermarks": {str(p): o for p, o in sorted(high.items())},
                "committed_offsets": {str(p): o for p, o in sorted(committed.items())},
                "behind": {str(p): n for p, n in sorted(behind.items())},
                "offline": {str(p): why for p, why in sorted(offline.items())}}

    def drain(self, timeout_s: float = 60.0) -> EosDrain:
        """The input as the queue workload drains it, then the output with read_committed readers."""
        first = drain_topic(self._input_consumer, self.consumers, self.bootstrap, self.topic, self.partitions,
                            self.group_id, self.recorder.events_recorded, timeout_s, self.clients.driver)
        began = time.monotonic()
        first_index = self.recorder.events_recorded
        high, offline = probe_high_watermarks(self.bootstrap, self.output_topic, range(self.partitions),
                                              f"{self.group_id}-out-hwm", timeout_s=timeout_s, driver=self.clients.driver)
        client = self._output_consumer()
        try:
            timed_out = drain_one(client, sorted(high), high, time.monotonic() + timeout_s * DRAIN_CAP_FACTOR, stall_s=timeout_s)
        finally:
            client.close()
        undrained = {output_key(p): why for p, why in offline.items()}
        undrained.update({output_key(p): not_read(high[p], timeout_s) for p in timed_out})
        second = DrainResult(not undrained, {output_key(p): o for p, o in high.items()},
                             sorted(output_key(p) for p in timed_out), [client.process], time.monotonic() - began,
                             first_index, undrained)
        return EosDrain(first, second, self.pipeline)
