"""What consumers saw, even in a transaction that failed (issue 35 item 7): Jepsen's published
poll-skip-test, nonmonotonic-poll-test and duplicate-test cases (jepsen/test/jepsen/tests/
kafka_test.clj) that involve the reads of `fail` and `info` transactions, and subscribes or assigns
that keep a key, by the reference checker and the Spark checker; and what a group rebalance
permits of them."""

from __future__ import annotations

import pytest

from analysis.reference import checker as reference
from analysis.rules.permissions import rebalance_permitted
from tests.analysis.histories import ZERO, Builder, _txn, write_run
from tests.analysis.jepsen_histories import READ_SEQUENCE_HISTORIES
from tests.analysis.test_txn_anomalies import _disjoint, _read_across


@pytest.mark.parametrize("name", READ_SEQUENCE_HISTORIES)
def test_reference_gives_jepsens_counts(name):
    history, want = READ_SEQUENCE_HISTORIES[name]
    got = reference.counts(history())
    if not want:  # "txn abort good": Jepsen finds no error at all, so nothing here either
        assert got == ZERO
    for kind, n in want.items():
        assert got[kind] == n, (kind, got)


def test_only_a_rebalance_between_two_reads_marks_the_pair():
    # poll-skip-test "with intermediate subscribe" [x y]: the subscribe before the read of 4 and the
    # assign (a rebalance: the process subscribed) before the read of 7 lie between each pair.
    found = reference.findings(READ_SEQUENCE_HISTORIES["poll-skip subscribe [x y], assign [x y]"][0]())
    assert reference.across_rebalance(found) == {"poll-skip": 2, "nonmonotonic-poll": 0}
    # An assign of a process that never subscribed is no rebalance: the pair stays unmarked.
    found = reference.findings(READ_SEQUENCE_HISTORIES["nonmonotonic-poll assign [x y]"][0]())
    assert reference.across_rebalance(found) == {"poll-skip": 0, "nonmonotonic-poll": 0}


def test_a_subscribing_run_permits_a_kind_only_when_every_pair_crosses_a_rebalance():
    counts = {**ZERO, "nonmonotonic-poll": 3, "poll-skip": 2}
    allowed, rules = rebalance_permitted(counts, {"nonmonotonic-poll": 3, "poll-skip": 1}, subscribe=True)
    assert allowed == {"nonmonotonic-poll"} and "3 nonmonotonic-poll" in rules[0] and "committed offset" in rules[0]
    assert rebalance_permitted(counts, {"nonmonotonic-poll": 3, "poll-skip": 2}, subscribe=False) == (set(), [])
    assert rebalance_permitted(dict(ZERO), {}, subscribe=True) == (set(), [])


def _rewind(rewinds: bool) -> list[dict]:
    """The eos worker's shape: process 1 (assign mode) reads x 0 1 in a committed txn, 2 3 in one
    that aborts, records its rewind (an assign of x seeking the committed offsets), then reads from
    2 again (rewinds=True) or from 4 (it kept the aborted position: KAFKA-17582's shape)."""
    b = Builder()
    for o in range(6):
        b.send(0, 0, 100 + o, o)
    b.assign(1, [0], "committed")
    _txn(b, 1, "ok", [], [(0, 0, 100), (0, 1, 101)])
    _txn(b, 1, "fail", [], [(0, 2, 102), (0, 3, 103)])
    b.assign(1, [0], "committed")  # an assign-mode rewind, no rebalance: the sequence goes on
    start = 2 if rewinds else 4
    _txn(b, 1, "ok", [], [(0, o, 100 + o) for o in range(start, 6)])
    return b.events


def test_a_rewind_after_an_abort_is_held_to_the_sequence():
    good, bad = reference.findings(_rewind(True)), reference.findings(_rewind(False))
    assert reference.counts(_rewind(True)) == ZERO
    assert len(bad["poll-skip"]) == 1 and reference.across_rebalance(bad)["poll-skip"] == 0
    assert len(bad["lost-write"]) == 2  # 2 and 3 were read only inside the aborted txn
    assert not good["poll-skip"]


# test_txn_anomalies.py's assign and subscribe cases, checked by Spark here to save a check.
READ_ACROSS = [None, ("assign", [0, 1], None), ("assign", [1], None), ("assign", [0, 1], "committed"),
               ("subscribe", [0, 1], "committed"), ("assign", [0, 1], "beginning")]


def _all() -> list[dict]:
    return _disjoint([h() for h, _ in READ_SEQUENCE_HISTORIES.values()] + [_rewind(True), _rewind(False)]
                     + [_read_across(c) for c in READ_ACROSS])


@pytest.mark.slow
def test_spark_agrees_with_the_reference(spark, tmp_path):
    """Every case side by side on its own keys, one Spark check: the counts, and which pairs cross
    a rebalance, are the reference's (so Jepsen's, by the test above)."""
    from analysis.checking.checker import check_history

    events = _all()
    found = reference.findings(events)
    results = check_history(spark, write_run(tmp_path / "seq", events), None)
    assert results["counts"] == reference.counts(events)
    assert results["across_rebalance"] == reference.across_rebalance(found)
    # Without subscribe in the run's record, nothing is permitted by a rebalance.
    assert {"poll-skip", "nonmonotonic-poll"} <= set(results["forbidden"])
    marked = [e for e in results["examples"]["poll-skip"] if e["across_rebalance"]]
    assert len(marked) == reference.across_rebalance(found)["poll-skip"] == 2
    assert reference.across_rebalance(found)["nonmonotonic-poll"] == 2  # Jepsen's subscribe [x y], and ours


def test_the_sentence_says_a_read_was_in_an_aborted_txn_or_across_a_rebalance(tmp_path):
    from analysis.explain import explanations as explain
    from tests.analysis.jepsen_histories import poll_skip, txn_abort_no_rollback

    events = txn_abort_no_rollback()
    run_dir = write_run(tmp_path / "abort", events, {"profile": {"name": "safe"}})
    exs = explain.examples_from_findings(reference.findings(events))["poll-skip"]
    first = next(e for e in exs if e["offsets"] == [0, 3])
    aborted = next(e for e in events if e["type"] == "fail")
    first["ops"] = [{"index": 3, "type": "ok"}, {"index": aborted["index"], "type": "fail"}]  # as Spark's examples carry them
    got = explain.explain(run_dir, {"poll-skip": [first]}, None)["examples"]["poll-skip"][0]
    assert "at offset 0 then at offset 3 inside a txn that aborted" in got["sentence"], got["sentence"]
    assert "rebalance" not in got["sentence"]

    events = poll_skip("xy")
    run_dir = write_run(tmp_path / "group", events, {"profile": {"name": "safe"}, "subscribe": True})
    exs = explain.examples_from_findings(reference.findings(events))["poll-skip"]
    assert all(e["across_rebalance"] for e in exs) and len(exs) == 2
    got = explain.explain(run_dir, {"poll-skip": exs}, None)["examples"]["poll-skip"]
    assert all("across a group rebalance" in g["sentence"] and "aborted" not in g["sentence"] for g in got)


@pytest.mark.parametrize("reset, jepsen", [(None, 1), (("subscribe", ["x", "y"]), 1), (("assign", ["x", "y"]), 1),
                                           (("subscribe", ["y"]), 0), (("assign", ["y"]), 0)])
def test_a_subscribe_never_resets_a_send_sequence_unlike_jepsen(reset, jepsen):
    """nonmonotonic-send-test "with intermediate subscribe": where the subscribe keeps x, ours and
    Jepsen's agree (1); where it drops x, Jepsen resets the sending process's sequence (0) and ours
    does not (1): see nonmonotonic_send's docstring."""
    from tests.analysis.jepsen_histories import nonmonotonic_send

    got = reference.counts(nonmonotonic_send(reset))["nonmonotonic-send"]
    assert got == 1 and (got == jepsen) == (reset is None or "x" in reset[1])
