"""The transactional workload: transactions over several partitions, some aborted on purpose, read with read_committed.

Each producer has its own `transactional.id`; a transaction writes 2–4 values
to distinct partitions (seeded), then commits, or aborts with probability
`abort_probability`. It is recorded as one `txn` operation whose value lists
its sends (with the offsets and epochs the delivery reports gave): `ok` when
commit_transaction() returned, `fail` when abort_transaction() returned,
`info` when neither is known. Consumers are the queue workload's, forced to
`isolation.level=read_committed`, so no record of a `fail` transaction may
ever appear in a poll.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import replace
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from harness.history import Recorder
from workloads.clients import _epoch
from workloads.outcomes import error_text
from workloads.pacing import Pacer
from workloads.producer_ids import watch_config
from workloads.profiles import Profile
from workloads.queue import QueueWorkload

TXN_TIMEOUT_S = 30.0
COMMIT_ATTEMPTS = 3


class TxnProducerClient:
    """A recorded transactional producer; one `transaction()` call is one `txn` operation."""

    def __init__(self, process: int, recorder: Recorder, bootstrap: str, topic: str, profile: Profile, transactional_id: str) -> None:
        self.process, self.recorder, self.topic = process, recorder, topic
        self.config = {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "logger": logging.getLogger("librdkafka.producer"),
            **profile.producer_config(),
            "enable.idempotence": True,  # required by transactions
            "acks": "all",
            "transactional.id": transactional_id,
            # librdkafka refuses a producer whose message timeout exceeds its transaction timeout.
            "transaction.timeout.ms": max(60_000, profile.delivery_timeout_ms),
            # Right after a commit the coordinator answers CONCURRENT_TRANSACTIONS until its markers are
            # written; librdkafka's default 100 ms backoff made each transaction wait for it.
            "retry.backoff.ms": 10,
            **watch_config(recorder, process),  # its id and epoch in the history (workloads/producer_ids.py)
        }
        self.producer: Producer | None = None
        self.fatal: str | None = None

    def open(self) -> "TxnProducerClient":
        self.producer = Producer(self.config)
        self.producer.init_transactions(TXN_TIMEOUT_S)  # fences any earlier producer with this transactional.id
        return self

    def transaction(self, sends: list[tuple[int, int]], abort: bool) -> str:
        """Write `sends` ((key, value) pairs) in one transaction; commit, or abort if `abort`. Returns the outcome."""
        assert self.producer is not None
        invoked = {"sends": [{"key": k, "value": v} for k, v in sends], "records": []}
        self.recorder.record(self.process, "invoke", "txn", invoked)
        delivered: dict[int, tuple[int | None, int | None]] = {}

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is None:
                delivered[int(msg.value())] = (msg.offset(), _epoch(msg))

        def value() -> dict[str, Any]:
            return {
                "sends": [{"key": k, "value": v, "offset": delivered.get(v, (None, None))[0], "epoch": delivered.get(v, (None, None))[1]}
                          for k, v in sends],
                "records": [],
            }

        try:
            self.producer.begin_transaction()
        except KafkaException as exc:  # local state error: nothing was sent
            self._note_fatal(exc)
            self.recorder.record(self.process, "fail", "txn", value(), error_text(exc))
            return "fail"
        reason = "aborted by the workload"
        try:
            for k, v in sends:
                self.producer.produce(self.topic, str(v).encode(), partition=k, on_delivery=on_delivery)
            self.producer.flush(TXN_TIMEOUT_S)
            if not abort:
                return self._commit(value)
        except KafkaException as exc:
            if self._note_fatal(exc):
                self.recorder.record(self.process, "info", "txn", value(), error_text(exc))
                return "info"
            reason = error_text(exc)
        return self._abort(value, reason)

    def _commit(self, value: Any) -> str:
        assert self.producer is not None
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                self.producer.commit_transaction(TXN_TIMEOUT_S)
                self.recorder.record(self.process, "ok", "txn", value())
                return "ok"
            except KafkaException as exc:
                err = exc.args[0]
                if self._note_fatal(exc) or (not err.retriable() and not err.txn_requires_abort()):
                    self.recorder.record(self.process, "info", "txn", value(), error_text(exc))
                    return "info"
                if err.txn_requires_abort():
                    return self._abort(value, error_text(exc))
                if attempt == COMMIT_ATTEMPTS - 1:  # retriable, still unknown: the commit may yet complete
                    self.recorder.record(self.process, "info", "txn", value(), error_text(exc))
                    self.fatal = f"commit unresolved after {COMMIT_ATTEMPTS} attempts: {error_text(exc)}"
                    return "info"
        raise AssertionError("unreachable")

    def _abort(self, value: Any, reason: str) -> str:
        assert self.producer is not None
        try:
            self.producer.abort_transaction(TXN_TIMEOUT_S)
        except KafkaException as exc:  # the abort did not finish: the transaction's fate is unknown
            self._note_fatal(exc)
            self.fatal = self.fatal or f"abort failed: {error_text(exc)}"
            self.recorder.record(self.process, "info", "txn", value(), f"{reason}; abort failed: {error_text(exc)}")
            return "info"
        self.recorder.record(self.process, "fail", "txn", value(), reason)
        return "fail"

    def _note_fatal(self, exc: KafkaException) -> bool:
        err = exc.args[0]
        if isinstance(err, KafkaError) and err.fatal():
            self.fatal = error_text(err)
            return True
        return False

    def close(self, timeout_s: float = 10.0) -> None:
        if self.producer is not None:
            self.producer.flush(timeout_s)
            self.producer = None


class TxnWorkload(QueueWorkload):
    name = "txn"

    def __init__(self, *args: Any, abort_probability: float = 0.2, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.profile = replace(self.profile, isolation_level="read_committed")
        self.abort_probability = abort_probability

    def new_txn_producer(self, w: int) -> TxnProducerClient:
        return TxnProducerClient(self.process_ids(), self.recorder, self.bootstrap, self.topic, self.profile,
                                 f"{self.group_id}-txn-{w}").open()

    def _producer_loop(self, w: int) -> None:
        rng = random.Random(self.seed * 1_000_003 + w)
        pacer = Pacer(self.rate / self.producers)
        client, n = self.new_txn_producer(w), 0
        self._opened()
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
