"""The final drain: read every partition from the beginning up to its high watermark, so that a
record nobody read is really missing (kafkatest's produce → fault → drain → validate).

Shared by the workloads and the scenarios (one high-watermark probe, one drain loop).

A partition the drain cannot read (no leader: an old broker left it offline, issue 21) is not an
error of the run: it is reported as not drained, with the reason (`DrainResult.undrained`), so its
acknowledged-but-unread records are `unknown` rather than lost, and every other partition is still
drained and checked.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from workloads import drivers
from workloads.clients import ConsumerClient
from workloads.drivers.base import ClientError, ClientException, Driver


@dataclass
class DrainResult:
    complete: bool
    high_watermarks: dict[int, int]
    timed_out_partitions: list[int]
    processes: list[int] = field(default_factory=list)
    seconds: float = 0.0
    first_index: int = 0  # history index of the drain's first event
    undrained: dict[int, str] = field(default_factory=dict)  # partition -> why it was not read to its end

    def as_json(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "high_watermarks": {str(p): o for p, o in sorted(self.high_watermarks.items())},
            "timed_out_partitions": sorted(self.timed_out_partitions),
            "undrained": {str(p): why for p, why in sorted(self.undrained.items())},
            "processes": self.processes,
            "first_index": self.first_index,
            "seconds": round(self.seconds, 3),
        }


# librdkafka's answers while a partition has no leader, by name (ClientError.name): its metadata
# lists no leader (_UNKNOWN_PARTITION: "Local: Unknown partition", seen on 0.10.2.2 after 120 s of
# kills and partitions, issue 21) or the broker asked says it leads nothing. Retried like the
# retriable errors, since an election may still be under way; still failing at the deadline, the
# partition is offline. Another driver's client adds its own names: the Java client says
# NOT_LEADER_OR_FOLLOWER (Kafka's name since 2.6 for NOT_LEADER_FOR_PARTITION), and without a
# leader its endOffsets retries on its own until its timeout, then raises TimeoutException, which is
# retriable and so retried here like the rest.
LEADERLESS = frozenset({"_UNKNOWN_PARTITION", "LEADER_NOT_AVAILABLE", "NOT_LEADER_FOR_PARTITION", "OFFSET_NOT_AVAILABLE",
                        "NOT_LEADER_OR_FOLLOWER"})


def probe_high_watermarks(bootstrap: str, topic: str, partitions: Iterable[int], group_id: str,
                          timeout_s: float = 60.0, driver: Driver | None = None) -> tuple[dict[int, int], dict[int, str]]:
    """Every partition's high watermark, and for each partition whose watermark could not be had,
    why (the client's error). Right after an election a new leader answers OFFSET_NOT_AVAILABLE
    until its high watermark catches up, and a partition may have no leader for a while, so those
    errors and the retriable ones are retried until `timeout_s` (shared by all partitions; each
    gets at least one try). The partitions are asked in rounds, not one after the other: a 4.4.0 run
    had one partition offline for good, its retries took the whole budget, and the next partition,
    whose leader had just moved (NOT_LEADER_FOR_PARTITION), got one try and was left undrained
    (20261127T031050-b76a73)."""
    driver = driver if driver is not None else drivers.make()
    probe = driver.consumer({"bootstrap.servers": bootstrap, "group.id": group_id}, report_eof=False)
    deadline = time.monotonic() + timeout_s
    high: dict[int, int] = {}
    failed: dict[int, str] = {}
    pending = list(partitions)
    try:
        while pending:
            for p in list(pending):
                try:
                    high[p] = probe.high_watermark(topic, p, 10)
                    pending.remove(p)
                except ClientException as exc:
                    err = exc.error
                    if not (err.retriable or err.name in LEADERLESS) or time.monotonic() > deadline:
                        failed[p] = f"high watermark unavailable: {err.message} ({err.name})"
                        pending.remove(p)
            if pending:
                time.sleep(0.5)
        return high, failed
    finally:
        probe.close()


def high_watermarks(bootstrap: str, topic: str, partitions: Iterable[int], group_id: str,
                    timeout_s: float = 60.0, driver: Driver | None = None) -> dict[int, int]:
    """Every partition's high watermark (see probe_high_watermarks); any partition without one
    raises ClientException (the scenarios, which read a single partition, stop there)."""
    high, failed = probe_high_watermarks(bootstrap, topic, partitions, group_id, timeout_s, driver)
    if failed:
        p, why = min(failed.items())
        raise ClientException(ClientError("_FAIL", f"partition {p}: {why}"))
    return high


# A drain goes on while it reads, up to this many times --drain-timeout in all. The soak of
# 2026-11-26 (7.4M records, two readers) read all but 414 of them in the 60 s it had, then stopped
# with the partitions "not drained": a fixed budget sized for a 60 s run is too short for a 2-hour
# one. Waiting for a reader that still moves, and giving up on one that has stalled for the timeout,
# scales with the topic and stays bounded.
DRAIN_CAP_FACTOR = 10


def drain_one(client: ConsumerClient, partitions: int | Iterable[int], high: dict[int, int], deadline: float,
              stall_s: float | None = None) -> set[int]:
    """Assign the partitions (a count means 0..n-1) from the beginning and poll until each is read
    to `high`, or until `deadline`; with `stall_s`, also stop once `stall_s` seconds pass without the
    client's position moving. Return the partitions not read to `high`."""
    assigned = list(range(partitions)) if isinstance(partitions, int) else sorted(partitions)
    client.assign(assigned, "beginning")

    def position(p: int) -> int:
        return max(client.next_offset.get(p, 0), client.eof.get(p, 0))

    def remaining() -> set[int]:
        return {p for p in assigned if high[p] > 0 and position(p) < high[p]}

    left = remaining()
    moved, last = time.monotonic(), sum(position(p) for p in assigned)
    while left and (now := time.monotonic()) < deadline and (stall_s is None or now - moved < stall_s):
        client.poll(max_records=5000, timeout_s=0.2)
        left = remaining()
        if (at := sum(position(p) for p in assigned)) != last:
            moved, last = time.monotonic(), at
    return left


def not_read(high: int, timeout_s: float) -> str:
    """Why a partition is undrained when its reader stopped before its high watermark."""
    return (f"not read to its high watermark {high}: no progress for {timeout_s:g} s, "
            f"or {timeout_s * DRAIN_CAP_FACTOR:g} s in all")


def drain_topic(new_reader: Callable[[], ConsumerClient], readers: int, bootstrap: str, topic: str, partitions: int,
                group_id: str, first_index: int, timeout_s: float, driver: Driver | None = None) -> DrainResult:
    """The final drain of the queue and txn workloads (and the eos input): `readers` fresh consumers
    (at least one), each re-reading every partition from the beginning to its high watermark. A
    partition without one (offline: no leader) is left out and reported in `undrained`, so the rest
    is still drained and checked (issue 21)."""
    began = time.monotonic()
    high, offline = probe_high_watermarks(bootstrap, topic, range(partitions), f"{group_id}-hwm", timeout_s=timeout_s,
                                          driver=driver)
    began_reading = time.monotonic()  # the reads get their own budget after the probe
    results: list[set[int]] = []
    processes: list[int] = []
    lock = threading.Lock()

    def one(_: int) -> None:
        client = new_reader()
        with lock:
            processes.append(client.process)
        try:
            timed_out = drain_one(client, sorted(high), high, began_reading + timeout_s * DRAIN_CAP_FACTOR, stall_s=timeout_s)
        finally:
            client.close()
        with lock:
            results.append(timed_out)

    threads = [threading.Thread(target=one, args=(i,), name=f"drain-{i}", daemon=True) for i in range(max(1, readers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout_s * DRAIN_CAP_FACTOR + 30)
    timed_out_partitions = set().union(*results) if results else set(high)
    undrained = dict(offline)
    undrained.update({p: not_read(high[p], timeout_s) for p in timed_out_partitions})
    complete = len(results) == len(threads) and not undrained
    return DrainResult(complete, high, sorted(timed_out_partitions), sorted(processes), time.monotonic() - began,
                       first_index, undrained)
