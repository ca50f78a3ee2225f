"""The heal on a real cluster: every registered fault package strikes once, then `heal_and_stop`
undoes them all. Before the registry the heal order was a hard-coded tuple, and a package missing
from it was never torn down; no test covered `heal_and_stop` for every package."""

from __future__ import annotations

import pytest

from harness.cluster import KafkaCluster
from nemesis import registry
from nemesis.runner import FaultRunner, build_nemeses
from nemesis.schedule import FaultEvent

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TOPIC = "queue"


def test_heal_and_stop_undoes_a_fault_of_every_registered_package(prepared, tmp_path, report_figure):
    names = list(registry.names())
    # One broker at a time where a package can be told so: the heal is under test, not Kafka's quorum.
    settings = {"db_targets": "one", "power_targets": "one", "disk_targets": "one", "partition_targets": "one",
                # A roll's clean stop of a broker another package paused waits 90 s for SIGTERM to take
                # effect, and its ISR waits cannot end under the other faults: the suite's run of this test
                # took 328 s. Hard stops without waiting strike every node all the same.
                "roll_stops": "hard", "roll_waits": "no-wait",
                # membership's default became all three ops (add-broker, decommission): this test's run
                # took 511 s in the fresh clone of 2026-11-26; the disk swap, as before, heals the same way.
                "membership_ops": "swap-disk"}
    with KafkaCluster(brokers=3, lossy_data=True, work_dir=tmp_path) as cluster:
        cluster.create_topic(TOPIC, partitions=2, replication_factor=3, config={"min.insync.replicas": 2})
        faults = FaultRunner(build_nemeses(names, settings), 60, seed=7, topic=TOPIC, isr_timeout_s=180)
        faults.setup(cluster)
        with faults:
            for name in names:
                faults.execute(FaultEvent(0.0, name, "start"))
            struck = [e.package for e in faults.executed if e.params.get("targets")]
            outcome = faults.heal_and_stop()
        assert outcome["isr_full"], outcome
        assert [b.node_id for b in cluster.brokers if b.pid() is None] == []
        for broker in cluster.brokers:
            code, rules = broker.exec("iptables -w -S | grep -c -- '-j DROP' || true")
            assert rules.strip() == "0", (broker.node_id, rules)
            assert broker.clock_offset_path.read_text().strip() in ("", "+0.000", "+0", "0"), broker.node_id
            assert cluster.disks[broker.node_id].clear_fault() is None, broker.node_id  # no disk fault left set
    report_figure(f"heal of {len(names)} packages ({len(struck)} struck a broker): ISRs full after {outcome['waited_s']} s")
