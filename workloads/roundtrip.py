"""A fault-free produce-then-consume round trip: the smallest proof that a cluster keeps what it acknowledges.

Values are the integers 0..n-1, keyed by partition, sent with acks=all and
idempotence; every acknowledged (partition, offset, value) must then be read
back once, in offset order per partition.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from workloads import drivers
from workloads.drivers.base import BEGINNING, ClientError, Driver, QueueFull


@dataclass
class RoundTrip:
    acked: dict[int, tuple[int, int]] = field(default_factory=dict)  # value -> (partition, offset)
    failed: dict[int, str] = field(default_factory=dict)  # value -> error
    read: list[tuple[int, int, int]] = field(default_factory=list)  # (partition, offset, value) in read order

    def missing(self) -> list[int]:
        """Acknowledged values never read back."""
        seen = {value for _, _, value in self.read}
        return sorted(v for v in self.acked if v not in seen)

    def misplaced(self) -> list[int]:
        """Values read at a position other than the one their send acknowledged."""
        return sorted(v for p, o, v in self.read if v in self.acked and self.acked[v] != (p, o))

    def out_of_order(self) -> list[tuple[int, int, int]]:
        """Reads whose offset does not follow the previous read of the same partition."""
        last: dict[int, int] = {}
        bad = []
        for p, o, v in self.read:
            if p in last and o <= last[p]:
                bad.append((p, o, v))
            last[p] = o
        return bad


def produce(bootstrap: str, topic: str, count: int, partitions: int, result: RoundTrip, timeout_s: float = 120.0,
            driver: Driver | None = None) -> None:
    driver = driver if driver is not None else drivers.make()

    def acked(partition: int, value: int, offset: int, epoch: int | None) -> None:
        result.acked[value] = (partition, offset)

    def failed(partition: int, value: int, err: ClientError) -> None:
        result.failed[value] = err.message

    producer = driver.producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5},
                               acked, failed)
    try:
        for value in range(count):
            while True:
                try:
                    producer.send(topic, value % partitions, value)
                    break
                except QueueFull:
                    producer.poll(0.05)
            producer.poll(0)
        remaining = producer.flush(timeout_s)
    finally:
        producer.close()
    if remaining:
        raise TimeoutError(f"{remaining} sends still unacknowledged after {timeout_s:.0f} s")


def consume(bootstrap: str, topic: str, partitions: int, expect: int, result: RoundTrip, timeout_s: float = 120.0,
            driver: Driver | None = None) -> None:
    """Read every partition from the beginning until `expect` records are read or the high watermarks are reached."""
    driver = driver if driver is not None else drivers.make()
    consumer = driver.consumer({"bootstrap.servers": bootstrap, "group.id": f"roundtrip-{time.monotonic_ns()}",
                                "enable.auto.commit": False, "auto.offset.reset": "earliest"}, report_eof=False)
    try:
        consumer.assign(topic, list(range(partitions)), BEGINNING)
        high = {p: consumer.high_watermark(topic, p, 10) for p in range(partitions)}
        position = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and any(position[p] < high[p] for p in high):
            for p, offset, value, _ in consumer.consume(1000, 0.5).records:
                result.read.append((p, offset, value))
                position[p] = offset + 1
    finally:
        consumer.close()
