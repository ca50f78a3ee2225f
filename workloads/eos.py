"""The exactly-once pipeline workload: consume, transform, produce, in one transaction.

Producers (the queue workload's, `producers` of them) feed unique values into the input topic.
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

from confluent_kafka import Consumer, KafkaException, TopicPartition

from harness.errors import HarnessError
from harness.history.eos import OUTPUT_KEY_BASE, output_key
from workloads.clients import ConsumerClient
from workloads.drain import DrainResult, drain_one, probe_high_watermarks
from workloads.eos_pipeline import PipelineWorker
from workloads.queue import QueueWorkload

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


class EosWorkload(QueueWorkload):
    name = "eos"

    def __init__(self, *args: Any, abort_probability: float = 0.1, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.partitions > OUTPUT_KEY_BASE:
            raise HarnessError(f"the eos workload records its output topic at keys {OUTPUT_KEY_BASE} + p, so it "
                               f"takes at most {OUTPUT_KEY_BASE} partitions, not {self.partitions}.",
                               hint=f"use --partitions {OUTPUT_KEY_BASE} or fewer")
        if self.consumers < 1:
            raise HarnessError("the eos workload needs at least one pipeline worker (--consumers).", hint="e.g. --consumers 2")
        self.profile = replace(self.profile, isolation_level="read_committed")
        self.abort_probability = abort_probability
        self.output_topic = f"{self.topic}-out"
        self._attempts = itertools.count(1)
        self._attempt_lock = threading.Lock()
        self._feed_stop = threading.Event()  # the feeders stop first (stop())
        self.pipeline: dict[str, Any] = {}

    @property
    def topics(self) -> tuple[str, ...]:
        return (self.topic, self.output_topic)  # the run creates the output topic like the input

    def start(self, ready_timeout_s: float = 120.0) -> None:
        # The queue workload's producers feed the input; its consumers are replaced by the pipeline
        # workers (spawned by _consumer_loop) and the output readers.
        try:
            super().start(ready_timeout_s)
        except HarnessError:
            self._feed_stop.set()
            raise
        for c in range(self.consumers):
            self._spawn(f"output-reader-{c}", self._reader_loop, c)

    def _consumer_loop(self, c: int) -> None:
        rng = random.Random(self.seed * 1_000_003 + 20_000 + c)
        share = [p for p in range(self.partitions) if p % self.consumers == c] or list(range(self.partitions))
        worker = self._open_worker(c, share)
        self._opened()
        # Ends within TXN_DEADLINE_S + ABORT_S (+ OPEN_S for a replacement) of the stop: each
        # transaction is bounded (workloads/eos_pipeline.py), and so is each try to open a worker.
        while worker is not None and not self._stop.is_set():
            with self._attempt_lock:
                attempt = next(self._attempts)
            worker.step(attempt, abort=rng.random() < self.abort_probability and not self._feed_stop.is_set())
            if worker.txn.fatal:
                self.recorder.record(worker.process, "info", "crash", {"reason": worker.txn.fatal})
                worker.close()
                worker = self._open_worker(c, share)
        if worker is not None:
            worker.close()

    def _open_worker(self, c: int, share: list[int]) -> PipelineWorker | None:
        """A new incarnation of worker c; None once the run stops. During a fault init_transactions
        may time out (no coordinator): retried, each try a new process bounded by OPEN_S, a second
        apart, until it opens or the run stops."""
        while not self._stop.is_set():
            worker = PipelineWorker(self, c, share)
            try:
                return worker.open()
            except KafkaException as exc:
                worker.close()
                log.info("pipeline worker %d: open failed, retrying: %s", c, exc)
                self._stop.wait(1.0)
        return None

    def _reader_loop(self, c: int) -> None:
        rng = random.Random(self.seed * 1_000_003 + 30_000 + c)
        client = self._output_consumer()
        try:
            share = [p for p in range(self.partitions) if p % self.consumers == c] or list(range(self.partitions))
            client.assign(share, "beginning")
            while not self._stop.is_set():
                client.poll(max_records=rng.randint(100, 500), timeout_s=0.1)
        finally:
            client.close()

    def _output_consumer(self) -> ConsumerClient:
        process = self.process_ids()
        return ConsumerClient(process, self.recorder, self.bootstrap, self.output_topic, self.profile,
                              f"{self.group_id}-out-{process}", key_base=OUTPUT_KEY_BASE).open()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop the feeders, let the pipeline commit up to the input's end (within `timeout_s`),
        then stop the pipeline and the readers."""
        began = time.monotonic()
        self._feed_stop.set()
        for t in self._threads:
            if t.name.startswith("producer-"):
                t.join(timeout=max(0.1, began + timeout_s - time.monotonic()))
        self.pipeline = self._catch_up(began + timeout_s)
        self.pipeline["seconds"] = round(time.monotonic() - began, 3)
        super().stop(max(5.0, began + timeout_s + 30 - time.monotonic()))

    def _catch_up(self, deadline: float) -> dict[str, Any]:
        high, offline = probe_high_watermarks(self.bootstrap, self.topic, range(self.partitions), f"{self.group_id}-hwm",
                                              timeout_s=max(1.0, deadline - time.monotonic()))
        probe = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group_id, "isolation.level": "read_committed",
                          "enable.auto.commit": False, "logger": logging.getLogger("librdkafka.consumer")})
        committed: dict[int, int] = {}
        try:
            while True:
                try:
                    tps = probe.committed([TopicPartition(self.topic, p) for p in sorted(high)],
                                          timeout=min(10.0, max(1.0, deadline - time.monotonic())))
                    committed = {tp.partition: max(tp.offset, 0) for tp in tps}
                except KafkaException as exc:
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
        first = super().drain(timeout_s)
        began = time.monotonic()
        first_index = self.recorder.events_recorded
        high, offline = probe_high_watermarks(self.bootstrap, self.output_topic, range(self.partitions),
                                              f"{self.group_id}-out-hwm", timeout_s=timeout_s)
        client = self._output_consumer()
        try:
            timed_out = drain_one(client, sorted(high), high, time.monotonic() + timeout_s)
        finally:
            client.close()
        undrained = {output_key(p): why for p, why in offline.items()}
        undrained.update({output_key(p): f"not read to its high watermark {high[p]} within {timeout_s:g} s" for p in timed_out})
        second = DrainResult(not undrained, {output_key(p): o for p, o in high.items()},
                             sorted(output_key(p) for p in timed_out), [client.process], time.monotonic() - began,
                             first_index, undrained)
        return EosDrain(first, second, self.pipeline)

