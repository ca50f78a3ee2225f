"""Open-loop pacing: operations are due at a fixed rate from the start, whatever the cluster does
(Jepsen's generators do the same), so a slow broker meets a backlog rather than a lighter load.
Shared by the queue and txn producers."""

from __future__ import annotations

import time


class Pacer:
    def __init__(self, per_second: float) -> None:
        self.per_second = per_second
        self.gap_s = 1.0 / per_second  # the mean gap between two operations
        self.began = time.monotonic()

    def begin(self) -> None:
        """Start the clock (after the client is open, so opening is not counted as backlog)."""
        self.began = time.monotonic()

    def due(self, done: int) -> int:
        """How many operations are due now, after `done` of them."""
        return int(self.per_second * (time.monotonic() - self.began)) - done
