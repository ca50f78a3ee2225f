"""A recorded transactional producer: one `transaction()` call is one `txn` operation (the txn
workload's, workloads/txn.py; the eos pipeline drives its own, bounded, in eos_pipeline.py).

`ok` when commit_transaction() returned, `fail` when abort_transaction() returned, `info` when
neither is known (docs/history.md). The sends carry the offsets and epochs their delivery
outcomes gave (null where none came).
"""

from __future__ import annotations

import time
from typing import Any

from harness.history import Recorder
from workloads import drivers
from workloads.drivers.base import ClientError, ClientException, Driver, ProducerDriver
from workloads.outcomes import error_text
from workloads.producer_ids import ProducerIdWatch
from workloads.profiles import Profile

TXN_TIMEOUT_S = 30.0
RETRY_INIT_S = 0.5  # between two tries of init_transactions that Kafka answered with a retriable error
COMMIT_ATTEMPTS = 3
_UNDELIVERED = (None, None)


class TxnProducerClient:
    """A recorded transactional producer; one `transaction()` call is one `txn` operation."""

    def __init__(self, process: int, recorder: Recorder, bootstrap: str, topic: str, profile: Profile, transactional_id: str,
                 driver: Driver | None = None) -> None:
        self.process, self.recorder, self.topic = process, recorder, topic
        self.driver = driver if driver is not None else drivers.make()
        self.config = {  # Kafka's client settings; the driver adds its library's own
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            **profile.producer_config(),
            "enable.idempotence": True,  # required by transactions
            "acks": "all",
            "transactional.id": transactional_id,
            # librdkafka refuses a producer whose message timeout exceeds its transaction timeout.
            "transaction.timeout.ms": max(60_000, profile.delivery_timeout_ms),
            # Right after a commit the coordinator answers CONCURRENT_TRANSACTIONS until its markers are
            # written; librdkafka's default 100 ms backoff made each transaction wait for it.
            "retry.backoff.ms": 10,
        }
        self.producer: ProducerDriver | None = None
        self.fatal: str | None = None
        # value -> (offset, epoch) of the sends delivered; a transaction's sends look themselves up
        self.delivered: dict[int, tuple[int | None, int | None]] = {}

    def open(self, timeout_s: float = TXN_TIMEOUT_S) -> "TxnProducerClient":
        # its id and epoch in the history (workloads/producer_ids.py)
        self.producer = self.driver.producer(self.config, self._ok, self._failed, ProducerIdWatch(self.recorder, self.process))
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.producer.init_transactions(max(1.0, deadline - time.monotonic()))  # fences any earlier producer
                return self
            except ClientException as exc:
                # Kafka asks for another try: a transaction coordinator still loading its log just
                # after the cluster started. A fence run under load (~20) ended FAILED with "could
                # not start: COORDINATOR_LOAD_IN_PROGRESS" from both producers (20261126T134231-2c63e5).
                if not exc.error.retriable or time.monotonic() >= deadline:
                    raise
                time.sleep(RETRY_INIT_S)

    def _ok(self, key: int, value: int, offset: int, epoch: int | None) -> None:
        self.delivered[value] = (offset, epoch if epoch is not None and epoch >= 0 else None)

    def _failed(self, key: int, value: int, err: ClientError) -> None:
        pass  # a send of a transaction has no outcome of its own: the transaction's is recorded

    def txn_value(self, sends: list[tuple[int, int]], records: list[dict[str, Any]]) -> dict[str, Any]:
        """The history's txn value: `sends` ((key, value) pairs) with what their delivery gave."""
        got = self.delivered
        return {"sends": [{"key": k, "value": v, "offset": got.get(v, _UNDELIVERED)[0], "epoch": got.get(v, _UNDELIVERED)[1]}
                          for k, v in sends],
                "records": records}

    def transaction(self, sends: list[tuple[int, int]], abort: bool) -> str:
        """Write `sends` ((key, value) pairs) in one transaction; commit, or abort if `abort`. Returns the outcome."""
        assert self.producer is not None
        invoked = {"sends": [{"key": k, "value": v} for k, v in sends], "records": []}
        self.recorder.record(self.process, "invoke", "txn", invoked)
        self.delivered = {}

        def value() -> dict[str, Any]:
            return self.txn_value(sends, [])

        try:
            self.producer.begin_transaction()
        except ClientException as exc:  # local state error: nothing was sent
            self.note_fatal(exc)
            self.recorder.record(self.process, "fail", "txn", value(), error_text(exc))
            return "fail"
        reason = "aborted by the workload"
        try:
            for k, v in sends:
                self.producer.send(self.topic, k, v)
            self.producer.flush(TXN_TIMEOUT_S)
            if not abort:
                return self._commit(value)
        except ClientException as exc:
            if self.note_fatal(exc):
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
            except ClientException as exc:
                err = exc.error
                if self.note_fatal(exc) or (not err.retriable and not err.txn_requires_abort):
                    self.recorder.record(self.process, "info", "txn", value(), error_text(exc))
                    return "info"
                if err.txn_requires_abort:
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
        except ClientException as exc:  # the abort did not finish: the transaction's fate is unknown
            self.note_fatal(exc)
            self.fatal = self.fatal or f"abort failed: {error_text(exc)}"
            self.recorder.record(self.process, "info", "txn", value(), f"{reason}; abort failed: {error_text(exc)}")
            return "info"
        self.recorder.record(self.process, "fail", "txn", value(), reason)
        return "fail"

    def note_fatal(self, exc: ClientException) -> bool:
        """Remember a fatal error (the producer is unusable: the workload replaces it); True if it was one."""
        if exc.error.fatal:
            self.fatal = error_text(exc)
            return True
        return False

    def close(self, timeout_s: float = 10.0) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            try:
                producer.flush(timeout_s)
            finally:
                producer.close()
