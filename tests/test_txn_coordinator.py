"""The transaction coordinator lookup (harness/cluster/txn_coordinator.py) and the KAFKA-17754
scenario's reading of its own evidence (harness/scenarios/txn_scenarios.py)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.cluster.txn_coordinator import coordinator_of, java_string_hash, kafka_abs, txn_state_partition
from harness.errors import HarnessError
from harness.scenarios import get_scenario
from harness.scenarios.txn_scenarios import endtxn_versions, stale_endtxn_shown, transaction_version


# Java's own answers: String.hashCode printed by `java H <s>` on this machine's JDK (javac H.java).
@pytest.mark.parametrize("s, h, partition", [
    ("", 0, 0), ("a", 97, 47), ("hello", 99162322, 22), ("kafka17754", 1894081994, 44),
    ("zzzzzzzz", -1910022912, 12),                 # negative: Utils.abs gives 12; x & 0x7fffffff would give 36
    ("polygenelubricants", -2147483648, 0),        # Integer.MIN_VALUE: Utils.abs maps it to 0
    ("héllo", 103094734, 34), ("😀x", 54959989, 39),  # a non-ASCII char, and a surrogate pair (two UTF-16 units)
])
def test_the_hash_and_partition_are_javas_and_kafkas(s: str, h: int, partition: int) -> None:
    assert java_string_hash(s) == h
    assert txn_state_partition(s, 50) == partition


def test_kafka_abs_is_not_a_mask() -> None:
    assert kafka_abs(-5) == 5 and kafka_abs(-(1 << 31)) == 0 and kafka_abs(7) == 7
    assert (-5 & 0x7FFFFFFF) != 5  # the other "abs" the partitioner uses would put ids elsewhere


def test_no_partitions_is_bad_input() -> None:
    with pytest.raises(HarnessError):
        txn_state_partition("x", 0)


class _Cluster:
    def __init__(self, state: dict[int, dict[str, Any]]) -> None:
        self.state = state

    def partition_state(self, topic: str) -> dict[int, dict[str, Any]]:
        assert topic == "__transaction_state"
        return self.state


def test_the_coordinator_is_the_leader_of_the_ids_partition() -> None:
    state = {p: {"leader": p % 3 + 1, "replicas": [1, 2, 3], "isr": [1, 2, 3]} for p in range(50)}
    found = coordinator_of(_Cluster(state), "kafka17754")  # type: ignore[arg-type]
    assert found["partition"] == 44 and found["coordinator"] == 44 % 3 + 1 and found["partitions"] == 50
    # the partition count comes from the metadata: with 10 partitions the id lands on 1894081994 % 10
    found = coordinator_of(_Cluster({p: state[p] for p in range(10)}), "kafka17754")  # type: ignore[arg-type]
    assert found["partition"] == 4


def test_no_topic_or_no_leader_is_an_error() -> None:
    with pytest.raises(HarnessError):
        coordinator_of(_Cluster({}), "kafka17754")  # type: ignore[arg-type]
    with pytest.raises(HarnessError):
        coordinator_of(_Cluster({p: {"leader": -1, "replicas": [1], "isr": []} for p in range(50)}), "kafka17754")  # type: ignore[arg-type]


def test_endtxn_versions_from_librdkafka_protocol_lines() -> None:
    lines = ["1.0 [thrd:127.0.0.1:32801/2]: 127.0.0.1:32801/2: Sent EndTxnRequest (v1, 56 bytes @ 0, CorrId 9)",
             "2.0 Sent AddPartitionsToTxnRequest (v0, 70 bytes @ 0, CorrId 7)", "3.0 Sent EndTxnRequest (v1, 56 bytes @ 0, CorrId 12)"]
    assert endtxn_versions(lines) == [1]
    assert transaction_version({"transaction.version": 2}) == 2 and transaction_version({}) == 0


def _summary(early: list[Any], aborted: int = 0, lost: int = 0) -> dict[str, Any]:
    return {"observations": {"b1_visible_early": early}, "history_counts": {"aborted-read": aborted}, "headline": {"lost": lost}}


def test_the_bug_is_shown_by_an_early_b1_or_the_checkers_findings() -> None:
    assert not stale_endtxn_shown(_summary([]))
    assert stale_endtxn_shown(_summary([[3, 2]]))
    assert stale_endtxn_shown(_summary([], aborted=1))
    assert stale_endtxn_shown(_summary([], lost=1))


def test_the_scenarios_read_at_read_committed() -> None:
    from harness.scenarios.context import scenario_profile

    for name in ("kafka17754-delayed-endtxn", "kafka17754-delayed-endtxn-pause"):
        s = get_scenario(name)
        assert s.isolation_level == "read_committed" and s.runnable
        assert scenario_profile(s).isolation_level == "read_committed"  # the checker reads config.json's profile
    assert scenario_profile(get_scenario("kip101-unclean-divergence")).isolation_level == "read_uncommitted"
