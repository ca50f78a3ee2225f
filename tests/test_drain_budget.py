"""The final drain's budget (workloads/drain.py): a reader that still moves is waited for past
--drain-timeout, up to DRAIN_CAP_FACTOR times it; a reader that stalls is given up after the
timeout. The 2-hour soak of 2026-11-26 stopped its drain at a fixed 60 s with 414 of 7.4M records
unread; these hold the rule that replaced it, on a stand-in reader (the loop's logic only: the
real drain runs in every real-cluster test)."""

from __future__ import annotations

import time

from workloads.drain import DRAIN_CAP_FACTOR, drain_one, not_read


class Reader:
    """Reads `per_poll` records of partition 0 per poll, each poll taking `poll_s`, up to `stop_at`."""

    def __init__(self, per_poll: int, poll_s: float, stop_at: int) -> None:
        self.per_poll, self.poll_s, self.stop_at = per_poll, poll_s, stop_at
        self.next_offset: dict[int, int] = {}
        self.eof: dict[int, int] = {}

    def assign(self, keys: list[int], seek: str | None = None) -> bool:
        self.next_offset = {k: 0 for k in keys}
        return True

    def poll(self, max_records: int, timeout_s: float) -> None:
        time.sleep(self.poll_s)
        self.next_offset[0] = min(self.stop_at, self.next_offset[0] + self.per_poll)


def test_a_reader_that_keeps_moving_is_waited_for_past_the_timeout() -> None:
    reader = Reader(per_poll=1, poll_s=0.02, stop_at=40)  # about 0.8 s to read 40 records
    began = time.monotonic()
    left = drain_one(reader, [0], {0: 40}, began + 0.3 * DRAIN_CAP_FACTOR, stall_s=0.3)
    assert left == set()  # a fixed 0.3 s budget would have left partition 0 unread
    assert time.monotonic() - began > 0.3


def test_a_stalled_reader_is_given_up_after_the_timeout_not_the_cap() -> None:
    reader = Reader(per_poll=1, poll_s=0.02, stop_at=5)  # stops moving at offset 5 of 40
    began = time.monotonic()
    left = drain_one(reader, [0], {0: 40}, began + 30, stall_s=0.3)
    took = time.monotonic() - began
    assert left == {0}
    assert 0.3 <= took < 2.0, took


def test_the_cap_bounds_a_reader_that_moves_forever() -> None:
    reader = Reader(per_poll=1, poll_s=0.02, stop_at=10**9)
    began = time.monotonic()
    left = drain_one(reader, [0], {0: 10**9}, began + 0.5, stall_s=0.3)
    assert left == {0}
    assert time.monotonic() - began < 1.5


def test_without_a_stall_bound_the_deadline_alone_decides() -> None:
    reader = Reader(per_poll=1, poll_s=0.02, stop_at=5)
    began = time.monotonic()
    assert drain_one(reader, [0], {0: 40}, began + 0.6) == {0}
    assert time.monotonic() - began >= 0.6


def test_the_reason_names_both_bounds() -> None:
    assert not_read(7, 60) == f"not read to its high watermark 7: no progress for 60 s, or {60 * DRAIN_CAP_FACTOR} s in all"
