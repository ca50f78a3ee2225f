"""A drain that left partitions unread (offline: no leader, issue 21) makes unseen records
`unknown` with the partitions and their reasons, never `valid` and never lost."""

from __future__ import annotations

from analysis.checker import drain_status, drain_undrained
from analysis.registry import ANOMALIES
from analysis.verdict import decide, headline

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
    from analysis.report import _facts

    facts = dict(_facts(tmp_path, CONFIG, None, None))
    assert facts["final drain"].startswith(f"INCOMPLETE (not drained: partition 0: {OFFLINE}; partition 10: ")
