"""Offsets of an `info` write once a read proved it happened (docs/checker.md, "Info writes a read
proved"): synthetic histories where the old reading (info writes never count) misses an anomaly
that the new one reports, and where an info write no read proved stays unknown. The first two are
Jepsen's own (kafka_test.clj: lost-write-test "atomic", inconsistent-offsets-test "info
conflicts"), written as our histories."""

from __future__ import annotations

import pytest

from analysis.reference import checker as reference
from tests.analysis.histories import ZERO, Builder, _txn, summed, write_run

A, B, C = 1, 2, 3


def atomic_lost_write(proof: bool = True) -> list[dict]:
    """An info txn sends a to key 0 (no offset) and b to key 1 at offset 0; an info send puts c on
    key 1 (read at 1). A read of a proves the txn committed, so b at 0 was written, and a reader
    went past it: lost. Without the read of a, b is unknown."""
    b = Builder()
    _txn(b, 0, "info", [(0, A, None), (1, B, 0)])
    b.send(1, 1, C, None, "info")
    if proof:
        b.poll(2, [(0, 0, A)])
    b.poll(3, [(1, 1, C)])
    return b.events


def info_conflict(proof: bool = True) -> list[dict]:
    """An info txn sends a to key 0 at offset 0 and b to key 1; an ok send puts c at key 0 offset
    0, where a reader finds it. A read of b (at key 1) proves the txn, so two values met at (0, 0)
    (and a, written, was never read: unseen)."""
    b = Builder()
    _txn(b, 0, "info", [(0, A, 0), (1, B, None)])
    b.send(1, 0, C, 0)
    b.poll(3, [(0, 0, C)])
    if proof:
        b.poll(2, [(1, 5, B)])
    return b.events


def info_send_backwards(proof: bool = True) -> list[dict]:
    """Process 0 sends a to key 0, acknowledged at 5, then b, which ends `info` but reports offset
    3 (a delivery after the error); a read returns b at 3. The proven send goes back: a
    nonmonotonic-send the old reading (ok sends only) never paired."""
    b = Builder()
    b.send(0, 0, A, 5)
    b.add(0, "invoke", "send", {"key": 0, "value": B})
    b.add(0, "info", "send", {"key": 0, "value": B, "offset": 3, "epoch": None})
    b.poll(2, [(0, 5, A)])
    if proof:
        b.poll(3, [(0, 3, B)])
    return b.events


CASES = [
    # (history, what the new reading reports; the old one reported nothing)
    (atomic_lost_write, {"lost-write": 1}),
    (info_conflict, {"inconsistent-offsets": 1, "unseen": 1}),
    (info_send_backwards, {"nonmonotonic-send": 1}),
]


@pytest.mark.parametrize("history, found", CASES)
def test_a_read_proves_an_info_write_and_its_offsets_count(history, found):
    assert reference.counts(history()) == {**ZERO, **found}


@pytest.mark.parametrize("history, found", CASES)
def test_an_info_write_no_read_proved_stays_unknown(history, found):
    assert reference.counts(history(proof=False)) == ZERO


def test_at_read_uncommitted_a_read_proves_only_its_own_record():
    # The read of a shows a was appended, not that its txn committed: b may sit nowhere.
    assert reference.counts(atomic_lost_write(), read_committed=False) == ZERO
    # A read of an info send's own record still proves it (Jepsen's info conflict, read as is).
    assert reference.counts(info_send_backwards(), read_committed=False)["nonmonotonic-send"] == 1


def test_an_unread_sibling_of_a_proven_txn_without_offset_is_unseen():
    # The txn committed (its other send was read), so a must be in the log: unseen, not unknown.
    b = Builder()
    _txn(b, 0, "info", [(0, A, None), (1, B, None)])
    b.poll(2, [(1, 0, B)])
    assert reference.counts(b.events) == {**ZERO, "unseen": 1}


def _side_by_side(histories: list[list[dict]]) -> list[dict]:
    from tests.analysis.test_txn_anomalies import _disjoint

    return _disjoint(histories)


@pytest.mark.slow
def test_spark_uses_proven_info_writes_as_the_reference_does(spark, tmp_path):
    from analysis.checking.checker import check_history

    proven = _side_by_side([h() for h, _ in CASES])
    want = summed([found for _, found in CASES])
    assert reference.counts(proven) == want
    results = check_history(spark, write_run(tmp_path / "proven", proven), None)
    assert results["counts"] == want and results["verdict"] == "invalid"
    assert results["examples"]["lost-write"][0]["ops"][0]["type"] == "info"  # the txn that wrote it

    unproven = _side_by_side([h(proof=False) for h, _ in CASES])
    results = check_history(spark, write_run(tmp_path / "unproven", unproven), None)
    assert results["counts"] == ZERO and results["verdict"] != "invalid"

    # read_uncommitted (a txn workload that permits aborted reads): the txn's sibling is unproved.
    config = {"workload": "txn", "profile": {"isolation.level": "read_uncommitted"}}
    results = check_history(spark, write_run(tmp_path / "ru", atomic_lost_write(), config), config)
    assert results["counts"] == ZERO
