"""Recorded Kafka clients: one client object is one history `process`.

Each client follows a small protocol (open, invoke operations, close) and
writes an `invoke` before it acts and an `ok`/`fail`/`info` completion after
(see workloads/outcomes.py for which is which). A client that hits a fatal
error records `crash` and is replaced by a new one with a new process id.

The Kafka client library beneath is a driver (workloads/drivers/): these classes hold the
history's rules, the driver the library's calls, so every driver writes the same history.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any

from harness.history import Recorder
from workloads import drivers
from workloads.drivers.base import BEGINNING, COMMITTED, ClientError, ClientException, ConsumerDriver, Driver, \
    ProducerDriver, QueueFull
from workloads.outcomes import error_text, send_outcome
from workloads.producer_ids import ProducerIdWatch
from workloads.profiles import Profile
from workloads.txn_client import TxnProducerClient

log = logging.getLogger(__name__)


class ProcessIds:
    """Thread-safe source of process ids: every client instance of a run gets a new one."""

    def __init__(self) -> None:
        self._next = itertools.count()
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return next(self._next)


class ProducerClient:
    """A recorded producer: `send(key, value)` writes value V to partition K of the topic."""

    def __init__(self, process: int, recorder: Recorder, bootstrap: str, topic: str, profile: Profile,
                 extra: dict[str, Any] | None = None, driver: Driver | None = None) -> None:
        self.process, self.recorder, self.topic = process, recorder, topic
        self.driver = driver if driver is not None else drivers.make()
        self.config = {  # Kafka's client settings; the driver adds its library's own
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            **profile.producer_config(),
            **(extra or {}),
        }
        self.producer: ProducerDriver | None = None
        self.fatal: str | None = None
        self._closing: str | None = None  # while close() purges: why the purged sends are unknown
        self._record_invoke, self._record_ok = recorder.send_invoke, recorder.send_ok

    def open(self) -> "ProducerClient":
        # its id and epoch, for duplicates' evidence (workloads/producer_ids.py)
        watch = ProducerIdWatch(self.recorder, self.process) if self.config.get("enable.idempotence") else None
        self.producer = self.driver.producer(self.config, self._ok, self._failed, watch)
        return self

    def _ok(self, key: int, value: int, offset: int, epoch: int | None) -> None:
        # K is the partition, which the outcome carries: no value -> key map on the hot path.
        # send_ok records a negative or missing offset or epoch as null
        self._record_ok(self.process, key, value, offset, epoch)

    def _failed(self, key: int, value: int, err: ClientError) -> None:
        if err.fatal:
            self.fatal = str(err)
        error = str(err) if self._closing is None else f"{self._closing} ({err})"
        self.recorder.send(self.process, send_outcome(err), key, value, None, None, error)

    def send(self, key: int, value: int, deadline_s: float = 5.0) -> None:
        """Invoke a send; its completion is recorded from the delivery outcome (pipelined)."""
        producer = self.producer
        assert producer is not None
        self._record_invoke(self.process, key, value)
        try:  # the common case first, outside any loop: this runs once per record
            producer.send(self.topic, key, value)
        except QueueFull:  # local queue full: wait for deliveries, bounded
            if not self._send_when_room(producer, key, value, deadline_s):
                return
        except ClientException as exc:
            self._refused(key, value, exc)
            return
        producer.poll(0)

    def _send_when_room(self, producer: ProducerDriver, key: int, value: int, deadline_s: float) -> bool:
        give_up = time.monotonic() + deadline_s
        while time.monotonic() < give_up:
            producer.poll(0.01)
            try:
                producer.send(self.topic, key, value)
                return True
            except QueueFull:
                continue
            except ClientException as exc:
                self._refused(key, value, exc)
                return False
        self._never_sent(key, value, f"local queue full for {deadline_s:g} s")
        return False

    def _refused(self, key: int, value: int, exc: ClientException) -> None:
        """The driver refused the record before it was queued: definitely not sent."""
        self._never_sent(key, value, error_text(exc))
        if exc.error.fatal:
            self.fatal = error_text(exc)

    def _never_sent(self, key: int, value: int, error: str) -> None:
        self.recorder.send(self.process, "fail", key, value, None, None, error)

    # --- the feed: a produce loop the driver runs itself (the Java client's, in its JVM) -----------
    def can_feed(self) -> bool:
        return hasattr(self.producer, "feed")

    def feed(self, w: int, producers: int, partitions: int, rate: float, seed: int, start_n: int) -> None:
        """Hand workloads/loops.py Feed's loop to the driver: it records each send's invoke before
        the send and its acknowledgement as packed rows (Recorder.append_rows); failures come back
        through `_failed`, as a send's do. The history is the same as the loop's here."""
        assert self.producer is not None
        self.producer.feed(self.recorder.append_rows, self.process, self.topic, w, producers, partitions,  # type: ignore[attr-defined]
                           rate, seed, start_n)

    def feed_stop(self) -> int:
        """Stop the driver's loop; the n of the value it would have sent next."""
        assert self.producer is not None
        return self.producer.feed_stop()  # type: ignore[attr-defined]

    def poll(self, timeout: float = 0) -> None:
        if self.producer is not None:
            self.producer.poll(timeout)

    def close(self, timeout_s: float = 35.0, why: str | None = None) -> None:
        """Wait for delivery outcomes; sends still unresolved are recorded `info` (unknown), their
        error saying `why` (by default: unresolved after the wait).

        The driver keeps the books: after the wait, purging gives every unresolved send an outcome
        (librdkafka: _PURGE_QUEUE / _PURGE_INFLIGHT), which `send_outcome` records as `info`."""
        producer = self.producer
        if producer is None:
            return
        try:
            if producer.flush(timeout_s) > 0:
                self._closing = why or f"unresolved after waiting {timeout_s:.0f} s at close"
                producer.purge()
                left = producer.flush(5)  # serves the purged sends' outcomes
                if left:
                    log.warning("producer %s: %d sends without a delivery report after purge; "
                                "their invokes stay uncompleted (unknown)", self.process, left)
        finally:
            self.producer = None
            producer.close()


class ConsumerClient:
    """A recorded consumer: assign or subscribe, then sequential polls."""

    def __init__(self, process: int, recorder: Recorder, bootstrap: str, topic: str, profile: Profile,
                 group_id: str, extra: dict[str, Any] | None = None, key_base: int = 0,
                 driver: Driver | None = None, report_eof: bool = True) -> None:
        self.process, self.recorder, self.topic = process, recorder, topic
        # The history's key of partition p is key_base + p: the eos workload's output topic is
        # recorded at keys 1000 + p, apart from its input topic (harness/history/eos.py).
        self.key_base = key_base
        self.driver = driver if driver is not None else drivers.make()
        self.report_eof = report_eof  # EOFs tell the drain a partition is read to its end
        self.config = {  # Kafka's client settings; the driver adds its library's own
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            **profile.consumer_config(),
            **(extra or {}),
        }
        self.consumer: ConsumerDriver | None = None
        self.eof: dict[int, int] = {}  # partition -> offset of the last EOF event seen
        self.rebalanced: list[int] | None = None  # the group's latest assignment, not yet recorded
        self.next_offset: dict[int, int] = {}  # partition -> offset after the last record read

    def open(self) -> "ConsumerClient":
        self.consumer = self.driver.consumer(self.config, report_eof=self.report_eof)
        return self

    def assign(self, keys: list[int], seek: str | None = "committed") -> bool:
        assert self.consumer is not None
        value = {"keys": [k + self.key_base for k in keys], "seek": seek}
        self.recorder.record(self.process, "invoke", "assign", value)
        try:  # seek null reads on from the committed offsets too (docs/history.md)
            self.consumer.assign(self.topic, keys, BEGINNING if seek == "beginning" else COMMITTED)
        except ClientException as exc:
            self.recorder.record(self.process, "fail", "assign", value, error_text(exc))
            return False
        self.recorder.record(self.process, "ok", "assign", value)
        return True

    def subscribe(self, keys: list[int]) -> bool:
        """Join the group; `keys` are the topic's partitions (the group decides who reads which)."""
        assert self.consumer is not None
        value = {"keys": [k + self.key_base for k in keys], "seek": "committed"}
        self.recorder.record(self.process, "invoke", "subscribe", value)
        try:
            self.consumer.subscribe(self.topic, self._on_assign)
        except ClientException as exc:
            self.recorder.record(self.process, "fail", "subscribe", value, error_text(exc))
            return False
        self.recorder.record(self.process, "ok", "subscribe", value)
        return True

    def _on_assign(self, partitions: list[int]) -> None:
        # Called inside consume(): remember it; poll() records it as an assign between two polls.
        self.rebalanced = partitions

    def poll(self, max_records: int = 500, timeout_s: float = 0.1) -> int:
        """One recorded poll; returns the number of records read."""
        assert self.consumer is not None
        self.recorder.record(self.process, "invoke", "poll", None)
        try:
            batch = self.consumer.consume(max_records, timeout_s)
        except ClientException as exc:
            self.recorder.record(self.process, "fail", "poll", None, error_text(exc))
            return 0
        base, next_offset = self.key_base, self.next_offset
        records = []
        for p, o, v, epoch in batch.records:
            records.append({"key": p + base, "offset": o, "value": v, "epoch": epoch})
            next_offset[p] = o + 1
        self.eof.update(batch.eof)
        errors = [str(e) for e in batch.errors]
        if self.rebalanced is not None:
            # A group rebalance happened inside this poll. librdkafka serves it before records of the new
            # assignment, so record it as its own assign (positions reset to the committed offsets) between
            # an empty poll and the poll that returned the records; the history stays sequential per process.
            keys, self.rebalanced = self.rebalanced, None
            value = {"keys": [k + self.key_base for k in keys], "seek": "committed"}
            self.recorder.record(self.process, "ok", "poll", {"records": []}, "group rebalance during this poll")
            self.recorder.record(self.process, "invoke", "assign", value)
            self.recorder.record(self.process, "ok", "assign", value, "group rebalance")
            self.recorder.record(self.process, "invoke", "poll", None)
        self.recorder.record(self.process, "ok", "poll", {"records": records}, "; ".join(errors) if errors else None)
        return len(records)

    def close(self) -> None:
        if self.consumer is not None:
            try:
                self.consumer.close()
            except ClientException as exc:
                log.info("consumer %s close: %s", self.process, exc)
            self.consumer = None


class Clients:
    """What a workload's recorded clients are made from, passed down explicitly: the history, the
    cluster's address, the profile and the driver; every client gets a new process id (one client
    object is one process), unless it shares one (the eos pipeline's consumer and producer)."""

    def __init__(self, recorder: Recorder, bootstrap: str, profile: Profile, driver: Driver | None = None) -> None:
        self.recorder, self.bootstrap, self.profile = recorder, bootstrap, profile
        self.driver = driver if driver is not None else drivers.make()
        self.process_ids = ProcessIds()

    def producer(self, topic: str) -> ProducerClient:
        """A new recorded producer, open."""
        return ProducerClient(self.process_ids(), self.recorder, self.bootstrap, topic, self.profile, driver=self.driver).open()

    def consumer(self, topic: str, group: str, *, own_group: bool = False, process: int | None = None,
                 extra: dict[str, Any] | None = None, key_base: int = 0, report_eof: bool = True) -> ConsumerClient:
        """A new recorded consumer, not open yet, in consumer group `group`, or with `own_group` in a
        group of its own, `<group>-<process>` (it assigns; no offsets shared)."""
        process = self.process_ids() if process is None else process
        return ConsumerClient(process, self.recorder, self.bootstrap, topic, self.profile,
                              f"{group}-{process}" if own_group else group, extra=extra, key_base=key_base,
                              driver=self.driver, report_eof=report_eof)

    def txn_producer(self, topic: str, transactional_id: str, process: int | None = None) -> TxnProducerClient:
        """A new recorded transactional producer, not open yet (open() runs init_transactions)."""
        process = self.process_ids() if process is None else process
        return TxnProducerClient(process, self.recorder, self.bootstrap, topic, self.profile, transactional_id,
                                 driver=self.driver)
