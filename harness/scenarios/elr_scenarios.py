"""KIP-966 after a reassignment: a shrink keeps the removed replicas in the ELR.

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
"""

from __future__ import annotations

import time
from typing import Any

from harness.cluster import grow
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
]
