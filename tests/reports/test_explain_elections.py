"""Inconsistent offsets explained: the faults between two acknowledgements of one offset, and an
unclean election's leader named with what its log held (a power cut's empty log, a replaced disk),
from the plain-Python reference's findings; split from test_explain.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.explain import explanations as explain
from analysis.reference import checker as reference


def test_the_faults_between_two_acknowledgements_at_one_offset_are_named(tmp_path: Path) -> None:
    """0.10.2.2 under `heir`, detection seed 1: the leader was killed as offset 2842 was first
    acknowledged, its heir 3 s later, and the offset was acknowledged again for another value. The
    heir's kill was active at neither acknowledgement; the sentence names it between them. A fault
    after the second acknowledgement is not named."""
    from tests.analysis.histories import Builder, write_run

    b = Builder()
    b.assign(5, [0])
    b.send(0, 0, 10, 0)
    b.add("nemesis", "info", "kill", {"target": "leader", "targets": [2], "roles": {"2": ["leader:queue-0"]}, "partition": "queue-0"})
    b.add("nemesis", "info", "kill", {"target": "heir", "targets": [1], "roles": {"1": []}, "partition": "queue-0",
                                      "heir_of": 2, "step": "heir: the replica the controller elects next"})
    b.add("nemesis", "info", "restart", {"targets": [2]})
    b.add("nemesis", "info", "restart", {"targets": [1]})
    b.send(0, 0, 11, 0)  # offset 0 again
    b.add("nemesis", "info", "kill", {"target": "one", "targets": [3], "roles": {}})
    b.poll(5, [(0, 0, 11)])
    b.add("nemesis", "info", "restart", {"targets": [3]})
    for e in b.events:  # one event a second, as a run's faults are seconds apart
        e["time"] *= 10**6
    run_dir = write_run(tmp_path, b.events, {"history_start_utc": "2026-11-25T03:07:19.000000+00:00"})
    examples = explain.examples_from_findings(reference.findings(b.events))
    got = explain.explain(run_dir, examples, {"topic": "queue"})["examples"]["inconsistent-offsets"][0]
    assert [f["targets"] for f in got["faults_after"]] == [[2], [1]]  # both struck after the first acknowledgement
    heir = got["faults_after"][1]
    assert heir["target"] == "heir" and heir["heir_of"] == 2
    assert "then, between the acknowledgements, broker 2 (leader when struck) was killed at" in got["sentence"]
    assert "(t=4.000 s); broker 1 (the replica to be elected after broker 2) was killed at" in got["sentence"]
    assert "broker 3" not in got["sentence"]


def _offsets_explained(tmp_path: Path, events: list[dict[str, Any]], logs: dict[str, list[str]]) -> dict[str, Any]:
    """The first inconsistent-offsets example's explanation of a history built in seconds (times
    scaled to µs; history start 03:07:19 UTC), with these broker logs (broker id: server.log lines)."""
    from tests.analysis.histories import write_run

    for e in events:
        e["time"] *= 10**6
    run_dir = write_run(tmp_path, events, {"history_start_utc": "2026-11-25T03:07:19.000000+00:00"})
    for broker, lines in logs.items():
        (run_dir / "brokers" / broker).mkdir(parents=True)
        (run_dir / "brokers" / broker / "server.log").write_text("\n".join(lines) + "\n")
    examples = explain.examples_from_findings(reference.findings(events))
    config = {"topic": "queue", "history_start_utc": "2026-11-25T03:07:19.000000+00:00"}
    return explain.explain(run_dir, examples, config)["examples"]["inconsistent-offsets"][0]


def test_an_unclean_election_of_a_power_cut_leader_is_named_with_its_empty_log(tmp_path: Path) -> None:
    """4.4.0, the first campaign (2026-11-27): broker 3 led queue-0 when a power cut dropped what
    it had not fsynced; a minute later, no in-sync or eligible replica being unfenced, the
    controller elected it again as the last known leader, its log empty, and offset 0 went to
    another value. The sentence names that election (once, though every controller logs it again
    when it replays the metadata), the log end offset broker 3 loaded, and the cut that dropped
    data; an election into an epoch before the first value's is not named."""
    from tests.analysis.histories import Builder

    b = Builder()
    b.assign(5, [0])
    b.send(0, 0, 10, 0)  # t=2 s
    b.add(5, "invoke", "poll", None)
    b.add(5, "ok", "poll", {"records": [{"key": 0, "offset": 0, "value": 10, "epoch": 1}]})
    b.add("nemesis", "info", "power-off", {"target": "leader", "targets": [3], "roles": {"3": ["leader:queue-0"]},
                                           "dropped": {"3": {"dropped_bytes": 6539, "dropped_files": 65, "dropped_names": [
                                               {"path": "/data/queue-0/00000000000000000000.log", "what": "vanished", "bytes": 80},
                                               {"path": "/data/queue-10", "what": "entry", "bytes": 0},  # another partition
                                               {"path": "/data/queue-0", "what": "entry", "bytes": 0}]}}})  # t=5 s
    b.add("nemesis", "info", "power-on", {"targets": [3]})
    for _ in range(4):
        b.add("nemesis", "info", "observed", {})  # t=7-10 s: the election comes at t=10.5 s
    b.send(0, 0, 11, 0)  # t=11 s: offset 0 again
    b.add(5, "invoke", "poll", None)
    b.add(5, "ok", "poll", {"records": [{"key": 0, "offset": 0, "value": 11, "epoch": 2}]})
    change = ("INFO [QuorumController id={c}] UNCLEAN partition change for queue-0 with topic ID gdbX: isr: [] -> [3], "
              "leader: -1 -> 3, leaderRecoveryState: RECOVERED -> RECOVERING, leaderEpoch: {a} -> {b}, elr: [2] -> [], "
              "lastKnownElr: [3] -> [], partitionEpoch: 4 -> 5 (org.apache.kafka.controller.ReplicationControlManager)")
    logs = {"1": [f"[2026-11-25T03:07:29,500] {change.format(c=1, a=1, b=2)}",  # the active controller, t=10.5 s
                  f"[2026-11-25T03:07:21,000] {change.format(c=1, a=0, b=1)}"],  # into epoch 1: before value 10's
            "2": [f"[2026-11-25T03:09:00,000] {change.format(c=2, a=1, b=2)}"],  # a replay, minutes later
            "3": ["[2026-11-25T03:07:27,000] INFO Completed load of Log(dir=/var/lib/kafka/data/queue-0, topicId=gdbX, "
                  "topic=queue, partition=0, highWatermark=0, lastStableOffset=0, logStartOffset=0, logEndOffset=0) "
                  "with 1 segments (kafka.log.LogManager)"]}
    got = _offsets_explained(tmp_path, b.events, logs)
    assert [(e["leader"], e["epoch"], e["file"]) for e in got["unclean_elections"]] == [(3, 2, "brokers/1/server.log")]
    election = got["unclean_elections"][0]
    assert election["t_s"] == 10.5 and election["loaded"]["log_end_offset"] == 0
    assert election["power_cuts"]["count"] == 1 and election["power_cuts"]["dropping"][0]["dropped_bytes"] == 6539
    assert ("broker 3 was made leader of queue-0 by an unclean election at 03:07:29.500 UTC (t=10.500 s) (leader "
            "epoch 2, recovery state RECOVERING") in got["sentence"]
    assert "loaded at log end offset 0 (brokers/3/server.log line 1)" in got["sentence"]
    assert ("dropping 6,539 bytes and 65 files it had not fsynced, among them /data/queue-0 (its name, never fsynced), "
            "/data/queue-0/00000000000000000000.log (gone with its directory, 80 bytes)") in got["sentence"]
    assert "queue-10" not in got["sentence"]


def test_an_unclean_election_of_a_broker_on_a_replaced_disk_names_the_swap_and_the_new_log(tmp_path: Path) -> None:
    """4.4.0, the campaign's seed 5 (2026-11-27): membership replaced broker 3's disk; broker 3 created
    queue-0's log again, empty, and the controller elected it as the last known leader. The sentence
    says the log was created anew (not "loaded at log end offset 0") and when the disk was replaced;
    a swap of another broker is not named."""
    from tests.analysis.histories import Builder

    b = Builder()
    b.assign(5, [0])
    b.send(0, 0, 10, 0)  # t=2 s
    b.add(5, "invoke", "poll", None)
    b.add(5, "ok", "poll", {"records": [{"key": 0, "offset": 0, "value": 10, "epoch": 1}]})
    b.add("nemesis", "info", "disk-swap", {"targets": [3], "op": "swap-disk"})  # t=6 s
    b.add("nemesis", "info", "disk-swapped", {"targets": [3], "formatted": True})
    b.add("nemesis", "info", "disk-swap", {"targets": [2], "op": "swap-disk"})  # t=8 s: not the elected broker
    b.add("nemesis", "info", "disk-swapped", {"targets": [2], "formatted": True})
    for _ in range(2):
        b.add("nemesis", "info", "observed", {})
    b.send(0, 0, 11, 0)  # t=11 s: offset 0 again
    b.add(5, "invoke", "poll", None)
    b.add(5, "ok", "poll", {"records": [{"key": 0, "offset": 0, "value": 11, "epoch": 2}]})
    logs = {"1": ["[2026-11-25T03:07:29,500] INFO [QuorumController id=1] UNCLEAN partition change for queue-0 with topic "
                  "ID gdbX: isr: [] -> [3], leader: -1 -> 3, leaderRecoveryState: RECOVERED -> RECOVERING, leaderEpoch: 1 "
                  "-> 2, lastKnownElr: [3] -> [], partitionEpoch: 4 -> 5 (org.apache.kafka.controller.ReplicationControlManager)"],
            "3": ["[2026-11-25T03:07:20,000] INFO Completed load of Log(dir=/var/lib/kafka/data/queue-0, topicId=gdbX, "
                  "topic=queue, partition=0, logEndOffset=1) with 1 segments (kafka.log.LogManager)",  # before the swap
                  "[2026-11-25T03:07:26,000] INFO Created log for partition queue-0 in /var/lib/kafka/data/queue-0 with "
                  "properties {} (org.apache.kafka.storage.internals.log.LogManager)"],
            "2": ["[2026-11-25T03:07:23,000] INFO [Broker id=2] Follower queue-0 starts at leader epoch 1 from offset 111 with "
                  "partition epoch 4 and high watermark 0. Current leader is -1. (state.change.logger)",
                  "[2026-11-25T03:07:31,000] INFO [Broker id=2] Follower queue-0 starts at leader epoch 2 from offset 0 with "
                  "partition epoch 5 and high watermark 0. Current leader is 3. (state.change.logger)"]}  # after: not "then"
    got = _offsets_explained(tmp_path, b.events, logs)
    election = got["unclean_elections"][0]
    assert election["loaded"] == {"log_end_offset": 0, "created": True, "file": "brokers/3/server.log", "line": 2, "t_s": 7.0}
    assert [d["t_s"] for d in election["disk_swaps"]] == [6.0] and "power_cuts" not in election
    assert "with its log of queue-0 created anew, empty (brokers/3/server.log line 2)" in got["sentence"]
    assert "its data disk had been replaced since the acknowledgement, at 03:07:25.000 UTC (t=6.000 s)" in got["sentence"]
    assert "loaded at log end offset" not in got["sentence"]
    assert election["others_held"] == [{"broker": 2, "log_end_offset": 111, "file": "brokers/2/server.log", "line": 1}]
    assert ", while other replicas held queue-0 further: broker 2 to offset 111 (brokers/2/server.log line 1)" in got["sentence"]
