"""The final drain: read every partition from the beginning up to its high watermark, so that a
record nobody read is really missing (kafkatest's produce → fault → drain → validate).

Shared by the workloads and the scenarios (one high-watermark probe, one drain loop).

A partition the drain cannot read (no leader: an old broker left it offline, issue 21) is not an
error of the run: it is reported as not drained, with the reason (`DrainResult.undrained`), so its
acknowledged-but-unread records are `unknown` rather than lost, and every other partition is still
drained and checked.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from workloads.clients import ConsumerClient


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


# librdkafka's answers while a partition has no leader: its metadata lists no leader
# (_UNKNOWN_PARTITION: "Local: Unknown partition", seen on 0.10.2.2 after 120 s of kills and
# partitions, issue 21) or the broker asked says it leads nothing. Retried like the retriable
# errors, since an election may still be under way; still failing at the deadline, the partition
# is offline.
LEADERLESS = {KafkaError._UNKNOWN_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NOT_LEADER_FOR_PARTITION,
              KafkaError.OFFSET_NOT_AVAILABLE}


def probe_high_watermarks(bootstrap: str, topic: str, partitions: Iterable[int], group_id: str,
                          timeout_s: float = 60.0) -> tuple[dict[int, int], dict[int, str]]:
    """Every partition's high watermark, and for each partition whose watermark could not be had,
    why (librdkafka's error). Right after an election a new leader answers OFFSET_NOT_AVAILABLE
    until its high watermark catches up, and a partition may have no leader for a while, so those
    errors and the retriable ones are retried until `timeout_s` (shared by all partitions; each
    gets at least one try)."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id,
                      "logger": logging.getLogger("librdkafka.consumer")})
    deadline = time.monotonic() + timeout_s
    high: dict[int, int] = {}
    failed: dict[int, str] = {}
    try:
        for p in partitions:
            while True:
                try:
                    high[p] = probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                    break
                except KafkaException as exc:
                    err = exc.args[0]
                    if not (err.retriable() or err.code() in LEADERLESS) or time.monotonic() > deadline:
                        failed[p] = f"high watermark unavailable: {err.str()} ({err.name()})"
                        break
                    time.sleep(0.5)
        return high, failed
    finally:
        probe.close()


def high_watermarks(bootstrap: str, topic: str, partitions: Iterable[int], group_id: str,
                    timeout_s: float = 60.0) -> dict[int, int]:
    """Every partition's high watermark (see probe_high_watermarks); any partition without one
    raises KafkaException (the scenarios, which read a single partition, stop there)."""
    high, failed = probe_high_watermarks(bootstrap, topic, partitions, group_id, timeout_s)
    if failed:
        p, why = min(failed.items())
        raise KafkaException(KafkaError(KafkaError._FAIL, f"partition {p}: {why}"))
    return high


def drain_one(client: ConsumerClient, partitions: int | Iterable[int], high: dict[int, int], deadline: float) -> set[int]:
    """Assign the partitions (a count means 0..n-1) from the beginning and poll until each is read
    to `high`; return those that were not."""
    assigned = list(range(partitions)) if isinstance(partitions, int) else sorted(partitions)
    client.assign(assigned, "beginning")

    def remaining() -> set[int]:
        return {
            p for p in assigned
            if high[p] > 0 and max(client.next_offset.get(p, 0), client.eof.get(p, 0)) < high[p]
        }

    left = remaining()
    while left and time.monotonic() < deadline:
        client.poll(max_records=5000, timeout_s=0.2)
        left = remaining()
    return left
