"""Leader-epoch scenarios: DumpLogSegments parsing (real output of each version, kept as small
fixtures), the replica-divergence comparison, the scenario list, and one short real scenario."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cluster.replicas import divergence, dump_tool, parse_checkpoint, parse_dump

ROOT = Path(__file__).parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "dumplog"


def _records(*pairs, epoch=None):
    return {"records": [[o, v, epoch] for o, v in pairs]}


# --- DumpLogSegments output of each version --------------------------------------------------
@pytest.mark.parametrize("version", ["0.10.2.2", "1.1.1", "3.9.2", "4.3.1"])
def test_parse_dump_of_each_version(version):
    fixture = FIXTURES / f"{version}.txt"
    expected = json.loads((FIXTURES / f"{version}.expected.json").read_text())
    assert [list(r) for r in parse_dump(fixture.read_text())] == expected


def test_parse_dump_ignores_batch_headers_and_noise():
    text = ("log4j:WARN No appenders could be found\nDumping /var/lib/kafka/data/t-0/00000000000000000000.log\n"
            "Starting offset: 0\n"
            "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
            "partitionLeaderEpoch: 7 isTransactional: false isControl: false position: 0 CreateTime: 1 size: 80 magic: 2 "
            "compresscodec: none crc: 1 isvalid: true\n"
            "| offset: 0 CreateTime: 1 keySize: -1 valueSize: 2 sequence: -1 headerKeys: [] payload: 41\n"
            "| offset: 1 CreateTime: 1 keySize: -1 valueSize: 2 sequence: -1 headerKeys: [] payload: 42\n")
    assert parse_dump(text) == [(0, 41, 7), (1, 42, 7)]


def test_parse_checkpoint():
    assert parse_checkpoint("0\n2\n0 0\n3 21\n") == [[0, 0], [3, 21]]
    assert parse_checkpoint("0\n0\n") == []
    assert parse_checkpoint("garbage") is None


def test_dump_tool_moved_in_4_0():
    assert dump_tool("4.3.1") == "org.apache.kafka.tools.DumpLogSegments"
    assert dump_tool("3.9.2") == dump_tool("0.10.2.2") == "kafka.tools.DumpLogSegments"


# --- the divergence comparison on hand-made replicas ----------------------------------------------
def test_identical_replicas_do_not_diverge():
    d = divergence({"1": _records((0, 10), (1, 11)), "2": _records((0, 10), (1, 11))})
    assert d["diverged"] is False and d["first_offset"] is None and d["common_prefix"] == 2


def test_a_shorter_replica_is_lagging_not_diverged():
    d = divergence({"1": _records((0, 10), (1, 11), (2, 12)), "2": _records((0, 10))})
    assert d["diverged"] is False and d["log_end_offsets"] == {"1": 3, "2": 1}


def test_first_diverging_offset_and_values():
    a = _records(*[(o, o) for o in range(11)], *[(o, 100 + o) for o in range(11, 21)])
    b = _records(*[(o, o) for o in range(11)], *[(o, 200 + o) for o in range(11, 16)], *[(o, 100 + o) for o in range(16, 21)])
    d = divergence({"1": a, "2": b})
    assert d["diverged"] is True and d["first_offset"] == 11 and d["last_offset"] == 15 and d["diverged_offsets"] == 5
    assert d["differences"][0] == {"offset": 11, "values": {"1": 111, "2": 211}}


def test_the_explanation_names_the_odd_replica_and_the_epoch_only_it_has():
    """KIP-279's signature, as a random 1.1.1 run left it (20261124T192802-5f21aa, queue-1): broker 2
    kept its epoch-2 records after truncating to the start of the leader's epoch 3."""
    from analysis.explain.replica_evidence import explain

    base = [(o, o) for o in range(4)]
    reps = {"2": {"records": _records(*base, (4, 36881), (5, 36891)), "leader_epochs": [[1, 0], [2, 4], [3, 6]]},
            "3": {"records": _records(*base, (4, 35481), (5, 35486)), "leader_epochs": [[1, 0], [3, 6]]},
            "1": {"records": _records(*base, (4, 35481), (5, 35486)), "leader_epochs": [[1, 0], [3, 6]]}}
    text = explain("queue-1", divergence({b: r["records"] for b, r in reps.items()}), reps)
    assert text == ("queue-1: 2 offset(s) differ (offsets 4-5); at offset 4 broker 2 holds value 36881, brokers 1 and 3 "
                    "hold value 35481. Broker 2's leader-epoch cache has epoch 2 from offset 4, which brokers 1 and 3 "
                    "never had (theirs: {1: 0, 3: 6})")
    no_epochs = {b: {**r, "leader_epochs": None} for b, r in reps.items()}  # 0.10.2: no cache to compare
    assert explain("queue-1", divergence({b: r["records"] for b, r in reps.items()}), no_epochs).endswith("hold value 35481")


def test_the_explanation_says_when_the_odd_replica_was_outside_the_isr():
    """1.1.1, run 20261125T002416-33dc64: broker 1 kept its epoch-6 records, and its fetcher then
    died on the leader's batch, so it never rejoined the ISR."""
    from analysis.explain.replica_evidence import explain

    reps = {"1": {"records": _records((0, 1), (1, 56419))}, "2": {"records": _records((0, 1), (1, 54334))},
            "3": {"records": _records((0, 1), (1, 54334))}}
    d = divergence({b: r["records"] for b, r in reps.items()})
    assert explain("queue-5", d, reps, isr=[2, 3]).endswith("; at offset 1 broker 1 holds value 56419, brokers 2 and 3 hold "
                                                           "value 54334. Broker 1 was outside the ISR [2, 3] when dumped")
    assert "outside the ISR" not in explain("queue-5", d, reps, isr=[1, 2, 3])


def test_a_hole_counts_as_a_difference():
    d = divergence({"1": _records((0, 1), (1, 2), (2, 3)), "2": _records((0, 1), (2, 3))})
    assert d["first_offset"] == 1 and d["differences"][0]["values"] == {"1": 2, "2": None}


def test_a_replica_of_a_broker_that_is_down_is_left_out_and_says_why():
    """0.10.2.2, run 20261124T234904-ca02ac: broker 3's restart failed (already registered in
    ZooKeeper), so its disk kept queue-3's offsets 82-1278 as it led them before its death, while
    brokers 1 and 2 went on from 82. A JVM that is not running has not had the chance to truncate."""
    from analysis.explain.replica_evidence import explain

    base = [(o, o) for o in range(82)]
    reps = {"1": _records(*base, (82, 16027)), "2": _records(*base, (82, 16027)), "3": _records(*base, (82, 812))}
    why = {"3": "its JVM was not running when dumped"}
    d = divergence(reps, why)
    assert d["diverged"] is False and d["not_compared"] == why and d["log_end_offsets"] == {"1": 83, "2": 83}
    assert divergence(reps)["diverged"] is True  # compared, it would read as a divergence
    reps["2"] = _records(*base, (82, 99))  # the running replicas disagree: that still counts
    d = divergence(reps, why)
    assert d["diverged"] is True and d["differences"][0]["values"] == {"1": 16027, "2": 99}
    text = explain("queue-3", d, {b: {"records": r} for b, r in reps.items()})
    assert text.startswith("queue-3: 1 offset(s) differ (offset 82) (not compared: broker 3, its JVM was not running when dumped)")


# --- definitions and CLI ----------------------------------------------------------------------------
def test_scenario_list_names_every_scenario_and_why_some_cannot_run():
    from harness.scenarios import scenarios

    found = scenarios()
    assert {"kip101-unclean-divergence", "kip279-fast-failover", "kip320-consumer-truncation",
            "kip101-hw-truncation", "kip101-power-loss-divergence", "kip966-last-replica-standing",
            "kip966-last-replica-standing-elr-off", "kip966-shrink-stale-elr", "kip966-replaced-disk",
            "kip966-replaced-disk-kept"} <= set(found)
    for s in found.values():
        assert s.runnable == (s.steps is not None)
        assert s.runnable or s.reason
    assert all(found[n].lossy_data and found[n].runnable for n in found if n.startswith(("kip101-power", "kip966-last-replica")))
    assert found["kip966-shrink-stale-elr"].needs_kraft and not found["kip966-shrink-stale-elr"].lossy_data  # a kill, no power cut
    for name in ("kip966-replaced-disk", "kip966-replaced-disk-kept"):  # kills and a disk swap; every append fsynced
        s = found[name]
        assert s.needs_kraft and s.controller_apart and not s.lossy_data and s.replication_factor == 3 and s.acks == "all"
        assert s.shows_bug({"headline": {"lost": 1}}) and not s.shows_bug({"headline": {"lost": 0}})


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    code = "import sys; from harness.scenario_commands import scenario; sys.exit(scenario.main(sys.argv[1:], standalone_mode=True))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ}, timeout=timeout)


def test_cli_refuses_unknown_and_unrunnable_scenarios(tmp_path):
    assert _cli("run", "no-such-scenario").returncode == 2
    from harness.errors import HarnessError
    from harness.scenarios import Scenario
    from harness.scenarios.runner import run_scenario

    unrunnable = Scenario(name="x", kip="-", description="-", bug_versions="-", expected={}, steps=None, runnable=False, reason="why")
    with pytest.raises(HarnessError, match="not runnable: why"):
        run_scenario(unrunnable, "4.3.1", tmp_path)


# --- one real scenario --------------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.slow
def test_fast_failover_on_the_default_version(tmp_path):
    """KIP-279 on the default Kafka: B led briefly while cut off from A and wrote s11..s15 at
    offsets 11..15; after A's clean re-election B truncates to 11 and refetches, so the replicas
    end identical and s11..s15 are lost (acks=1 permits it) — the fixed behaviour."""
    out = _cli("run", "kip279-fast-failover", "--store", str(tmp_path), timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = next(p for p in tmp_path.iterdir() if (p / "scenario.json").exists())
    s = json.loads((run_dir / "scenario.json").read_text())
    config = json.loads((run_dir / "config.json").read_text())
    assert config["workload"] == "scenario:kip279-fast-failover" and config["drain"]["complete"] is True
    assert config["profile"]["acks"] == "1" and config["profile"]["unclean.leader.election.enable"] is False
    assert (run_dir / "history.parquet").exists() and (run_dir / "replicas.json").exists()
    assert s["status"] == "completed", s["incomplete_reason"]
    acked = {w["label"]: w["offset"] for w in s["writes"] if w["acked"]}
    assert acked["r11"] == acked["s11"] == 11, s["writes"]
    assert s["replica_divergence"]["diverged"] is False, s["replica_divergence"]
    assert s["history_counts"]["lost-write"] == 5 and s["headline"]["lost"] == 5
    assert s["bug_shown"] is False
    steps = [e for e in map(json.loads, (run_dir / "history.jsonl").read_text().splitlines()) if e["process"] == "nemesis"]
    assert {"kill", "restart", "cut", "heal", "reassign", "elect", "scenario-drain"} <= {e["f"] for e in steps}


@pytest.mark.docker
@pytest.mark.slow
# The fixed version's half runs in the nightly (-m chaos, 123 s under load): the default suite keeps
# the half that must find the loss, which is the one that can fail silently.
@pytest.mark.parametrize("version, lost", [("0.10.2.2", 1), pytest.param("4.3.1", 0, marks=pytest.mark.chaos)])
def test_hw_truncation_loses_the_acknowledged_record_only_before_kip_101(tmp_path, version, lost):
    """KIP-101 scenario 1: m2, acknowledged by all three replicas, is truncated by follower A
    when it starts following C (0.10.2 truncates to the high watermark) and lost when A is then
    cleanly elected. With leader epochs A keeps m2 and nothing is lost."""
    out = _cli("run", "kip101-hw-truncation", "--kafka-version", version, "--store", str(tmp_path), timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = next(p for p in tmp_path.iterdir() if (p / "scenario.json").exists())
    s = json.loads((run_dir / "scenario.json").read_text())
    assert s["status"] == "completed", s["incomplete_reason"]
    assert set(s["roles"]) == {"A", "B", "C", "D"} and len(set(s["roles"].values())) == 4
    assert [w["acked"] for w in s["writes"]] == [True, True], s["writes"]
    assert s["headline"]["lost"] == lost and s["bug_shown"] is (lost > 0)
    a_log = (run_dir / "brokers" / str(s["roles"]["A"]) / "server.log").read_text()
    if lost:
        assert "Truncating log scenario-0 to offset 1" in a_log  # A, becoming C's follower, truncated m2 away
    else:
        assert "Follower scenario-0 starts at leader epoch 1 from offset 2" in a_log  # A kept m2


def test_the_stale_elr_scenario_reads_kafka_topics_lines_and_names_what_is_not_a_replica():
    """kafka-topics --describe as 4.4.0 printed it in the reproduction (2026-11-27)."""
    from harness.scenarios.elr_scenarios import _shows, led, stale
    from harness.scenarios.power_scenarios import parse_partition_line

    shrunk = parse_partition_line("\tTopic: elr\tPartition: 0\tLeader: 3\tReplicas: 3\tIsr: 3\tElr: 1,2\tLastKnownElr: ")
    assert stale(shrunk) == [1, 2] and led(shrunk)
    control = parse_partition_line("\tTopic: ctl\tPartition: 0\tLeader: 3\tReplicas: 3\tIsr: 3\tElr: \tLastKnownElr: ")
    assert stale(control) == [] and led(control)
    offline = parse_partition_line("\tTopic: elr\tPartition: 0\tLeader: none\tReplicas: 3\tIsr: \tElr: 1,2\tLastKnownElr: 3")
    assert not led(offline)
    seen = {"stale_elr_after_shrink": [1, 2], "control_leader_after_B_back": True, "leader_after_B_back": False}
    assert _shows({"observations": seen})
    assert not _shows({"observations": {**seen, "leader_after_B_back": True}})  # a fixed Kafka: both come back
    assert not _shows({"observations": {**seen, "control_leader_after_B_back": False}})  # no control: no claim


@pytest.mark.docker
@pytest.mark.chaos
def test_the_stale_elr_scenario_runs_and_its_control_comes_back(tmp_path):
    """Nightly (~3 min): kip966-shrink-stale-elr on the default Kafka. The control topic (one replica
    on B from the start) must be led again after B's restart, or the scenario proves nothing; whether
    the shrunk partition stays leaderless (the finding, 4.4.0 on 2026-11-27) is the run's to report."""
    out = _cli("run", "kip966-shrink-stale-elr", "--store", str(tmp_path), "--no-check", timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = next(p for p in tmp_path.iterdir() if (p / "scenario.json").exists())
    s = json.loads((run_dir / "scenario.json").read_text())
    assert s["status"] == "completed", s["incomplete_reason"]
    o = s["observations"]
    assert o["control_leader_after_B_back"], o["control_after_B_back"]
    assert o["partition_after_shrink"]["Replicas"] == str(s["roles"]["B"])
    assert s["headline"]["lost"] == 0 and s["bug_shown"] == (bool(o["stale_elr_after_shrink"]) and not o["leader_after_B_back"])


@pytest.mark.docker
@pytest.mark.chaos
def test_the_replaced_disk_scenario_and_its_control(tmp_path):
    """Nightly (~8 min): kip966-replaced-disk and its control on the default Kafka. The control (C's
    disk kept) must lose nothing and keep C's directory id, or the pair proves nothing; the replaced
    leg must give C a new directory id. Whether the controller elects C on its empty disk (the 4.4.0
    campaign's finding, 2026-11-27) is the run's to report, as bug_shown."""
    runs = {}
    for name in ("kip966-replaced-disk-kept", "kip966-replaced-disk"):
        out = _cli("run", name, "--store", str(tmp_path / name), "--no-check", timeout=900)
        assert out.returncode == 0, out.stderr[-3000:]
        run_dir = next(p for p in (tmp_path / name).iterdir() if (p / "scenario.json").exists())
        runs[name] = json.loads((run_dir / "scenario.json").read_text())
        assert runs[name]["status"] == "completed", runs[name]["incomplete_reason"]
    kept, replaced = runs["kip966-replaced-disk-kept"], runs["kip966-replaced-disk"]
    assert kept["observations"]["acked"] == 50 and kept["headline"]["lost"] == 0 and not kept["bug_shown"]
    assert kept["observations"]["directory_id_before"] == kept["observations"]["directory_id_after"]
    before, after = replaced["observations"]["directory_id_before"], replaced["observations"]["directory_id_after"]
    assert before and after and before != after
    assert replaced["bug_shown"] == (replaced["headline"]["lost"] > 0)
