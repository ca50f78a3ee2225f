"""The client driver protocol: what the recorded clients (workloads/clients.py, txn.py,
eos_pipeline.py, drain.py) need of a Kafka client library, and nothing about the history.

A driver offers client operations, one call each: send a record and learn its delivery outcome,
poll records with their offsets and leader epochs, commit, begin/commit/abort a transaction, send
a consumer's offsets to a transaction, report the producer id and epoch, close. Recording them
(invoke before, ok/fail/info after: workloads/outcomes.py, harness/history/recorder.py) is the
workloads' job, above the driver, so every driver writes the same history.

Why this level and not lower: a driver may live in another process (issue 35's Java client, a
JVM child speaking JSON lines over stdin/stdout), where each call is one request line and each
delivery outcome one reply line. At the queue workload's 1,000 sends/s that is ~2,000 short lines
a second, which a pipe carries with room to spare; a lower-level protocol (one call per librdkafka
callback or per message object) would not cross a process boundary as cheaply.

Values are ints, written on the wire as their decimal ASCII (b"%d"), keys are partition numbers:
so records that one driver wrote, another reads. `ClientError.name` is the client's own name for
an error (librdkafka's error name, e.g. `_MSG_TIMED_OUT`); the workloads' tables of which errors
prove a failure (outcomes.py, drain.py) list those names, per client.

Callbacks (`on_ok`, `on_error`, `on_producer_id`, `on_assign`) run inside the driver's calls
(librdkafka serves them in poll, flush and consume) or, for a driver that hears outcomes on a
thread of its own, on that thread: what they call must be thread-safe (the recorder is).
`on_assign` must run before `consume` returns records of the new assignment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Protocol

# on_ok(partition, value, offset, leader epoch or None); on_error(partition, value, error)
OnOk = Callable[[int, int, int, "int | None"], None]
OnError = Callable[[int, int, "ClientError"], None]
OnProducerId = Callable[[int, int], None]  # (producer id, producer epoch), whenever the client knows it
OnAssign = Callable[[list[int]], None]  # the partitions a group rebalance assigned, sorted

BEGINNING, COMMITTED = "beginning", "committed"  # where an assign starts reading


@dataclass(frozen=True)
class ClientError:
    """One error of the client library, with the properties the workloads' rules read."""

    name: str  # the client's own name: librdkafka's error name (`_MSG_TIMED_OUT`, `NOT_ENOUGH_REPLICAS`)
    message: str
    fatal: bool = False  # the client object is unusable from now on
    retriable: bool = False  # the same call may succeed if tried again
    txn_requires_abort: bool = False  # the transaction must be aborted

    def __str__(self) -> str:  # the history's `error`: the name first (docs/history.md)
        return f"{self.name}: {self.message}"


class ClientException(Exception):
    """A driver call that failed; `error` says how."""

    def __init__(self, error: ClientError) -> None:
        super().__init__(error)
        self.error = error

    def __str__(self) -> str:
        return str(self.error)


class QueueFull(Exception):
    """`send` found the client's local queue full: the record was not queued; try again later."""


class Record(NamedTuple):
    partition: int
    offset: int
    value: int
    epoch: int | None  # KIP-320 leader epoch, None where the client does not report it


class Batch(NamedTuple):
    """What one `consume` returned."""

    records: list[Record]  # in the order the client returned them
    eof: dict[int, int]  # partition -> position, for each partition found read to its end in this call
    errors: list[ClientError]  # errors reported beside the records (a partition's fetch failing)


class ProducerDriver(Protocol):
    def send(self, topic: str, partition: int, value: int) -> None:
        """Queue one record; its outcome reaches on_ok or on_error later. Raises QueueFull, or
        ClientException when the record was refused before it was queued (definitely not sent)."""

    def poll(self, timeout_s: float) -> None:
        """Serve outcomes that arrived (callbacks), waiting up to `timeout_s` for one."""

    def flush(self, timeout_s: float) -> int:
        """Wait up to `timeout_s` for every outcome; return how many are still unresolved."""

    def purge(self) -> None:
        """Give up on every unresolved record: each gets an outcome (an error) by the next flush."""

    def init_transactions(self, timeout_s: float) -> None:
        """Register the transactional id (fencing an earlier producer with it); raises ClientException."""

    def begin_transaction(self) -> None: ...

    def send_offsets_to_transaction(self, topic: str, offsets: dict[int, int], consumer: "ConsumerDriver",
                                    timeout_s: float) -> None:
        """Commit `consumer`'s group offsets (partition -> next offset to read) inside the open transaction."""

    def commit_transaction(self, timeout_s: float) -> None: ...

    def abort_transaction(self, timeout_s: float) -> None: ...

    def close(self) -> None:
        """Release the client (after flush/purge: unresolved records are not waited for)."""


class ConsumerDriver(Protocol):
    def assign(self, topic: str, partitions: list[int], start: str) -> None:
        """Read `partitions` from BEGINNING or from the COMMITTED offsets (the reset policy where none)."""

    def unassign(self) -> None: ...

    def subscribe(self, topic: str, on_assign: OnAssign) -> None:
        """Join the consumer group; its rebalances are reported to on_assign inside consume."""

    def consume(self, max_records: int, timeout_s: float) -> Batch:
        """Up to `max_records` records, waiting up to `timeout_s`; raises ClientException."""

    def committed(self, topic: str, partitions: list[int], timeout_s: float) -> dict[int, int]:
        """The group's committed offsets (negative where it committed none)."""

    def high_watermark(self, topic: str, partition: int, timeout_s: float) -> int: ...

    def close(self) -> None: ...


class Driver(Protocol):
    """A client library. `settings` are Kafka's own client keys (bootstrap.servers, acks,
    enable.idempotence, transactional.id, group.id, isolation.level, ...) from the profile and the
    workload; a driver adds what its library needs besides (librdkafka: a logger) and passes on
    settings only it knows (a test's `queue.buffering.max.messages`)."""

    name: str

    def producer(self, settings: dict[str, Any], on_ok: OnOk, on_error: OnError,
                 on_producer_id: OnProducerId | None = None) -> ProducerDriver:
        """A producer; raises ClientException on settings the client refuses."""

    def consumer(self, settings: dict[str, Any], report_eof: bool = True) -> ConsumerDriver:
        """A consumer; `report_eof`: fill Batch.eof (the drain needs it to know an empty or
        all-aborted partition is read to its end)."""

    def versions(self) -> dict[str, str]:
        """The client's name -> version, for the run's record (cluster.json names them)."""

    def close(self) -> None:
        """Release what the driver holds beyond its clients, after they closed: the Java driver's
        JVM ends (a client still open loses its unresolved outcomes: unknown). A no-op for
        librdkafka, whose clients are all there is."""
