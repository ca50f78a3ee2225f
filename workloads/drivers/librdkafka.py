"""The librdkafka driver: confluent-kafka's Producer and Consumer behind the driver protocol
(workloads/drivers/base.py). The only module of workloads/ that imports confluent_kafka.

Each handle keeps its confluent-kafka object as `raw`, outside the protocol, for code that drives
librdkafka by hand (the KAFKA-17754 scenarios send EndTxn through it: harness/scenarios/).
"""

from __future__ import annotations

import json
import logging
import sys
from importlib.metadata import version
from typing import Any

from confluent_kafka import (OFFSET_BEGINNING, OFFSET_STORED, Consumer, KafkaError, KafkaException, Message, Producer,
                             TopicPartition, libversion)

from workloads.drivers.base import (BEGINNING, Batch, ClientError, ClientException, OnAssign, OnError, OnOk,
                                    OnProducerId, QueueFull, Record)

STATS_INTERVAL_MS = 1000  # how often librdkafka reports its producer id and epoch (workloads/producer_ids.py)


def client_error(err: KafkaError | BaseException) -> ClientError:
    """librdkafka's error (or an exception confluent-kafka raised) as the protocol's ClientError; its
    text, `NAME: message`, is what the history's `error` said before the driver layer."""
    if isinstance(err, KafkaException) and err.args and isinstance(err.args[0], KafkaError):
        err = err.args[0]
    if isinstance(err, KafkaError):
        return ClientError(err.name(), err.str(), fatal=err.fatal(), retriable=err.retriable(),
                           txn_requires_abort=err.txn_requires_abort())
    # e.g. RuntimeError from a closed consumer: its type is the name, as error_text wrote it
    return ClientError(type(err).__name__, str(err))


def _failed(err: BaseException) -> ClientException:
    return ClientException(client_error(err))


def _raised_error() -> ClientException | None:
    """In a bare `except:`, the driver's exception for a KafkaError that confluent-kafka raised as
    it is: no exception class, so neither `except KafkaException` nor `except Exception` (nor
    BaseException) catches it. Seen on confluent-kafka 2.16.1 when a zombie fenced a transactional
    producer (fence package, 2026-11-26, run 20261126T224836-a85d91): flush ended with
    `confluent_kafka.cimpl.KafkaError: KafkaError{FATAL,code=_FENCED,...}` and the producer's
    thread died past every handler, its transaction unrecorded. Its error_cb sets a fatal error as
    KafkaException(KafkaError) and takes its crash path without fetching it; the Python logger
    this driver gives librdkafka runs before the call returns. None: not that, re-raise."""
    raised = sys.exc_info()[1]
    return ClientException(client_error(raised)) if isinstance(raised, KafkaError) else None  # type: ignore[unreachable]


def _epoch(msg: Message) -> int | None:
    # KIP-320 leader epoch. librdkafka reports it for consumed messages; for delivery
    # reports of produced messages it returns -1, which confluent-kafka maps to None.
    epoch = msg.leader_epoch()
    return epoch if epoch is not None and epoch >= 0 else None


def producer_id_from_stats(stats: str) -> tuple[int, int] | None:
    """(producer id, epoch) from librdkafka's statistics JSON (`eos` block, STATISTICS.md); None
    when it has none yet (-1), idempotence is off (no block) or the JSON is malformed."""
    try:
        eos = json.loads(stats).get("eos") or {}
        seen = (int(eos["producer_id"]), int(eos["producer_epoch"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return None if seen[0] < 0 else seen


class StatsWatch:
    """librdkafka's stats_cb, passing each (producer id, epoch) it reports on to `on_producer_id`.
    Served by the producer's own poll(), on the thread that sends: one JSON parse a second per
    producer (a few tens of KB for 8 partitions on 3 brokers, well under a millisecond)."""

    def __init__(self, on_producer_id: OnProducerId) -> None:
        self.on_producer_id = on_producer_id

    def __call__(self, stats: str) -> None:
        seen = producer_id_from_stats(stats)
        if seen is not None:
            self.on_producer_id(*seen)


class LibrdkafkaProducer:
    def __init__(self, settings: dict[str, Any], on_ok: OnOk, on_error: OnError,
                 on_producer_id: OnProducerId | None) -> None:
        config = {"logger": logging.getLogger("librdkafka.producer"), **settings}
        if on_producer_id is not None:  # librdkafka tells its producer id only in its statistics
            config.update({"statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": StatsWatch(on_producer_id)})
        try:
            self.raw: Producer | None = Producer(config)
        except KafkaException as exc:  # settings librdkafka refuses
            raise _failed(exc) from None
        self._on_ok, self._on_error = on_ok, on_error
        self._produce = self.raw.produce  # looked up once: send runs once per record
        self._report = self._delivered  # bound once, not per send
        # poll(0) follows every send: the instance gets confluent-kafka's own method, with no Python
        # frame in between (the method below is its shape for the protocol). Measured without a broker
        # on the loaded 2-core machine, a recorded send cost 0.2-1 us more through the driver before this.
        self.poll = self.raw.poll  # type: ignore[method-assign]

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        # The partition is the history's key, the decimal value its value: no map on the hot path.
        # A produced message's leader_epoch() is None (see _epoch); the recorder writes null for it.
        if err is None:
            self._on_ok(msg.partition(), int(msg.value()), msg.offset(), msg.leader_epoch())
        else:
            self._on_error(msg.partition(), int(msg.value()), client_error(err))

    def send(self, topic: str, partition: int, value: int) -> None:
        try:
            self._produce(topic, b"%d" % value, partition=partition, on_delivery=self._report)
        except BufferError as exc:  # librdkafka's local queue is full
            raise QueueFull(str(exc)) from None
        except KafkaException as exc:  # refused before it was queued
            raise _failed(exc) from None

    def poll(self, timeout_s: float) -> None:  # replaced per instance by the client's own (above)
        assert self.raw is not None
        self.raw.poll(timeout_s)

    def flush(self, timeout_s: float) -> int:
        assert self.raw is not None
        try:
            return self.raw.flush(timeout_s)
        except KafkaException as exc:  # a fatal error (a fenced txn producer): the driver's exception, as every call
            raise _failed(exc) from None
        except SystemError as exc:
            # confluent-kafka 2.16's flush once returned NULL with no exception set (2026-11-26, a txn
            # producer whose transactional.id a zombie had just fenced: run 20261126T014913-850ae6);
            # the thread died with the transaction unrecorded. What the flush left is unknown: a fatal
            # error, so the transaction is recorded info and a new producer takes over.
            raise ClientException(ClientError("_PYTHON_SYSTEM_ERROR", f"confluent-kafka flush: {exc}", fatal=True)) from None
        except:  # noqa: E722 - a KafkaError raised as it is (_raised_error)
            if (converted := _raised_error()) is None:
                raise
        raise converted

    def purge(self) -> None:
        # Every purged message gets a delivery report (_PURGE_QUEUE / _PURGE_INFLIGHT) at the next flush.
        assert self.raw is not None
        self.raw.purge(in_queue=True, in_flight=True, blocking=False)

    def init_transactions(self, timeout_s: float) -> None:
        self._call("init_transactions", timeout_s)

    def begin_transaction(self) -> None:
        self._call("begin_transaction")

    def send_offsets_to_transaction(self, topic: str, offsets: dict[int, int], consumer: Any, timeout_s: float) -> None:
        assert consumer.raw is not None
        tps = [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())]
        self._call("send_offsets_to_transaction", tps, consumer.raw.consumer_group_metadata(), timeout_s)

    def commit_transaction(self, timeout_s: float) -> None:
        self._call("commit_transaction", timeout_s)

    def abort_transaction(self, timeout_s: float) -> None:
        self._call("abort_transaction", timeout_s)

    def _call(self, method: str, *args: Any) -> None:
        assert self.raw is not None
        try:
            getattr(self.raw, method)(*args)
            return
        except KafkaException as exc:
            raise _failed(exc) from None
        except:  # noqa: E722 - a KafkaError raised as it is (_raised_error)
            if (converted := _raised_error()) is None:
                raise
        raise converted

    def close(self) -> None:
        # confluent-kafka's Producer has no close: librdkafka's handle goes with the object, at once
        # once nothing refers to it (as before the driver layer), so the bound methods go too.
        self.raw = self._produce = self.poll = None  # type: ignore[assignment]


class LibrdkafkaConsumer:
    def __init__(self, settings: dict[str, Any], report_eof: bool) -> None:
        # EOF events tell the drain a partition is read to its end
        config = {"logger": logging.getLogger("librdkafka.consumer"), **settings}
        if report_eof:
            config["enable.partition.eof"] = True
        try:
            self.raw: Consumer | None = Consumer(config)
        except KafkaException as exc:
            raise _failed(exc) from None
        self._on_assign: OnAssign | None = None
        # KIP-848's protocol (group.protocol=consumer) and cooperative-sticky assign incrementally:
        # on_assign then names only the partitions added and on_revoke those taken away, so the
        # assignment reported is the one held, kept here. Eager protocols revoke everything and
        # assign the whole new set, which the same bookkeeping reports unchanged.
        self._incremental = (str(settings.get("group.protocol", "")).lower() == "consumer"
                             or "cooperative" in str(settings.get("partition.assignment.strategy", "")))
        self._held: set[int] = set()

    def assign(self, topic: str, partitions: list[int], start: str) -> None:
        assert self.raw is not None
        offset = OFFSET_BEGINNING if start == BEGINNING else OFFSET_STORED
        try:
            self.raw.assign([TopicPartition(topic, p, offset) for p in partitions])
        except KafkaException as exc:
            raise _failed(exc) from None

    def unassign(self) -> None:
        assert self.raw is not None
        try:
            self.raw.unassign()
        except KafkaException as exc:
            raise _failed(exc) from None

    def subscribe(self, topic: str, on_assign: OnAssign) -> None:
        assert self.raw is not None
        self._on_assign = on_assign
        try:
            self.raw.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)
        except KafkaException as exc:
            raise _failed(exc) from None

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Called inside consume(), before it returns records of the new assignment.
        assert self._on_assign is not None
        self._held |= {tp.partition for tp in partitions}
        self._on_assign(sorted(self._held))

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Partitions taken away (or lost). Reported only when assignment is incremental, as the
        assignment still held: an eager rebalance's revoke-all is followed at once by its assign,
        and reporting the empty set between them would read as the consumer dropping every key."""
        assert self._on_assign is not None
        self._held -= {tp.partition for tp in partitions}
        if self._incremental and partitions:
            self._on_assign(sorted(self._held))

    def consume(self, max_records: int, timeout_s: float) -> Batch:
        assert self.raw is not None
        try:
            messages = self.raw.consume(num_messages=max_records, timeout=timeout_s)
        except (KafkaException, RuntimeError) as exc:  # RuntimeError: the consumer is closed
            raise _failed(exc) from None
        records: list[Record] = []
        eof: dict[int, int] = {}
        errors: list[ClientError] = []
        for msg in messages:
            err = msg.error()
            if err is None:
                records.append(Record(msg.partition(), msg.offset(), int(msg.value()), _epoch(msg)))
            elif err.code() == KafkaError._PARTITION_EOF:
                eof[msg.partition()] = msg.offset()
            else:
                errors.append(client_error(err))
        return Batch(records, eof, errors)

    def committed(self, topic: str, partitions: list[int], timeout_s: float) -> dict[int, int]:
        assert self.raw is not None
        try:
            tps = self.raw.committed([TopicPartition(topic, p) for p in partitions], timeout=timeout_s)
        except KafkaException as exc:
            raise _failed(exc) from None
        return {tp.partition: tp.offset for tp in tps}

    def high_watermark(self, topic: str, partition: int, timeout_s: float) -> int:
        assert self.raw is not None
        try:
            return self.raw.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)[1]
        except KafkaException as exc:
            raise _failed(exc) from None

    def close(self) -> None:
        raw, self.raw = self.raw, None
        if raw is not None:
            try:
                raw.close()
            except (KafkaException, RuntimeError) as exc:
                raise _failed(exc) from None


class LibrdkafkaDriver:
    name = "librdkafka"

    def producer(self, settings: dict[str, Any], on_ok: OnOk, on_error: OnError,
                 on_producer_id: OnProducerId | None = None) -> LibrdkafkaProducer:
        return LibrdkafkaProducer(settings, on_ok, on_error, on_producer_id)

    def consumer(self, settings: dict[str, Any], report_eof: bool = True) -> LibrdkafkaConsumer:
        return LibrdkafkaConsumer(settings, report_eof)

    def versions(self) -> dict[str, str]:
        return {"confluent-kafka": version("confluent-kafka"), "librdkafka": libversion()[0]}

    def close(self) -> None:
        pass  # nothing beyond its clients, which close themselves
