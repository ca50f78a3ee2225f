"""KIP-966's elections after an operator's action: a shrink that keeps removed replicas in the ELR,
and a replaced disk whose broker is elected as the last known leader.

**kip966-shrink-stale-elr.**

Found by the `reassign` nemesis on 4.4.0 (run 20261127T022341-3dc2f3, docs/findings.md): queue-5 was
shrunk from [3, 2, 1] to [2], broker 2 was killed in flight, and after its restart the partition was
`replicas=[2], isr=[], elr=[1, 3], lastKnownElr=[2], leader=-1` until the run ended. Kafka's
PartitionChangeBuilder.maybePopulateTargetElr takes the old ISR into the ELR once the ISR falls below
min.insync.replicas, and filters out the new ISR and unclean-shutdown replicas, but not the replicas
the completed reassignment removed (4.4.0's kafka-metadata jar, read with javap). Those stale
members then block both ways out: an ELR leader must be a replica, and the last known leader is
only elected when the ELR is empty (canElectLastKnownLeader). Kafka's ELR documentation says the
last known leader is elected once it is unfenced.

The scenario, with a control in the same cluster and the same kill: the topic's partition, replicas
[A, B, C] and min.insync.replicas 2, is shrunk to [B]; a control topic is created with its one
replica on B from the start. B is SIGKILLed (an unclean shutdown), fenced, and started again.

**kip966-replaced-disk** (and its control, **kip966-replaced-disk-kept**). Found by the 4.4.0
campaign (seed 5, run 20261127T121848-1e772b, docs/campaigns.md): a broker whose disk `membership`
had replaced was elected as the partition's last known leader, on its empty disk, and the other
replicas truncated every acknowledged record. The scenario keeps only the order: replicas [A, B, C],
min.insync.replicas 2, flush.messages 1 (every append fsynced: no power model matters); A, then B,
then C (the last in the ISR) are SIGKILLed. C's data directory is emptied and formatted again (a new
directory id, KIP-858) and C starts alone; then A and B start. The control keeps C's disk.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from harness.cluster import grow
from harness.cluster.broker_config import DATA_DIR
from harness.cluster.node import empty_data_dir
from harness.history.faults import DISK_SWAP
from harness.scenarios import Scenario
from harness.scenarios.context import ScenarioContext
from harness.scenarios.library import _wait_hw
from harness.scenarios.power_scenarios import FENCE_WAIT_S, STANDING_TOPIC, _tool_main, describe_partition, features, log_lines
from nemesis import steps

CONTROL = "control"  # one replica on B from its creation: its ELR never held A or C
BACK_WAIT_S = 120.0  # after B's restart; the control's leader came back within 20 s (4.4.0, 2026-11-27)


def _ids(field: str | None) -> list[int]:
    return [int(x) for x in (field or "").split(",") if x.strip().lstrip("-").isdigit()]


def stale(fields: dict[str, str]) -> list[int]:
    """ELR members that are not replicas of the partition (KIP-966 elects ELR members as replicas)."""
    return sorted(set(_ids(fields.get("Elr"))) - set(_ids(fields.get("Replicas"))))


def led(fields: dict[str, str]) -> bool:
    return fields.get("Leader", "none") not in ("none", "-1", "")


def shrink_then_crash(ctx: ScenarioContext) -> dict[str, Any]:
    A, B, C, D = ctx.A, ctx.B, ctx.C, ctx.D
    if not ctx.cluster.is_kraft or D is None:
        ctx.fail(f"KIP-966 (ELR) is KRaft-only; Kafka {ctx.version} runs in ZooKeeper mode here: use 4.1 or later")
    if not ctx.at_least("3.8"):
        ctx.fail(f"kafka-topics shows the ELR from 3.8 (DescribeTopicPartitions); Kafka {ctx.version} is older")
    levels = features(ctx)
    ctx.create_topic([A, B, C], STANDING_TOPIC)
    ctx.wait_isr([A, B, C], 60)
    ctx.wait_leader(A, 60)
    code, out = ctx.tool(C, _tool_main(ctx, "TopicCommand"),
                         f"--bootstrap-server {C.hostname}:9092 --create --topic {CONTROL} --replica-assignment {B.node_id} "
                         f"--config min.insync.replicas=2 --config unclean.leader.election.enable=false")
    ctx.step(f"create topic {CONTROL}, one replica on {ctx.name(B)}", "scenario-setup", exit_code=code, output=out.strip()[-300:])
    ctx.write([f"p{i}" for i in range(5)], A)            # offsets 0..4, acknowledged by A, B and C
    _wait_hw(ctx, 5)
    code, out = grow.reassign(C, {f"{ctx.topic}-0": [B.node_id]}, ctx.version)
    ctx.step(f"reassign {ctx.topic}-0 to [{ctx.name(B)}] (3 replicas to 1)", exit_code=code, output=out.strip()[-300:])
    ctx.wait_for("replicas [B], B leading", lambda s: bool(s) and s["leader"] == B.node_id and s["replicas"] == [B.node_id], 60)
    shrunk = describe_partition(ctx, "after the shrink", via=C, topic=ctx.topic)
    ctx.kill(B)                                           # an unclean shutdown of the only replica of both topics
    time.sleep(FENCE_WAIT_S)
    ctx.step(f"waited {FENCE_WAIT_S:g} s: the controller fences B (broker.session.timeout.ms, 9 s)")
    down = describe_partition(ctx, "B down", via=C, topic=ctx.topic)
    control_down = describe_partition(ctx, "B down", via=C, topic=CONTROL)
    ctx.start(B)
    polled = steps.poll(lambda: (describe_partition(ctx, "B back?", via=C, topic=ctx.topic),
                                 describe_partition(ctx, "B back?", via=C, topic=CONTROL)),
                        lambda both: led(both[0]) and led(both[1]), BACK_WAIT_S, 10.0)
    after, control_after = polled.value
    ctx.step("waited for both leaders after B's restart", waited_s=round(polled.seconds, 1),
             topic_led=led(after), control_led=led(control_after))
    return {"features": levels, "partition_after_shrink": shrunk, "stale_elr_after_shrink": stale(shrunk),
            "partition_while_B_down": down, "control_while_B_down": control_down,
            "partition_after_B_back": after, "control_after_B_back": control_after,
            "leader_after_B_back": led(after), "control_leader_after_B_back": led(control_after),
            "waited_s": round(polled.seconds, 1), "log_lines": log_lines(ctx)}


def _shows(summary: dict[str, Any]) -> bool:
    o = summary["observations"]
    return bool(o.get("stale_elr_after_shrink")) and o.get("control_leader_after_B_back") and not o.get("leader_after_B_back")


RECORDS = 50         # acknowledged by A, B and C before the kills; the repro script used 500 (all lost)
ALONE_WAIT_S = 60.0  # C alone: on 4.4.0 no leader in 90 s in both legs of the repro (the ELR still named a down broker)


def directory_id(ctx: ScenarioContext, node: Any) -> str | None:
    """meta.properties' directory.id of the node's data directory (KIP-858), None where it has none."""
    code, out = node.exec(f"grep '^directory.id=' {DATA_DIR}/meta.properties 2>/dev/null")
    return out.strip().split("=", 1)[1] if code == 0 and "=" in out else None


def replace_disk(ctx: ScenarioContext, node: Any) -> None:
    """An operator's disk replacement on a broker-only node, as membership's swap-disk does it: every
    file of the data directory removed, `kafka-storage format` with the cluster's id, the broker started."""
    ctx.step(f"replace {ctx.name(node)}'s disk", DISK_SWAP.start, node=node.node_id, targets=[node.node_id])
    code, removed, out = empty_data_dir(node)
    if code != 0:
        ctx.fail(f"emptying {ctx.name(node)}'s data directory failed (exit {code}): {out.strip()[-300:]}")
    pid = node.start_process(format_cluster_id=ctx.cluster.cluster_id)
    ctx.step(f"formatted and started {ctx.name(node)}", DISK_SWAP.stop, node=node.node_id, targets=[node.node_id],
             pid=pid, removed=removed[:50], formatted=True)


def replaced_disk(ctx: ScenarioContext, disk: str = "replaced") -> dict[str, Any]:
    A, B, C, D = ctx.A, ctx.B, ctx.C, ctx.D
    if not ctx.cluster.is_kraft or D is None:
        ctx.fail(f"the last known leader is KRaft's; Kafka {ctx.version} runs in ZooKeeper mode here: use 3.3 or later")
    levels = features(ctx)
    ctx.create_topic([A, B, C], {**STANDING_TOPIC, "flush.messages": 1})
    ctx.wait_isr([A, B, C], 60)
    ctx.wait_leader(A, 60)
    written = ctx.write([f"r{i}" for i in range(RECORDS)], A)
    _wait_hw(ctx, RECORDS)
    ctx.kill(A)
    if ctx.wait_for("A out of the ISR", lambda s: bool(s) and A.node_id not in s["isr"] and s["leader"] >= 0, 60) is None:
        ctx.fail("A stayed in the ISR after its kill")
    ctx.kill(B)
    if ctx.wait_for("ISR [C]", lambda s: bool(s) and s["isr"] == [C.node_id], 60) is None:
        ctx.fail("the ISR did not shrink to C alone")
    last = describe_partition(ctx, "the ISR shrank to C", via=C)
    dir_before = directory_id(ctx, C)
    ctx.kill(C)                                           # the last in the ISR: every replica is down
    time.sleep(FENCE_WAIT_S)
    ctx.step(f"waited {FENCE_WAIT_S:g} s: the controller fences C (broker.session.timeout.ms, 9 s)")
    if disk == "replaced":
        replace_disk(ctx, C)
    else:
        ctx.start(C)
    dir_after = directory_id(ctx, C)
    ctx.wait_for("a leader with only C up", lambda s: bool(s) and s["leader"] >= 0, ALONE_WAIT_S)
    alone = describe_partition(ctx, "only C up", via=C)
    ctx.start(A)
    ctx.start(B)
    back = ctx.wait_for("a leader after A and B are back", lambda s: bool(s) and s["leader"] >= 0, BACK_WAIT_S)
    after = describe_partition(ctx, "A and B back", via=A)
    full = ctx.wait_isr([A, B, C], BACK_WAIT_S)
    return {"disk": disk, "features": levels, "acked": sum(w["acked"] for w in written),
            "directory_id_before": dir_before, "directory_id_after": dir_after, "partition_when_isr_was_C": last,
            "partition_with_only_C_up": alone, "leader_with_only_C_up": led(alone),
            "leader_after_A_and_B_back": None if back is None else ctx.name(ctx.cluster.node(back["leader"])),
            "partition_after_A_and_B_back": after, "isr_full_at_end": full is not None, "log_lines": log_lines(ctx)}


REPLACED_EXPECTED = {
    "4.4.0 (ELR on)": "no leader while C is alone (B is in the ELR); once A and B register after their kills the "
                      "controller drops B from the ELR (an unclean shutdown) and elects the last known leader, C, "
                      "on its empty disk: every acknowledged record lost (the repro, 2026-11-27: 500 of 500)",
    "before ELR (3.9.2)": "C stays the ISR's last member while fenced and is elected once it is unfenced",
    "expected by KIP-858 and KIP-966": "a replica whose directory is new holds nothing; it is not elected while "
                                       "replicas that hold every acknowledged record are coming back",
    "control (disk kept)": "C is elected with its disk: nothing lost (the repro: 500 of 500 read back)",
    "verdict": "invalid where acknowledged records are lost: acks=all, min.insync.replicas 2, RF 3, every append "
               "fsynced and unclean election off forbid it",
}

ELR_SCENARIOS: list[Scenario] = [
    Scenario(
        name="kip966-shrink-stale-elr", kip="KIP-966",
        description="A reassignment shrinks a partition from [A, B, C] to [B] (min.insync.replicas 2); B is killed and "
                    "started again. A control topic with its one replica on B from the start shares the kill.",
        bug_versions="ELR on (default for new clusters from 4.1): the shrink leaves A and C in the ELR",
        expected={"ELR on": "after the shrink Elr is [A, C] though Replicas is [B]; after B's unclean restart the control "
                            "topic elects B again (its last known leader) but the shrunk one stays leaderless, its ELR "
                            "still [A, C]: offline until an unclean election",
                  "expected by KIP-966 and Kafka's ELR documentation": "the ELR holds replicas only; the last known "
                                                                       "leader B is elected once unfenced, in both topics",
                  "verdict": "no acknowledged record is lost (B holds them); the final drain cannot read the partition"},
        steps=shrink_then_crash, acks="all", min_insync_replicas=2, unclean=False, replication_factor=3,
        controller_apart=True, needs_kraft=True, shows_bug=_shows,
    ),
    Scenario(
        name="kip966-replaced-disk", kip="KIP-966",
        description="Replicas [A, B, C] (min.insync.replicas 2, every append fsynced) are killed in turn, C last; C's "
                    "disk is replaced (emptied, formatted: a new directory id) and C starts alone, then A and B.",
        bug_versions="found on 4.4.0 (ELR on): the last known leader is elected on its replaced, empty disk",
        expected=REPLACED_EXPECTED, steps=replaced_disk, acks="all", min_insync_replicas=2, unclean=False,
        replication_factor=3, controller_apart=True, needs_kraft=True, shows_bug=lambda s: s["headline"]["lost"] > 0,
    ),
    Scenario(
        name="kip966-replaced-disk-kept", kip="KIP-966",
        description="kip966-replaced-disk's control: the same kills and starts, C's disk kept.",
        bug_versions="none expected: C keeps every record",
        expected=REPLACED_EXPECTED, steps=functools.partial(replaced_disk, disk="kept"), acks="all", min_insync_replicas=2,
        unclean=False, replication_factor=3, controller_apart=True, needs_kraft=True,
        shows_bug=lambda s: s["headline"]["lost"] > 0,
    ),
]
