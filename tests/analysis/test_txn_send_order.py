"""Transaction sends in a process's send order (issue 20 item 3): nonmonotonic-send pairs the sends
of two ops of one process, plain or transactional, in the order their ops were invoked; two sends
of one txn are int-nonmonotonic-send's alone. Synthetic histories, the reference checker, and Spark
held to it."""

from __future__ import annotations

import pytest

from analysis.reference import checker as reference
from tests.analysis.histories import ZERO, Builder, _txn, summed, write_run

A, B, C, D = 1, 2, 3, 4


def txns_backwards() -> list[dict]:
    """Process 0 commits a txn that puts a at offset 5 of key 0, then one that puts b at 3."""
    b = Builder()
    _txn(b, 0, "ok", [(0, A, 5)])
    _txn(b, 0, "ok", [(0, B, 3)])
    b.poll(2, [(0, 3, B), (0, 5, A)])
    return b.events


def last_of_one_txn_above_first_of_next() -> list[dict]:
    """Txn 1 puts a at 1 and b at 4; txn 2 puts c at 3: c went below b, the last send before it.
    c also landed inside txn 1's run (int-send-skip) and the two txns' writes interleave (G0), both
    of which Kafka permits."""
    b = Builder()
    _txn(b, 0, "ok", [(0, A, 1), (0, B, 4)])
    _txn(b, 0, "ok", [(0, C, 3)])
    b.poll(2, [(0, 1, A), (0, 3, C), (0, 4, B)])
    return b.events


def plain_send_then_lower_txn() -> list[dict]:
    """A plain send acknowledged at 6, then a txn of the same process whose send lands at 2."""
    b = Builder()
    b.send(0, 0, A, 6)
    _txn(b, 0, "ok", [(0, B, 2)])
    b.poll(2, [(0, 2, B), (0, 6, A)])
    return b.events


def proven_info_txn_backwards(proof: bool = True) -> list[dict]:
    """An ok txn puts a at 5; the next txn ends `info` with b at 3. A read of b proves the txn."""
    b = Builder()
    _txn(b, 0, "ok", [(0, A, 5)])
    _txn(b, 0, "info", [(0, B, 3)])
    b.poll(2, ([(0, 3, B)] if proof else []) + [(0, 5, A)])
    return b.events


def inside_one_txn() -> list[dict]:
    """One txn puts a at 5, then b at 3: int-nonmonotonic-send, and not nonmonotonic-send too."""
    b = Builder()
    _txn(b, 0, "ok", [(0, A, 5), (0, B, 3)])
    b.poll(2, [(0, 3, B), (0, 5, A)])
    return b.events


def in_order() -> list[dict]:
    """Two txns and a plain send, each above the last; another process's lower send is its own."""
    b = Builder()
    _txn(b, 0, "ok", [(0, A, 1), (0, B, 2)])
    b.send(0, 0, C, 3)
    _txn(b, 0, "ok", [(0, D, 4)])
    _txn(b, 1, "ok", [(0, 5, 0)])
    b.poll(2, [(0, 0, 5), (0, 1, A), (0, 2, B), (0, 3, C), (0, 4, D)])
    return b.events


CASES = [
    (txns_backwards, {"nonmonotonic-send": 1}),
    (last_of_one_txn_above_first_of_next, {"nonmonotonic-send": 1, "int-send-skip": 1, "G0": 1}),
    (plain_send_then_lower_txn, {"nonmonotonic-send": 1}),
    (proven_info_txn_backwards, {"nonmonotonic-send": 1}),
    (inside_one_txn, {"int-nonmonotonic-send": 1}),
    (in_order, {}),
]


@pytest.mark.parametrize("history, found", CASES, ids=[h.__name__ for h, _ in CASES])
def test_txn_sends_join_their_process_send_order(history, found):
    assert reference.counts(history()) == {**ZERO, **found}


def test_an_unproven_info_txn_joins_no_order():
    assert reference.counts(proven_info_txn_backwards(proof=False)) == ZERO


@pytest.mark.slow
def test_spark_orders_txn_sends_as_the_reference_does(spark, tmp_path):
    from analysis.checking.checker import check_history
    from tests.analysis.test_txn_anomalies import _disjoint

    events = _disjoint([h() for h, _ in CASES])
    want = summed([found for _, found in CASES])
    assert reference.counts(events) == want
    results = check_history(spark, write_run(tmp_path / "run", events), None)
    assert results["counts"] == want
    pairs = results["examples"]["nonmonotonic-send"]
    assert len(pairs) == 4 and all(len(ex["values"]) == 2 for ex in pairs)
