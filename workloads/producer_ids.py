"""Record an idempotent producer's id and epoch in the history (`f: "producer"`, docs/history.md).

Why: a duplicate under `enable.idempotence` is explained by librdkafka's epoch bump (issue #4953)
only when the broker's OutOfOrderSequenceException names the producer that sent the duplicate
(analysis/explain/producer_evidence.py). The driver reports the (id, epoch) pairs its client
knows (librdkafka tells them only in its statistics, every second: workloads/drivers/librdkafka.py);
each new pair becomes one `info` event of the producer's process: the first id once it has one,
then every epoch bump or new id. A pair reported again changes nothing.
"""

from __future__ import annotations

import logging

from harness.history import Recorder

log = logging.getLogger(__name__)

F = "producer"


class ProducerIdWatch:
    """A driver's on_producer_id: records (producer_id, producer_epoch) when it changes."""

    def __init__(self, recorder: Recorder, process: int) -> None:
        self.recorder, self.process = recorder, process
        self.last: tuple[int, int] | None = None

    def __call__(self, producer_id: int, producer_epoch: int) -> None:
        seen = (producer_id, producer_epoch)
        if producer_id < 0 or seen == self.last:  # -1: no id assigned yet
            return
        self.last = seen
        self.recorder.record(self.process, "info", F, {"producer_id": producer_id, "producer_epoch": producer_epoch})
