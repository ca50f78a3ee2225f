"""A second client driver, in memory: a toy Kafka (partitions as lists, transactions, a group's
committed offsets) behind the driver protocol of workloads/drivers/base.py.

It exists to show that the workloads stand on the protocol alone: the queue, txn and eos
workloads run on it unchanged and write a valid history (tests/test_drivers.py), as issue 35's
Java client will have to. It is not a model of Kafka's failures: nothing is ever lost here.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from workloads.drivers.base import BEGINNING, Batch, ClientError, ClientException, Record

OPEN, COMMITTED, ABORTED = "open", "committed", "aborted"


@dataclass
class Entry:
    value: int
    state: str  # OPEN while its transaction is, then COMMITTED or ABORTED
    owner: Any = None  # the transactional producer whose open transaction holds it


@dataclass
class Cluster:
    partitions: int
    logs: dict[str, list[list[Entry]]] = field(default_factory=dict)
    offsets: dict[tuple[str, str, int], int] = field(default_factory=dict)  # (group, topic, partition) -> next offset
    txn_owner: dict[str, Any] = field(default_factory=dict)  # transactional.id -> its live producer
    lock: threading.RLock = field(default_factory=threading.RLock)
    producer_ids: Any = field(default_factory=lambda: itertools.count(1000))

    def log(self, topic: str) -> list[list[Entry]]:
        return self.logs.setdefault(topic, [[] for _ in range(self.partitions)])

    def readable_end(self, topic: str, p: int, committed_only: bool) -> int:
        """read_committed stops at the first record of a transaction still open (the LSO)."""
        entries = self.log(topic)[p]
        if committed_only:
            for o, e in enumerate(entries):
                if e.state == OPEN:
                    return o
        return len(entries)


def _error(name: str, message: str, **flags: bool) -> ClientException:
    return ClientException(ClientError(name, message, **flags))


class MemoryProducer:
    def __init__(self, cluster: Cluster, settings: dict[str, Any], on_ok: Any, on_error: Any, on_producer_id: Any) -> None:
        if settings.get("acks") not in ("0", "1", "all", -1, 0, 1):
            raise _error("_INVALID_ARG", f"acks={settings.get('acks')!r}")
        self.cluster, self.on_ok, self.on_error = cluster, on_ok, on_error
        self.transactional_id = settings.get("transactional.id")
        self.pending: list[tuple[int, int, int]] = []  # outcomes not served yet
        self.txn: list[Entry] | None = None
        self.txn_offsets: dict[tuple[str, str, int], int] = {}
        self.fenced = False
        if on_producer_id is not None:
            on_producer_id(next(cluster.producer_ids), 0)

    def send(self, topic: str, partition: int, value: int) -> None:
        c = self.cluster
        if not 0 <= partition < c.partitions:
            raise _error("_UNKNOWN_PARTITION", f"partition {partition} of {topic} does not exist")
        with c.lock:
            entries = c.log(topic)[partition]
            entry = Entry(value, COMMITTED if self.txn is None else OPEN, self)
            entries.append(entry)
            if self.txn is not None:
                self.txn.append(entry)
            self.pending.append((partition, value, len(entries) - 1))

    def poll(self, timeout_s: float) -> None:
        pending, self.pending = self.pending, []
        for p, v, o in pending:
            self.on_ok(p, v, o, None)  # a produced record's epoch is unknown, as with librdkafka

    def flush(self, timeout_s: float) -> int:
        self.poll(0)
        return 0

    def purge(self) -> None:
        pass  # every send is appended at once: nothing is ever unresolved

    def init_transactions(self, timeout_s: float) -> None:
        with self.cluster.lock:
            old = self.cluster.txn_owner.get(self.transactional_id)
            if old is not None:  # fence it, ending its open transaction
                old.fenced = True
                old._end(ABORTED)
            self.cluster.txn_owner[self.transactional_id] = self

    def begin_transaction(self) -> None:
        if self.fenced:
            raise _error("_FENCED", "producer fenced by a newer instance", fatal=True)
        self.txn, self.txn_offsets = [], {}

    def send_offsets_to_transaction(self, topic: str, offsets: dict[int, int], consumer: Any, timeout_s: float) -> None:
        self.txn_offsets.update({(consumer.group, topic, p): o for p, o in offsets.items()})

    def commit_transaction(self, timeout_s: float) -> None:
        if self.fenced:
            raise _error("_FENCED", "producer fenced by a newer instance", fatal=True)
        self.flush(timeout_s)
        with self.cluster.lock:
            self.cluster.offsets.update(self.txn_offsets)
            self._end(COMMITTED)

    def abort_transaction(self, timeout_s: float) -> None:
        self.flush(timeout_s)
        with self.cluster.lock:
            self._end(ABORTED)

    def _end(self, state: str) -> None:
        for entry in self.txn or []:
            entry.state = state
        self.txn, self.txn_offsets = None, {}

    def close(self) -> None:
        pass


class MemoryConsumer:
    def __init__(self, cluster: Cluster, settings: dict[str, Any], report_eof: bool) -> None:
        self.cluster, self.report_eof = cluster, report_eof
        self.group = settings.get("group.id", "")
        self.committed_only = settings.get("isolation.level") == "read_committed"
        self.topic: str | None = None
        self.position: dict[int, int] = {}
        self.on_assign: Any = None

    def assign(self, topic: str, partitions: list[int], start: str) -> None:
        with self.cluster.lock:
            self.topic = topic
            self.position = {p: 0 if start == BEGINNING else max(0, self.cluster.offsets.get((self.group, topic, p), 0))
                             for p in partitions}

    def unassign(self) -> None:
        self.position = {}

    def subscribe(self, topic: str, on_assign: Any) -> None:
        self.topic, self.on_assign = topic, on_assign  # a group of one: it gets every partition at its first consume

    def consume(self, max_records: int, timeout_s: float) -> Batch:
        if self.on_assign is not None and self.topic is not None:
            on_assign, self.on_assign = self.on_assign, None
            self.assign(self.topic, list(range(self.cluster.partitions)), "committed")
            on_assign(sorted(self.position))
        records: list[Record] = []
        eof: dict[int, int] = {}
        with self.cluster.lock:
            for p in sorted(self.position):
                entries = self.cluster.log(self.topic or "")[p]
                end = self.cluster.readable_end(self.topic or "", p, self.committed_only)
                o = self.position[p]
                while o < end and len(records) < max_records:
                    if not (self.committed_only and entries[o].state == ABORTED):
                        records.append(Record(p, o, entries[o].value, 0))
                    o += 1
                self.position[p] = o
                if o == end and self.report_eof:
                    eof[p] = o
        if not records:
            time.sleep(min(timeout_s, 0.01))
        return Batch(records, eof, [])

    def committed(self, topic: str, partitions: list[int], timeout_s: float) -> dict[int, int]:
        with self.cluster.lock:
            return {p: self.cluster.offsets.get((self.group, topic, p), -1001) for p in partitions}

    def high_watermark(self, topic: str, partition: int, timeout_s: float) -> int:
        with self.cluster.lock:
            return len(self.cluster.log(topic)[partition])

    def close(self) -> None:
        self.position = {}


class MemoryDriver:
    name = "memory"

    def __init__(self, partitions: int = 8) -> None:
        self.cluster = Cluster(partitions)

    def producer(self, settings: dict[str, Any], on_ok: Any, on_error: Any, on_producer_id: Any = None) -> MemoryProducer:
        return MemoryProducer(self.cluster, settings, on_ok, on_error, on_producer_id)

    def consumer(self, settings: dict[str, Any], report_eof: bool = True) -> MemoryConsumer:
        return MemoryConsumer(self.cluster, settings, report_eof)

    def versions(self) -> dict[str, str]:
        return {"memory": "0"}

    def close(self) -> None:
        pass
