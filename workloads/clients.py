"""Recorded Kafka clients: one client object is one history `process`.

Each client follows a small protocol (open, invoke operations, close) and
writes an `invoke` before it acts and an `ok`/`fail`/`info` completion after
(see workloads/outcomes.py for which is which). A client that hits a fatal
error records `crash` and is replaced by a new one with a new process id.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_STORED, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from harness.history import Recorder
from workloads.outcomes import error_text, send_outcome
from workloads.producer_ids import watch_config
from workloads.profiles import Profile

log = logging.getLogger(__name__)


class ProcessIds:
    """Thread-safe source of process ids: every client instance of a run gets a new one."""

    def __init__(self) -> None:
        self._next = itertools.count()
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return next(self._next)


def _epoch(msg: Message) -> int | None:
    # KIP-320 leader epoch. librdkafka reports it for consumed messages; for delivery
    # reports of produced messages it returns -1, which confluent-kafka maps to None.
    epoch = msg.leader_epoch()
    return epoch if epoch is not None and epoch >= 0 else None


class ProducerClient:
    """A recorded producer: `send(key, value)` writes value V to partition K of the topic."""

    def __init__(self, process: int, recorder: Recorder, bootstrap: str, topic: str, profile: Profile,
                 extra: dict[str, Any] | None = None) -> None:
        self.process, self.recorder, self.topic = process, recorder, topic
        self.config = {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "logger": logging.getLogger("librdkafka.producer"),
            **profile.producer_config(),
            **(extra or {}),
        }
        if self.config.get("enable.idempotence"):
            self.config.update(watch_config(recorder, process))  # its id and epoch, for duplicates' evidence
        self.producer: Producer | None = None
        self.fatal: str | None = None
        self._closing: str | None = None  # while close() purges: why the purged sends are unknown
        self._deliver = self._on_delivery  # bound once, not per send
        self._record_invoke, self._record_ok = recorder.send_invoke, recorder.send_ok

    def open(self) -> "ProducerClient":
        self.producer = Producer(self.config)
        return self

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        # No value -> key map on the hot path: K is the partition, which the message carries.
        value, key = int(msg.value()), msg.partition()
        if err is None:
            # send_ok records a negative or missing offset or epoch as null (epoch: see _epoch)
            self._record_ok(self.process, key, value, msg.offset(), msg.leader_epoch())
        else:
            if err.fatal():
                self.fatal = error_text(err)
            error = error_text(err) if self._closing is None else f"{self._closing} ({error_text(err)})"
            self.recorder.send(self.process, send_outcome(err), key, value, None, None, error)

    def send(self, key: int, value: int, deadline_s: float = 5.0) -> None:
        """Invoke a send; its completion is recorded from the delivery report (pipelined)."""
        producer = self.producer
        assert producer is not None
        self._record_invoke(self.process, key, value)
        try:  # the common case first, outside any loop: this runs once per record
            producer.produce(self.topic, b"%d" % value, partition=key, on_delivery=self._deliver)
        except BufferError:  # local queue full: wait for deliveries, bounded
            if not self._produce_when_room(producer, key, value, deadline_s):
                return
        except KafkaException as exc:
            self._refused(key, value, exc)
            return
        producer.poll(0)

    def _produce_when_room(self, producer: Producer, key: int, value: int, deadline_s: float) -> bool:
        give_up = time.monotonic() + deadline_s
        while time.monotonic() < give_up:
            producer.poll(0.01)
            try:
                producer.produce(self.topic, b"%d" % value, partition=key, on_delivery=self._deliver)
                return True
            except BufferError:
                continue
            except KafkaException as exc:
                self._refused(key, value, exc)
                return False
        self._never_sent(key, value, f"local queue full for {deadline_s:g} s")
        return False

    def _refused(self, key: int, value: int, exc: KafkaException) -> None:
        """produce() refused the message before it was queued: definitely not sent."""
        self._never_sent(key, value, error_text(exc))
        if exc.args[0].fatal():
            self.fatal = error_text(exc)

    def _never_sent(self, key: int, value: int, error: str) -> None:
        self.recorder.send(self.process, "fail", key, value, None, None, error)

    def poll(self, timeout: float = 0) -> None:
        if self.producer is not None:
            self.producer.poll(timeout)

    def close(self, timeout_s: float = 35.0, why: str | None = None) -> None:
        """Wait for delivery reports; sends still unresolved are recorded `info` (unknown), their
        error saying `why` (by default: unresolved after the wait).

        librdkafka keeps the books: after the wait, purging its queue and in-flight
        requests gives every unresolved message a delivery report (_PURGE_QUEUE /
        _PURGE_INFLIGHT), which `send_outcome` records as `info`."""
        producer = self.producer
        if producer is None:
            return
        try:
            if producer.flush(timeout_s) > 0:
                self._closing = why or f"unresolved after waiting {timeout_s:.0f} s at close"
                producer.purge(in_queue=True, in_flight=True, blocking=False)
                left = producer.flush(5)  # serves the purged messages' delivery reports
                if left:
                    log.warning("producer %s: %d sends without a delivery report after purge; "
                                "their invokes stay uncompleted (unknown)", self.process, left)
        finally:
            self.producer = None


class ConsumerClient:
    """A recorded consumer: assign or subscribe, then sequential polls."""

    def __init__(self, process: int, recorder: Recorder, bootstrap: str, topic: str, profile: Profile,
                 group_id: str, extra: dict[str, Any] | None = None, key_base: int = 0) -> None:
        self.process, self.recorder, self.topic = process, recorder, topic
        # The history's key of partition p is key_base + p: the eos workload's output topic is
        # recorded at keys 1000 + p, apart from its input topic (harness/history/eos.py).
        self.key_base = key_base
        self.config = {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "enable.partition.eof": True,  # EOF events tell the drain a partition is read to its end
            "logger": logging.getLogger("librdkafka.consumer"),
            **profile.consumer_config(),
            **(extra or {}),
        }
        self.consumer: Consumer | None = None
        self.eof: dict[int, int] = {}  # partition -> offset of the last EOF event seen
        self.rebalanced: list[int] | None = None  # the group's latest assignment, not yet recorded
        self.next_offset: dict[int, int] = {}  # partition -> offset after the last record read

    def open(self) -> "ConsumerClient":
        self.consumer = Consumer(self.config)
        return self

    def assign(self, keys: list[int], seek: str | None = "committed") -> bool:
        assert self.consumer is not None
        value = {"keys": [k + self.key_base for k in keys], "seek": seek}
        self.recorder.record(self.process, "invoke", "assign", value)
        start = OFFSET_BEGINNING if seek == "beginning" else OFFSET_STORED
        try:
            self.consumer.assign([TopicPartition(self.topic, k, start) for k in keys])
        except KafkaException as exc:
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
            self.consumer.subscribe([self.topic], on_assign=self._on_assign)
        except KafkaException as exc:
            self.recorder.record(self.process, "fail", "subscribe", value, error_text(exc))
            return False
        self.recorder.record(self.process, "ok", "subscribe", value)
        return True

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Called inside consume(): remember it; poll() records it as an assign between two polls.
        self.rebalanced = sorted(tp.partition for tp in partitions)

    def poll(self, max_records: int = 500, timeout_s: float = 0.1) -> int:
        """One recorded poll; returns the number of records read."""
        assert self.consumer is not None
        self.recorder.record(self.process, "invoke", "poll", None)
        try:
            messages = self.consumer.consume(num_messages=max_records, timeout=timeout_s)
        except (KafkaException, RuntimeError) as exc:
            self.recorder.record(self.process, "fail", "poll", None, error_text(exc))
            return 0
        records, errors = [], []
        for msg in messages:
            err = msg.error()
            if err is None:
                p, o = msg.partition(), msg.offset()
                records.append({"key": p + self.key_base, "offset": o, "value": int(msg.value()), "epoch": _epoch(msg)})
                self.next_offset[p] = o + 1
            elif err.code() == KafkaError._PARTITION_EOF:
                self.eof[msg.partition()] = msg.offset()
            else:
                errors.append(error_text(err))
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
            except (KafkaException, RuntimeError) as exc:
                log.info("consumer %s close: %s", self.process, exc)
            self.consumer = None
