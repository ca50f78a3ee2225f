"""The log half of the abstract state (nemesis/guided/loglines.py) on real broker lines.

Every line below was copied from a real server.log on this machine, 2026-11-26: 4.4.0 from run
20261125T190225-391024 (kill, partition, pause), 0.10.2.2 from the KIP-101 scenario test's run
20261126T011635-e346ac, 1.1.1 from run 20261126T030200-e3a2f0 and the lines docs/detection.md quotes.
3.9.2 from the KAFKA-17754 scenario runs 20261126T060741-8891c3 and 20261126T062646-49d886; the
4.4.0 "ISR updated to" lines from the roll run 20261126T014609-acbcc6."""

from __future__ import annotations

import pytest

from nemesis.guided.loglines import Fact, IsrSizes, LogTail, classify

REAL = [
    # (line, topic, kind, partition)
    ("[2026-11-25T19:04:10,295] INFO [Partition queue-3 broker=3] Shrinking ISR from 3,2,1 to 2,3. Leader: (highWatermark: 282, "
     "endOffset: 648). Out of sync replicas: (brokerId: 1, endOffset: 282, lastCaughtUpTimeMs: 1795633418117). (kafka.cluster.Partition)",
     "queue", "isr-shrink", 3),
    ("[2026-11-26 01:17:39,291] INFO Partition [scenario,0] on broker 2: Expanding ISR for partition scenario-0 from 2 to 2,3 "
     "(kafka.cluster.Partition)", "scenario", "isr-expand", 0),
    ("[2026-11-26 01:16:42,922] INFO Truncating log scenario-0 to offset 0. (kafka.log.Log)", "scenario", "truncate", 0),
    ("[2026-11-25T19:03:30,644] INFO [ReplicaFetcher replicaId=1, leaderId=3, fetcherId=0] Truncating partition queue-3 with "
     "TruncationState(offset=0, completed=true) due to local high watermark 0 (kafka.server.ReplicaFetcherThread)",
     "queue", "truncate-hw", 3),
    ("[2026-11-25T19:03:30,658] INFO [UnifiedLog partition=queue-3, dir=/var/lib/kafka/data] Truncating to 0 has no effect as the "
     "largest offset in the log is -1 (org.apache.kafka.storage.internals.log.UnifiedLog)", "queue", "truncate-noop", 3),
    ("[2026-11-25T19:04:47,956] INFO [UnifiedLog partition=queue-0, dir=/var/lib/kafka/data] Truncating to offset 0 "
     "(org.apache.kafka.storage.internals.log.UnifiedLog)", "queue", "truncate", 0),
    ("[2026-11-26 01:17:00,058] INFO [OfflinePartitionLeaderSelector]: Selected new leader and ISR {\"leader\":4,\"leader_epoch\":1,"
     "\"isr\":[4,2]} for offline partition [scenario,0] (kafka.controller.OfflinePartitionLeaderSelector)", "scenario", "leader", 0),
    ("[2026-11-25T19:03:27,659] INFO [Broker id=1] Leader queue-5 with topic id Some(ikw7Pg2SRaaMKzEU04dSZg) starts at leader epoch 0 "
     "from offset 0 with partition epoch 0, high watermark 0, ISR [1,3,2], adding replicas [] and removing replicas [] . Previous "
     "leader None and previous leader epoch was -1. (state.change.logger)", "queue", "leader", 5),
    ("[2026-11-25T19:03:28,528] INFO [Broker id=1] Follower queue-3 starts at leader epoch 0 from offset 0 with partition epoch 0 and "
     "high watermark 0. Current leader is 3. Previous leader None and previous leader epoch was -1. (state.change.logger)",
     "queue", "follower", 3),
    ("[2026-11-25T19:04:39,987] INFO [QuorumController id=3] Fencing broker 2 at epoch 10 because its session has timed out. "
     "(org.apache.kafka.controller.ReplicationControlManager)", "queue", "fenced", None),
    ("[2026-11-25T19:03:24,831] INFO [BrokerLifecycleManager id=1] The broker has been unfenced. Transitioning from RECOVERY to "
     "RUNNING. (org.apache.kafka.server.BrokerLifecycleManager)", "queue", "unfenced", None),
    ("[2026-11-25T19:03:14,048] INFO [QuorumController id=1] Becoming the active controller at epoch 1, next write offset 1. "
     "(org.apache.kafka.controller.QuorumController)", "queue", "controller", None),
    ("[2026-11-26 01:16:40,968] INFO [Controller 1]: Controller startup complete (kafka.controller.KafkaController)",
     "scenario", "controller", None),
    ("[2026-11-26 01:16:41,205] INFO [Kafka Server 1], started (kafka.server.KafkaServer)", "scenario", "startup", None),
    ("[2026-11-25T19:03:24,874] INFO [KafkaRaftServer nodeId=1] Kafka Server started (kafka.server.KafkaRaftServer)",
     "queue", "startup", None),
    # 0.10.2.2, guided run 20261126T023504-5231cd: not an unclean election, the opposite.
    ("[2026-11-26 02:37:08,425] INFO [Controller 3]: Retaining last ISR 2 of partition [queue,1] since unclean leader election "
     "is disabled (kafka.controller.KafkaController)", "queue", "offline", 1),
    # 1.1.1, random run 20261126T030200-e3a2f0 (2026-11-26):
    ("[2026-11-26 03:02:17,058] INFO [Partition queue-7 broker=1] queue-7 starts at Leader Epoch 0 from offset 0. Previous Leader "
     "Epoch was: -1 (kafka.cluster.Partition)", "queue", "leader", 7),
    ("[2026-11-26 03:04:35,475] INFO [Partition queue-4 broker=1] Expanding ISR from 3,1 to 3,1,2 (kafka.cluster.Partition)",
     "queue", "isr-expand", 4),
    ("[2026-11-26 03:02:36,074] INFO [Partition queue-0 broker=2] Shrinking ISR from 2,3,1 to 2,3 (kafka.cluster.Partition)",
     "queue", "isr-shrink", 0),
    ("[2026-11-26 03:02:17,998] INFO [Log partition=queue-3, dir=/var/lib/kafka/data] Truncating to 0 has no effect as the largest "
     "offset in the log is -1 (kafka.log.Log)", "queue", "truncate-noop", 3),
    ("[2026-11-26 03:04:17,097] INFO [Log partition=queue-7, dir=/var/lib/kafka/data] Truncating to offset 5301 (kafka.log.Log)",
     "queue", "truncate", 7),
    ("[2026-11-26 03:02:14,948] INFO [Controller id=1] 1 successfully elected as the controller (kafka.controller.KafkaController)",
     "queue", "controller", None),
    ("[2026-11-26 03:02:15,535] INFO [KafkaServer id=1] started (kafka.server.KafkaServer)", "queue", "startup", None),
    # 3.9.2, KAFKA-17754 scenario runs (2026-11-26): the same shapes as 4.x, with kafka.log.UnifiedLog.
    ("[2026-11-26 06:08:04,745] INFO [ReplicaFetcher replicaId=3, leaderId=1, fetcherId=0] Truncating partition scenario-0 with "
     "TruncationState(offset=0, completed=true) due to local high watermark 0 (kafka.server.ReplicaFetcherThread)",
     "scenario", "truncate-hw", 0),
    ("[2026-11-26 06:08:04,746] INFO [UnifiedLog partition=scenario-0, dir=/var/lib/kafka/data] Truncating to 0 has no effect as "
     "the largest offset in the log is -1 (kafka.log.UnifiedLog)", "scenario", "truncate-noop", 0),
    ("[2026-11-26 06:08:04,202] INFO [Broker id=1] Leader scenario-0 with topic id Some(R4V66O2UT-Gi_um3M_VysA) starts at leader "
     "epoch 0 from offset 0 with partition epoch 0, high watermark 0, ISR [1,2,3], adding replicas [] and removing replicas [] . "
     "Previous leader None and previous leader epoch was -1. (state.change.logger)", "scenario", "leader", 0),
    ("[2026-11-26 06:07:55,631] INFO [BrokerServer id=3] Transition from STARTING to STARTED (kafka.server.BrokerServer)",
     "scenario", "startup", None),
    ("[2026-11-26 06:07:52,745] INFO [QuorumController id=3] In the new epoch 1, the leader is (none). "
     "(org.apache.kafka.controller.QuorumController)", "scenario", "controller", None),
    # 4.4.0 roll run: an ISR the controller changed; IsrSizes makes it a shrink or an expand.
    ("[2026-11-26T01:47:20,617] INFO [Partition queue-7 broker=1] ISR updated to 3,1  and version updated to 7 "
     "(kafka.cluster.Partition)", "queue", "isr-updated", 7),
    # docs/detection.md and docs/nemesis.md quote these (1.1.1, 0.10.2.2):
    ("[2026-11-25 00:05:31,337] INFO [Partition queue-1 broker=3] queue-1 starts at Leader Epoch 2 from offset 581. Previous Leader "
     "Epoch was: 1 (kafka.cluster.Partition)", "queue", "leader", 1),
    ("[2026-11-25 00:52:11,002] FATAL [ReplicaFetcherThread-0-3], Exiting because log truncation is not allowed for partition "
     "queue-0, Current leader 3's latest offset 5173 is less than replica 1's latest offset 5212 (kafka.server.ReplicaFetcherThread)",
     "queue", "truncation-refused", 0),
]


@pytest.mark.parametrize("line,topic,kind,partition", REAL, ids=[f"{k}-{i}" for i, (_, _, k, _) in enumerate(REAL)])
def test_each_real_line_is_the_fact_it_states(line: str, topic: str, kind: str, partition: int | None) -> None:
    fact = classify(line, topic, broker=2)
    assert fact is not None, line
    assert (fact.kind, fact.partition, fact.broker) == (kind, partition, 2)


@pytest.mark.parametrize("line", [
    # Another topic's partition: not the workload's state.
    "[2026-11-25T19:03:30,644] INFO [ReplicaFetcher replicaId=1, leaderId=3, fetcherId=0] Truncating partition __consumer_offsets-7 "
    "with TruncationState(offset=0, completed=true) due to local high watermark 0 (kafka.server.ReplicaFetcherThread)",
    # A configuration dump at start-up names unclean election without one happening.
    "\tunclean.leader.election.enable = false",
    "[2026-11-25T19:03:14,048] INFO [QuorumController id=1] Periodic task electUnclean generated 0 records in 11 microseconds. "
    "(org.apache.kafka.controller.PeriodicTaskControlManager)",
    # queue-30 is not queue-3's, and a line about nothing we know is nothing.
    "[2026-11-25T19:04:10,295] INFO Recorded new KRaft controller, from now on will use node kafka-1:9093 (id: 1 rack: null isFenced: false)",
])
def test_lines_that_state_nothing_about_the_workload_are_dropped(line: str) -> None:
    assert classify(line, "queue") is None


def test_a_partition_number_is_read_whole() -> None:
    fact = classify("[x] INFO [Partition queue-13 broker=3] Shrinking ISR from 3,2,1 to 2,3.", "queue")
    assert fact is not None and fact.partition == 13


class _Node:
    """A node whose server.log is a local file (DockerTransport reads the bind-mounted file the same way)."""

    def __init__(self, path) -> None:  # type: ignore[no-untyped-def]
        self.path = path

    def read_log(self, offset: int = 0, name: str = "server.log") -> tuple[str, int]:
        with open(self.path, "rb") as f:
            f.seek(offset)
            data = f.read()
            return data.decode(), f.tell()


def test_the_tail_returns_whole_lines_once_and_starts_again_after_a_rotation(tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "server.log"
    log.write_text("old line\n")
    tail = LogTail(_Node(log))
    tail.start_at_end()
    with open(log, "a") as f:
        f.write("first\nsecond half")
    assert tail.lines() == ["first"]
    with open(log, "a") as f:
        f.write(" done\n")
    assert tail.lines() == ["second half done"]
    assert tail.lines() == []

    class _Transport:
        def size(self, name: str) -> int:
            return log.stat().st_size

    node = _Node(log)
    node.transport = _Transport()  # type: ignore[attr-defined]
    tail = LogTail(node)
    tail.start_at_end()
    log.write_text("rotated\n")  # log4j moved the old file away: a new, shorter one
    assert tail.lines() == ["rotated"]


def test_observed_events_are_valid_v1_and_no_fault_nor_marker_on_the_timeline() -> None:
    from analysis.explain.timeline import faults_from
    from harness.history.format import strict_problem

    good = {"index": 5, "time": 9, "process": "nemesis", "type": "info", "f": "observed",
            "value": {"states": {"queue-3": "kill|L:hit|isr2|trunc-hw|w0"}, "distinct_states": 4, "distinct_transitions": 3}}
    assert strict_problem(good) is None
    assert strict_problem({**good, "value": {"states": ["queue-3"]}}) is not None
    kill = {"t": 1.0, "f": "kill", "value": {"targets": [2]}}
    faults, markers = faults_from([kill, {"t": 2.0, "f": "observed", "value": good["value"]}], 10.0)
    assert len(faults) == 1 and markers == []


def test_an_isr_updated_line_is_a_shrink_or_an_expand_by_the_size_before_it() -> None:
    """queue-7 through the 4.4.0 roll run 20261126T014609-acbcc6, in the order its leaders logged it."""
    lines = [
        ("[2026-11-26T01:46:50,543] INFO [Partition queue-7 broker=3] ISR updated to 2,3,1  and version updated to 4 "
         "(kafka.cluster.Partition)", 3, "isr-updated"),  # first line, nothing larger seen yet: no way to tell
        ("[2026-11-26T01:47:20,617] INFO [Partition queue-7 broker=1] ISR updated to 3,1  and version updated to 7 "
         "(kafka.cluster.Partition)", 1, "isr-shrink"),
        ("[2026-11-26T01:47:40,471] INFO [Partition queue-7 broker=2] ISR updated to 3,2  and version updated to 11 "
         "(kafka.cluster.Partition)", 2, "isr-updated"),  # one replica for another: neither
        ("[2026-11-26T01:48:34,806] INFO [Partition queue-7 broker=1] ISR updated to 1,3,2  and version updated to 17 "
         "(kafka.cluster.Partition)", 1, "isr-expand"),
    ]
    sizes = IsrSizes()
    assert [sizes.resolve(line, classify(line, "queue", broker)).kind for line, broker, _ in lines] == [k for _, _, k in lines]


def test_an_isr_first_heard_of_below_the_whole_size_shrank_and_other_facts_pass_through() -> None:
    sizes = IsrSizes()
    sizes.saw(3)  # the metadata's look: RF 3, whole
    line = "[t] INFO [Partition queue-2 broker=1] ISR updated to 1,3  and version updated to 9 (kafka.cluster.Partition)"
    assert sizes.resolve(line, classify(line, "queue", 1)) == Fact("isr-shrink", 2, 1)
    shrink = "[t] INFO [Partition queue-2 broker=1] Shrinking ISR from 1,3 to 1. Leader: (highWatermark: 5) (kafka.cluster.Partition)"
    assert sizes.resolve(shrink, classify(shrink, "queue", 1)).kind == "isr-shrink"
    back = "[t] INFO [Partition queue-2 broker=1] ISR updated to 1,3  and version updated to 10 (kafka.cluster.Partition)"
    assert sizes.resolve(back, classify(back, "queue", 1)).kind == "isr-expand"  # from the Shrinking line's 1
    other = Fact("truncate", 2, 1)
    assert sizes.resolve("Truncating to offset 5", other) is other and sizes.resolve("x", None) is None


def test_an_isr_the_controller_changed_alone_is_read_from_the_replicas_skipped_state_change_lines() -> None:
    """3.9.2 and 4.4.0 log an ISR the controller changed by itself (a fenced broker taken out) only in
    each replica's "Skipped the become-... state change" line; real lines from the false-alarm runs of
    2026-11-28 (3.9.2 20261128T072721-04e20c, 4.4.0 20261128T050603-6a6824). An ELR line stays an
    `elr` fact, and its ISR is the size the next line is compared with."""
    lines = [
        ("[2026-11-28 07:28:23,004] INFO [Broker id=1] Skipped the become-follower state change for queue-4 with topic id "
         "Some(LKA6KXGJS82dgjBTZ2UYZA) and partition state LeaderAndIsrPartitionState(topicName='queue', partitionIndex=4, "
         "controllerEpoch=-1, leader=3, leaderEpoch=0, isr=[3], partitionEpoch=2, replicas=[3, 1, 2], addingReplicas=[], "
         "removingReplicas=[], isNew=false, leaderRecoveryState=0) since it is already a follower with leader epoch 0. "
         "(state.change.logger)", 1, ("isr-shrink", 4)),
        ("[2026-11-28 07:29:58,780] INFO [Broker id=1] Skipped the become-leader state change for queue-4 with topic id "
         "Some(LKA6KXGJS82dgjBTZ2UYZA) and partition state LeaderAndIsrPartitionState(topicName='queue', partitionIndex=4, "
         "controllerEpoch=-1, leader=1, leaderEpoch=4, isr=[1, 2], partitionEpoch=7, replicas=[2, 3, 1], addingReplicas=[], "
         "removingReplicas=[], isNew=false, leaderRecoveryState=0) since it is already the leader with leader epoch 4. "
         "Current high watermark 7478, ISR [1,2], adding replicas [] and removing replicas []. (state.change.logger)", 1,
         ("isr-expand", 4)),
        ("[2026-11-28T05:07:30,622] INFO [Broker id=1] Skipped the become-follower state change for queue-5 with topic id "
         "Some(m0qnHSQEQmmJLMpNFoOXPw), partition registration PartitionRegistration(replicas=[3, 2, 1], directories=[c6PvFH_M"
         "ExV0QJUKljgREA, qm3OIIAJ3NgyrsMEvQsn-A, Qm7Sm427eMU2iV6hHtiocA], isr=[], removingReplicas=[], addingReplicas=[], "
         "elr=[3], lastKnownElr=[1], leader=-1, leaderRecoveryState=RECOVERED, leaderEpoch=2, partitionEpoch=4) and "
         "isNew=false since it is already a follower with leader epoch 2. (state.change.logger)", 1, ("elr", 5)),
        ("[2026-11-28T05:08:37,236] INFO [Broker id=1] Skipped the become-follower state change for queue-5 with topic id "
         "Some(m0qnHSQEQmmJLMpNFoOXPw), partition registration PartitionRegistration(replicas=[3, 2, 1], directories=[c6PvFH_M"
         "ExV0QJUKljgREA, qm3OIIAJ3NgyrsMEvQsn-A, Qm7Sm427eMU2iV6hHtiocA], isr=[2], removingReplicas=[], addingReplicas=[], "
         "elr=[], lastKnownElr=[], leader=2, leaderRecoveryState=RECOVERED, leaderEpoch=4, partitionEpoch=9) and "
         "isNew=false since it is already a follower with leader epoch 4. (state.change.logger)", 1, ("isr-expand", 5)),
    ]
    sizes = IsrSizes()
    sizes.saw(3)
    facts = [sizes.resolve(line, classify(line, "queue", broker)) for line, broker, _ in lines]
    assert [(f.kind, f.partition) for f in facts] == [k for _, _, k in lines]  # queue-5: ISR [] (the ELR line), then [2]
    sizes, again = IsrSizes(), lines[0][0].replace("[Broker id=1]", "[Broker id=2]")  # the other replica's line
    sizes.saw(3)
    assert [sizes.resolve(x, classify(x, "queue", 1)).kind for x in (lines[0][0], again)] == ["isr-shrink", "isr-updated"]
