"""Record an idempotent producer's id and epoch in the history (`f: "producer"`, docs/history.md).

Why: a duplicate under `enable.idempotence` is explained by librdkafka's epoch bump (issue #4953)
only when the broker's OutOfOrderSequenceException names the producer that sent the duplicate
(analysis/explain/producer_evidence.py). librdkafka tells a client its producer id and epoch only in its
statistics (`eos.producer_id`, `eos.producer_epoch`, STATISTICS.md), so a producer with
idempotence on emits statistics every STATS_INTERVAL_MS and each new (id, epoch) becomes one
`info` event of its process: the first id once it has one, then every epoch bump or new id.

The statistics are served by the producer's own poll(), on the thread that sends: one JSON parse
a second per producer (a few tens of KB for 8 partitions on 3 brokers, well under a millisecond).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from harness.history import Recorder

log = logging.getLogger(__name__)

STATS_INTERVAL_MS = 1000
F = "producer"


class ProducerIdWatch:
    """librdkafka's stats_cb: records (producer_id, producer_epoch) when it changes."""

    def __init__(self, recorder: Recorder, process: int) -> None:
        self.recorder, self.process = recorder, process
        self.last: tuple[int, int] | None = None

    def __call__(self, stats: str) -> None:
        try:
            eos = json.loads(stats).get("eos") or {}
            seen = (int(eos["producer_id"]), int(eos["producer_epoch"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            return  # no eos block (idempotence off) or a malformed one: nothing to record
        if seen[0] < 0 or seen == self.last:  # -1: no id assigned yet
            return
        self.last = seen
        self.recorder.record(self.process, "info", F, {"producer_id": seen[0], "producer_epoch": seen[1]})


def watch_config(recorder: Recorder, process: int) -> dict[str, Any]:
    """The producer settings that make librdkafka report its id and epoch to the history."""
    return {"statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": ProducerIdWatch(recorder, process)}
