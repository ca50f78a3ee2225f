"""A cluster whose brokers all stop answering (0.10.2.2's hung followers, KAFKA-4039) is Kafka's
behaviour, recorded and checked, not a harness failure: harness/cluster/watch.py, harness/run/steps.py,
and the evidence the checker quotes (analysis/explain/replica_evidence.py's truncation_refusals)."""

from __future__ import annotations

import pytest

from analysis.checking.checker import check_run
from analysis.explain.replica_evidence import truncation_refusals
from tests.analysis.histories import Builder, write_run

# Two lines as 0.10.2.2 wrote them in a detection run (seed 6), 13 s apart.
FATAL = ("[2026-11-24 00:58:24,837] FATAL [ReplicaFetcherThread-0-1], Exiting because log truncation is not allowed for "
         "partition queue-4, Current leader 1's latest offset 135 is less than replica 3's latest offset 208 "
         "(kafka.server.ReplicaFetcherThread)\n")


def with_logs(run_dir, lines_by_broker: dict[str, str]):  # type: ignore[no-untyped-def]
    for broker, text in lines_by_broker.items():
        log = run_dir / "brokers" / broker / "server.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(text)
    return run_dir


def test_truncation_refusals_are_parsed_from_every_broker(tmp_path) -> None:
    run = with_logs(tmp_path, {"3": "[2026-11-24 00:58:20,000] INFO nothing\n" + FATAL,
                               "2": FATAL.replace("replica 3's", "replica 2's").replace("00:58:24,837", "00:58:37,393")})
    found = truncation_refusals(run)
    assert found["count"] == 2
    assert {(e["broker"], e["replica"], e["leader"], e["leader_end"], e["replica_end"]) for e in found["examples"]} == {
        (2, 2, 1, 135, 208), (3, 3, 1, 135, 208)}
    assert "queue-4" in found["sentence"] and "KIP-101" in found["sentence"]
    assert truncation_refusals(with_logs(tmp_path / "clean", {"1": "[2026-11-24 00:58:20,000] INFO fine\n"})) is None


@pytest.mark.slow
def test_an_unresponsive_cluster_is_checked_and_says_why(spark, tmp_path) -> None:
    b = Builder()
    b.assign(10, [0])
    b.send(1, 0, 1, 0)
    b.poll(10, [(0, 0, 1)])
    b.send(1, 0, 2, 1)  # acknowledged, never read: the brokers stopped answering
    run = write_run(tmp_path, b.events, {"profile": {"name": "safe"}, "drain": {"complete": False, "undrained": {"0": "high watermark unavailable"}},
                                         "unresponsive": {"at_s": 58.2, "reason": "no broker has answered for 61 s (bound 60 s)"}})
    with_logs(run, {"3": FATAL})
    results = check_run(run, spark)
    assert results["verdict"] == "unknown"  # not drained: nothing proven either way
    assert any("stopped answering at 58.2 s" in r for r in results["reasons"])
    assert any("refused to truncate queue-4" in r for r in results["reasons"])
    assert results["truncation_refused"]["count"] == 1 and results["unresponsive"]["at_s"] == 58.2
