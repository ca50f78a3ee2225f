"""The Java driver: the Apache Kafka Java client (kafka-clients) behind the driver protocol
(workloads/drivers/base.py), in a JVM child process (clients/java/, built and cached by
harness/provision/java_client.py; the process and its pipes: workloads/drivers/java_worker.py).

One JVM per driver object hosts every producer and consumer the workloads open, by handle.

How the protocol maps onto the Java client, where it does not map one to one:
- `send` only writes a request line and returns (the line may wait up to 2 ms for others, to
  write them together: java_worker.py's FLUSH_S): the record's outcome comes back on the driver's
  reader thread, which calls on_ok/on_error there (base.py allows it; the recorder is thread-safe).
  Nothing is refused synchronously (KafkaProducer.send may append a record and then throw), so
  `send` raises only QueueFull (more than `queue.buffering.max.messages` sends unresolved, 100,000
  by default, as librdkafka's) or ClientException when the JVM is gone (the line never left).
- `poll` serves nothing (the reader thread does); `flush` waits until every send has its outcome,
  without calling Java's flush, which has no timeout.
- `purge` is a forced close (Java's producer has no purge): every unresolved send gets an outcome
  at once (KafkaException "Producer is closed forcefully": unknown), and the producer is closed.
- The transactional calls block in the JVM for up to max.block.ms (Java's calls take no timeout);
  a transactional producer gets max.block.ms = 30 s unless set: the TXN_TIMEOUT_S the workloads
  pass (workloads/txn_client.py).
- `feed` (the Java driver only; workloads/loops.py Feed uses it when it can): the queue workload's
  produce loop runs in the JVM, which records each send's invoke before sending and its
  acknowledgement as packed rows for Recorder.append_rows; a failure comes back as a line and goes
  to on_error as above. The history is the same; Python no longer touches each send.
- A produced record's leader epoch is unknown (RecordMetadata has none), as with librdkafka; a
  consumed record's is ConsumerRecord.leaderEpoch(). The producer id and epoch are read from the
  producer's TransactionManager (clients/java/.../TxnState.java says how and why).
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

from harness.provision.java_client import client_version, ensure_java_client
from workloads.drivers.base import (BEGINNING, Batch, ClientError, ClientException, OnAssign, OnError, OnOk,
                                    OnProducerId, QueueFull, Record)
from workloads.drivers.java_worker import JVM_EXITED, Worker

MAX_PENDING = 100_000  # librdkafka's queue.buffering.max.messages default
TXN_MAX_BLOCK_MS = 30_000
OPEN_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 5.0


def _topic(topic: str) -> bytes:
    """A topic name as a send line carries it: Kafka's legal names ([a-zA-Z0-9._-]) contain no space."""
    if not topic or any(c.isspace() for c in topic):
        raise ClientException(ClientError("InvalidTopicException", f"invalid topic name {topic!r}"))
    return topic.encode()


def _settings(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if v is not None}


class JavaProducer:
    def __init__(self, worker: Worker, settings: dict[str, Any], on_ok: OnOk, on_error: OnError,
                 on_producer_id: OnProducerId | None) -> None:
        config = _settings(settings)
        # librdkafka's bound on unresolved sends; the Java client has none by count, so it is kept here
        self._max_pending = int(config.pop("queue.buffering.max.messages", MAX_PENDING))
        if "transactional.id" in config:
            config.setdefault("max.block.ms", TXN_MAX_BLOCK_MS)
        self._worker, self._on_ok, self._on_error, self._on_producer_id = worker, on_ok, on_error, on_producer_id
        self._lock = threading.Lock()
        self._resolved = threading.Condition(self._lock)
        self._served = threading.Event()  # set by an outcome while a poll waits for one
        self._polling = False
        self._pending: dict[int, tuple[int, int]] = {}  # send's sequence -> (partition, value), until its outcome arrives
        self._unserved = 0  # sends whose outcome has not been handed to on_ok/on_error yet
        self._dead: ClientError | None = None
        self._seq = itertools.count(1)
        self._topics: dict[str, bytes] = {}
        self._on_rows: Any = None  # set once the JVM's feed runs on this producer
        self.h = worker.call("producer", OPEN_TIMEOUT_S, config=config, pid=on_producer_id is not None)["h"]
        with worker._lock:
            worker.producers[self.h] = self

    # --- sends and their outcomes -----------------------------------------------------
    def send(self, topic: str, partition: int, value: int) -> None:
        t = self._topics.get(topic) or self._topics.setdefault(topic, _topic(topic))  # refused here: never sent
        s = next(self._seq)
        with self._lock:
            if self._dead is not None:
                raise ClientException(self._dead)
            if len(self._pending) >= self._max_pending:
                raise QueueFull(f"{len(self._pending)} sends unresolved (queue.buffering.max.messages)")
            self._pending[s] = (partition, value)
            self._unserved += 1
        try:  # the one request that is not JSON (Worker.java): ">H S P V TOPIC"
            self._worker.write(b">%d %d %d %d %s\n" % (self.h, s, partition, value, t), soon=True)
        except ClientException:
            with self._lock:  # unless the reader thread already gave it an outcome (the JVM's death)
                mine = self._pending.pop(s, None) is not None
                if mine:
                    self._settle()
            if mine:
                raise

    def ok(self, s: int, offset: int) -> None:
        """On the reader thread: send `s` was written at `offset`."""
        with self._lock:
            sent = self._pending.pop(s, None)
        if sent is not None:
            try:
                self._on_ok(sent[0], sent[1], offset, None)
            finally:
                with self._lock:
                    self._settle()

    def failed(self, s: int, error: ClientError) -> None:
        """On the reader thread: send `s` failed with `error`."""
        with self._lock:
            sent = self._pending.pop(s, None)
        if sent is None:  # a second outcome: KafkaProducer calls back twice when send() threw after the append
            return
        try:
            self._on_error(sent[0], sent[1], error)
        finally:
            with self._lock:
                self._settle()

    # --- the feed: the produce loop in the JVM (ProducerHandle.java) ----------------------------
    def feed(self, on_rows: Any, process: int, topic: str, w: int, producers: int, partitions: int,
             rate: float, seed: int, start_n: int) -> None:
        """Start the JVM's produce loop: producer `w` of `producers` sends its n-th value (from
        `start_n`) n * producers + w to a partition of its own seeded stream, `rate` a second (0: as
        fast as the client takes them). Its rows (invokes, acknowledgements) go to `on_rows` on the
        reader thread; a failed send to on_error, as a send's failure does."""
        self._on_rows = on_rows
        self._call("feed", OPEN_TIMEOUT_S, process=process, t=_topic(topic).decode(), w=w, W=producers,
                   P=partitions, rate=rate, seed=seed, n=start_n)

    def feed_stop(self) -> int:
        """Stop the loop; the n its next value would have had."""
        return int(self._call("feed_stop", OPEN_TIMEOUT_S)["n"])

    def rows(self, rows: bytes) -> None:
        self._on_rows(rows)

    def feed_failed(self, key: int, value: int, error: ClientError) -> None:
        self._on_error(key, value, error)

    def producer_id(self, pid: int, epoch: int) -> None:
        if self._on_producer_id is not None:
            self._on_producer_id(pid, epoch)

    def lost(self, error: ClientError) -> None:
        """On the reader thread, once the JVM died: every unresolved send gets `error` (unknown)."""
        with self._lock:
            self._dead = error
            lost, self._pending = self._pending, {}
        for partition, value in lost.values():
            try:
                self._on_error(partition, value, error)
            finally:
                with self._lock:
                    self._settle()

    def _settle(self) -> None:  # with self._lock held
        self._unserved -= 1
        if self._polling:
            self._served.set()
        if self._unserved == 0:
            self._resolved.notify_all()

    def poll(self, timeout_s: float) -> None:
        if timeout_s > 0:  # outcomes are served by the reader thread: only wait for one
            self._served.clear()
            self._polling = True
            self._served.wait(timeout_s)
            self._polling = False

    def flush(self, timeout_s: float) -> int:
        with self._lock:
            self._resolved.wait_for(lambda: self._unserved == 0, timeout_s)
            left = self._unserved
        if self._on_rows is not None and self._dead is None:  # the feed's sends are counted in the JVM
            left += int(self._call("feed_flush", timeout_s + 5, ms=int(timeout_s * 1000))["pending"])
        return left

    def purge(self) -> None:
        self._call("purge", CLOSE_TIMEOUT_S)

    # --- transactions -------------------------------------------------------------------
    def init_transactions(self, timeout_s: float) -> None:
        self._call("init_transactions", timeout_s)

    def begin_transaction(self) -> None:
        self._call("begin_transaction", 0)

    def send_offsets_to_transaction(self, topic: str, offsets: dict[int, int], consumer: Any, timeout_s: float) -> None:
        self._call("send_offsets", timeout_s, c=consumer.h, t=topic, offsets={str(p): o for p, o in offsets.items()})

    def commit_transaction(self, timeout_s: float) -> None:
        self._call("commit_transaction", timeout_s)

    def abort_transaction(self, timeout_s: float) -> None:
        self._call("abort_transaction", timeout_s)

    def _call(self, op: str, timeout_s: float, **fields: Any) -> dict[str, Any]:
        if self._dead is not None:
            raise ClientException(self._dead)
        return self._worker.call(op, timeout_s, h=self.h, **fields)

    def close(self) -> None:
        if self._worker.dead is None:
            try:
                self._worker.call("close", CLOSE_TIMEOUT_S, h=self.h)
            except ClientException as exc:
                if exc.error.name != JVM_EXITED:
                    raise
        with self._worker._lock:
            self._worker.producers.pop(self.h, None)


class JavaConsumer:
    def __init__(self, worker: Worker, settings: dict[str, Any], report_eof: bool) -> None:
        self._worker = worker
        self._on_assign: OnAssign | None = None
        self.h: int | None = worker.call("consumer", OPEN_TIMEOUT_S, config=_settings(settings), eof=report_eof)["h"]

    def _call(self, op: str, timeout_s: float, **fields: Any) -> dict[str, Any]:
        if self.h is None:
            raise ClientException(ClientError("IllegalStateException", "This consumer has already been closed."))
        return self._worker.call(op, timeout_s, h=self.h, **fields)

    def assign(self, topic: str, partitions: list[int], start: str) -> None:
        self._call("assign", OPEN_TIMEOUT_S, t=topic, parts=list(partitions),
                   start="beginning" if start == BEGINNING else "committed")

    def unassign(self) -> None:
        self._call("unassign", OPEN_TIMEOUT_S)

    def subscribe(self, topic: str, on_assign: OnAssign) -> None:
        self._on_assign = on_assign
        self._call("subscribe", OPEN_TIMEOUT_S, t=topic)

    def consume(self, max_records: int, timeout_s: float) -> Batch:
        reply = self._call("consume", timeout_s, max=max_records, timeout_ms=max(0, int(timeout_s * 1000)))
        assigned = reply.get("assigned")
        if assigned is not None and self._on_assign is not None:  # before the records of the new assignment
            self._on_assign(sorted(assigned))
        records = [Record(p, o, v, e if e >= 0 else None) for p, o, v, e in reply["recs"]]
        return Batch(records, {int(p): o for p, o in reply.get("eof", {}).items()}, [])

    def committed(self, topic: str, partitions: list[int], timeout_s: float) -> dict[int, int]:
        reply = self._call("committed", timeout_s, t=topic, parts=list(partitions), timeout_ms=int(timeout_s * 1000))
        return {int(p): o for p, o in reply["offsets"].items()}

    def high_watermark(self, topic: str, partition: int, timeout_s: float) -> int:
        return self._call("high_watermark", timeout_s, t=topic, p=partition, timeout_ms=int(timeout_s * 1000))["o"]

    def close(self) -> None:
        h, self.h = self.h, None
        if h is not None and self._worker.dead is None:
            try:
                self._worker.call("close", CLOSE_TIMEOUT_S, h=h, timeout_ms=int(CLOSE_TIMEOUT_S * 1000))
            except ClientException as exc:
                if exc.error.name != JVM_EXITED:
                    raise


class JavaDriver:
    """The Java client. `version`: kafka-clients' (default: harness/provision/java_client.py's
    DEFAULT_VERSION); built with Maven on first use, then cached. The JVM starts at the first client,
    and a JVM that died is replaced at the next one; `close()` ends it, for good."""

    name = "java"

    def __init__(self, version: str | None = None, log_path: Path | None = None) -> None:
        self.client = ensure_java_client(client_version(version))
        self.log_path = log_path
        self._worker: Worker | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._versions: dict[str, str] | None = None

    def worker(self) -> Worker:
        """The live JVM, started (again) if need be."""
        with self._lock:
            if self._closed:
                raise ClientException(ClientError("DriverClosed", "the Java driver was closed", fatal=True))
            if self._worker is None or self._worker.dead is not None:
                self._worker = Worker(self.client, self.log_path)
                hello = self._worker.call("hello", OPEN_TIMEOUT_S)
                self._versions = {"kafka-clients": hello["kafka_clients"], "java": hello["java"]}
            return self._worker

    def producer(self, settings: dict[str, Any], on_ok: OnOk, on_error: OnError,
                 on_producer_id: OnProducerId | None = None) -> JavaProducer:
        return JavaProducer(self.worker(), settings, on_ok, on_error, on_producer_id)

    def consumer(self, settings: dict[str, Any], report_eof: bool = True) -> JavaConsumer:
        return JavaConsumer(self.worker(), settings, report_eof)

    def versions(self) -> dict[str, str]:
        if self._versions is None:
            self.worker()
        assert self._versions is not None
        return dict(self._versions)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()
