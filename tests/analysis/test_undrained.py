"""A drain that left partitions unread (offline: no leader, issue 21) makes unseen records
`unknown` with the partitions and their reasons, never `valid` and never lost."""

from __future__ import annotations

import pytest

from analysis.checking.checker import drain_status, drain_undrained
from analysis.rules.registry import ANOMALIES
from analysis.rules.verdict import decide, headline

ZERO = dict.fromkeys(ANOMALIES, 0)
OFFLINE = "high watermark unavailable: Failed to get watermark offsets: Local: Unknown partition (_UNKNOWN_PARTITION)"
CONFIG = {"drain": {"complete": False, "high_watermarks": {"1": 40, "2": 38}, "timed_out_partitions": [],
                    "undrained": {"0": OFFLINE, "10": "not read to its high watermark 7 within 60 s"}}}


def test_the_drain_record_names_the_undrained_partitions_and_older_records_have_none() -> None:
    assert drain_status(CONFIG) == (False, {"1": 40, "2": 38})
    assert drain_undrained(CONFIG) == CONFIG["drain"]["undrained"]
    assert drain_undrained({"drain": {"complete": True, "high_watermarks": {}}}) == {}
    assert drain_undrained(None) == {}


def test_unseen_records_on_undrained_partitions_are_unknown_with_the_reason() -> None:
    counts = {**ZERO, "unseen": 4}
    v = decide(counts, set(), False, undrained=drain_undrained(CONFIG))
    assert v.verdict == "unknown" and v.forbidden == []
    assert v.reasons == [f"4 acknowledged write(s) unseen and the final drain did not complete (not drained: "
                         f"partition 0: {OFFLINE}; partition 10: not read to its high watermark 7 within 60 s)"]
    assert headline(counts, False)["lost"] == 0


def test_an_undrained_partition_does_not_excuse_a_loss_seen_elsewhere() -> None:
    v = decide({**ZERO, "unseen": 4, "lost-write": 1}, set(), False, undrained=drain_undrained(CONFIG))
    assert v.verdict == "invalid" and v.forbidden == ["lost-write"]
    assert decide(ZERO, set(), False, undrained=drain_undrained(CONFIG)).verdict == "valid"


def test_the_report_names_the_undrained_partitions(tmp_path) -> None:
    from analysis.report.page import _facts

    facts = dict(_facts(tmp_path, CONFIG, None, None))
    assert facts["final drain"].startswith(f"INCOMPLETE (not drained: partition 0: {OFFLINE}; partition 10: ")


def test_unseen_records_on_partitions_the_drain_did_finish_are_lost() -> None:
    """Only the undrained partitions' unseen records are merely unread: on the others the drain
    reached the high watermark, so an unseen acknowledged record there is lost."""
    counts = {**ZERO, "unseen": 4}
    v = decide(counts, set(), False, undrained=drain_undrained(CONFIG), unseen_drained=1)
    assert v.verdict == "invalid" and v.forbidden == ["unseen"]
    assert v.reasons == ["1 of 4 unseen on partitions the final drain read to their end (not permitted by this configuration)"]
    assert headline(counts, False, v.forbidden, unseen_drained=1)["lost"] == 1
    assert decide(counts, {"unseen"}, False, undrained=drain_undrained(CONFIG), unseen_drained=1).verdict == "valid"


@pytest.mark.slow
def test_the_checker_counts_unseen_records_by_whether_their_partition_was_drained(spark, tmp_path) -> None:
    from analysis.checking.checker import check_run
    from tests.analysis.histories import Builder, write_run

    b = Builder()
    b.assign(100, [0, 1])
    b.send(1, 0, 10, 0)  # key 0: offline at the drain, never read: unknown
    b.send(1, 1, 12, 0)
    b.send(1, 1, 11, 1)  # key 1: the drain read it to its end and never saw value 11: lost
    b.poll(100, [(1, 0, 12)])
    config = {"drain": {"complete": False, "high_watermarks": {"1": 2}, "timed_out_partitions": [], "undrained": {"0": OFFLINE}}}
    results = check_run(write_run(tmp_path, b.events, config), spark)
    assert results["counts"]["unseen"] == 2 and results["counts"]["lost-write"] == 0
    assert results["verdict"] == "invalid" and results["headline"]["lost"] == 1, results["reasons"]
    assert results["reasons"][0].startswith("1 of 2 unseen on partitions the final drain read to their end")
