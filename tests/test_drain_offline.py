"""The final drain against a partition that is offline (issue 21): it is reported as not drained,
with librdkafka's reason, and every other partition is still read to its high watermark."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from analysis.rules.verdict import decide
from harness.cluster import KafkaCluster
from harness.history import Recorder, read_history
from workloads.profiles import get_profile
from workloads.queue import QueueWorkload

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TOPIC = "drain-offline"


def test_an_offline_partition_is_left_undrained_with_its_reason_and_the_rest_is_drained(prepared, tmp_path: Path,
                                                                                      report_figure):
    # RF 1: stopping the broker that holds a partition leaves it with no leader at all, as the
    # 0.10.2.2 run of issue 21 left its partition after 120 s of kills and cuts.
    with KafkaCluster(brokers=3) as cluster:
        cluster.create_topic(TOPIC, partitions=3, replication_factor=1)
        recorder = Recorder(tmp_path / "history.jsonl")
        workload = QueueWorkload(recorder, cluster.bootstrap_servers(), TOPIC, get_profile("safe"), partitions=3,
                                 producers=1, consumers=1, rate=300, seed=3, group_id="drain-offline")
        workload.start()
        time.sleep(3)
        workload.stop()
        victim = cluster.leader_of(TOPIC, 0)
        assert victim is not None
        offline = {p for p, s in cluster.partition_state(TOPIC).items() if s["leader"] == victim.node_id}
        victim.kill_process()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(cluster.partition_state(TOPIC).get(p, {}).get("leader", -1) >= 0
                                                  for p in offline):
            time.sleep(0.5)
        began = time.monotonic()
        drain = workload.drain(timeout_s=8).as_json()
        seconds = time.monotonic() - began
        recorder.close()
    report_figure(f"drain with {len(offline)} offline partition(s) of 3: {seconds:.1f} s; undrained {drain['undrained']}")

    assert drain["complete"] is False
    assert set(drain["undrained"]) == {str(p) for p in offline}
    assert all("high watermark unavailable" in why for why in drain["undrained"].values()), drain["undrained"]
    assert set(drain["high_watermarks"]) == {str(p) for p in range(3)} - {str(p) for p in offline}
    assert drain["timed_out_partitions"] == []
    # Every acknowledged send on a partition still online was read by the drain.
    events = list(read_history(tmp_path / "history.jsonl"))
    acked = {(e["value"]["key"], e["value"]["value"]) for e in events
             if e["type"] == "ok" and e["f"] == "send" and e["value"]["key"] not in offline}
    read = {(r["key"], r["value"]) for e in events if e["process"] in drain["processes"] and e["f"] == "poll"
            and e["type"] == "ok" for r in e["value"]["records"]}
    assert acked and acked <= read

    # The verdict: records unseen on the offline partition are unknown, with the reason.
    v = decide({"unseen": 5}, set(), drain["complete"], undrained=drain["undrained"])
    assert v.verdict == "unknown"
    assert f"partition {min(offline)}: high watermark unavailable" in v.reasons[0]
