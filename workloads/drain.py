"""The final drain: read every partition from the beginning up to its high watermark, so that a
record nobody read is really missing (kafkatest's produce → fault → drain → validate).

Shared by the workloads and the scenarios (one high-watermark probe, one drain loop).
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

    def as_json(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "high_watermarks": {str(p): o for p, o in sorted(self.high_watermarks.items())},
            "timed_out_partitions": sorted(self.timed_out_partitions),
            "processes": self.processes,
            "first_index": self.first_index,
            "seconds": round(self.seconds, 3),
        }


def high_watermarks(bootstrap: str, topic: str, partitions: Iterable[int], group_id: str,
                    timeout_s: float = 60.0) -> dict[int, int]:
    """Every partition's high watermark. Right after an election a new leader answers
    OFFSET_NOT_AVAILABLE until its high watermark catches up, so retriable errors are retried
    until `timeout_s`; anything else raises KafkaException."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id,
                      "logger": logging.getLogger("librdkafka.consumer")})
    deadline = time.monotonic() + timeout_s
    high: dict[int, int] = {}
    try:
        for p in partitions:
            while True:
                try:
                    high[p] = probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                    break
                except KafkaException as exc:
                    err = exc.args[0]
                    if not (err.retriable() or err.code() == KafkaError.OFFSET_NOT_AVAILABLE) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        return high
    finally:
        probe.close()


def drain_one(client: ConsumerClient, partitions: int, high: dict[int, int], deadline: float) -> set[int]:
    """Assign every partition from the beginning and poll until each is read to `high`; return those that were not."""
    client.assign(list(range(partitions)), "beginning")

    def remaining() -> set[int]:
        return {
            p for p in range(partitions)
            if high[p] > 0 and max(client.next_offset.get(p, 0), client.eof.get(p, 0)) < high[p]
        }

    left = remaining()
    while left and time.monotonic() < deadline:
        client.poll(max_records=5000, timeout_s=0.2)
        left = remaining()
    return left
