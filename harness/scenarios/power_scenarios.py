"""The power-loss scenarios: KIP-101 scenario 2 and KIP-966's "last replica standing"
(docs/scenarios.md explains each against its KIP).

Both run with every Kafka node's data directory on lossyfs (`Scenario.lossy_data`,
docs/power.md). A power cut here is what the `power` nemesis does (nemesis/power.py): SIGKILL
the JVMs together, then drop on each disk every byte and name never fsynced (worst-case model).
What the kernel would have written back meanwhile is a step of its own, `writeback`: the
layer's `sync-all` on the disks named, at the moment the scenario says so. Every write,
writeback, cut and power event is recorded in the history like any other step.
"""

from __future__ import annotations

import functools
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.cluster.broker_config import DATA_DIR
from harness.cluster.node import Node
from harness.cluster.replicas import read_replica
from harness.history.faults import POWER
from harness.scenarios import Scenario
from harness.scenarios.context import CUT, ScenarioContext
from harness.scenarios.library import _unclean_bug, _wait_hw
from nemesis import steps
from nemesis.power import loss_model

CHECKPOINT_WAIT_S = 6.0  # replica.high.watermark.checkpoint.interval.ms is 5 s by default: one more checkpoint
ELR_FEATURE = "eligible.leader.replicas.version"


# --- power, writeback and what survived ---------------------------------------------------------------
def writeback(ctx: ScenarioContext, nodes: list[Node], why: str) -> None:
    """The kernel has written these nodes' dirty pages and names to disk (lossyfs sync-all)."""
    answers = {str(n.node_id): n.disk.sync_all() for n in nodes}
    ctx.step(f"writeback {'+'.join(ctx.name(n) for n in nodes)}: {why}", targets=[n.node_id for n in nodes], synced=answers)


def power_off(ctx: ScenarioContext, nodes: list[Node]) -> dict[str, Any]:
    """One power feed: SIGKILL the JVMs together, then each disk loses what was never made durable."""
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        pids = list(pool.map(steps.kill, nodes))
    dropped = {str(n.node_id): n.disk.drop() for n in nodes}  # every JVM is gone first
    return ctx.step(f"power off {'+'.join(ctx.name(n) for n in nodes)}", POWER.start, targets=[n.node_id for n in nodes],
                    pids={str(n.node_id): p for n, p in zip(nodes, pids)}, dropped=dropped,
                    dropped_bytes=sum(d["dropped_bytes"] for d in dropped.values()),
                    dropped_files=sum(d["dropped_files"] for d in dropped.values()),
                    model=loss_model(ctx.cluster.lossy_writeback_s))


def power_on(ctx: ScenarioContext, node: Node) -> None:
    pid = steps.start(node)  # on the same directory, as when power comes back
    ctx.step(f"power on {ctx.name(node)}", POWER.stop, node=node.node_id, targets=[node.node_id], pid=pid)


def on_disk(ctx: ScenarioContext, node: Node) -> dict[str, Any]:
    """What the replica on `node` holds on disk while its JVM is down: records (DumpLogSegments),
    leader-epoch-checkpoint and the high-watermark checkpoint's line for the partition."""
    replica = read_replica(node, ctx.topic, 0, ctx.version)
    _, hw = node.exec(f"grep '^{ctx.topic} 0 ' {DATA_DIR}/replication-offset-checkpoint 2>/dev/null")
    seen = {"records": [[o, v] for o, v, _ in replica["records"]], "log_end_offset": replica["log_end_offset"],
            "leader_epochs": replica["leader_epochs"], "hw_checkpoint": int(hw.split()[2]) if hw.strip() else None,
            "error": replica["error"]}
    ctx.step(f"on {ctx.name(node)}'s disk after the cut", node=node.node_id, **seen)
    return seen


LOG_WORDS = ("shrinking isr", "expanding isr", "truncat", "elr", "unclean", "starts at", "recover", "leader epoch",
             "divergen", "high watermark", "partition change")


def log_lines(ctx: ScenarioContext, limit: int = 25) -> dict[str, list[str]]:
    """Each node's server.log lines about the partition's ISR, ELR, elections and truncation
    (every line stays in brokers/<id>/server.log; these are the ones scenario.json quotes)."""
    out = {}
    for node in ctx.cluster.brokers + [c for c in ctx.cluster.controllers if c not in ctx.cluster.brokers]:
        text = node.read_log()[0].splitlines()
        hits = [ln[:400] for ln in text if f"{ctx.topic}-0" in ln or f"{ctx.topic}, partition" in ln
                if any(w in ln.lower() for w in LOG_WORDS)]
        if hits:
            out[ctx.name(node)] = hits[-limit:]
    return out


# --- KIP-101 scenario 2 ------------------------------------------------------------------------------
DIVERGENCE_TOPIC = {"min.insync.replicas": 1, "unclean.leader.election.enable": "true"}


def power_loss_divergence(ctx: ScenarioContext) -> dict[str, Any]:
    """A leads replicas [A, B]; D, the controller, holds none. m1 and then m2 reach both replicas
    (acks=all) and the high watermark passes each. The kernel had written m1 back on both disks
    but m2 only on A's. Power fails on A and B at once: B comes back with m1 alone, A with m1, m2
    and high-watermark checkpoint 2. B is back first and leads (any one might, says the KIP; the
    topic allows an unclean election in case the controller left A as the last ISR member) and
    takes m3 at offset 1 in its new epoch. Then A comes back as B's follower. Before 0.11 A
    truncates to its high watermark (2), keeps m2 at offset 1 and fetches from 2: the replicas
    diverge at offset 1. From 0.11 A asks B where epoch 0 ends (1), truncates m2 and fetches m3."""
    A, B = ctx.A, ctx.B
    ctx.create_topic([A, B], DIVERGENCE_TOPIC)
    ctx.wait_isr([A, B], 60)
    ctx.wait_leader(A, 60)
    ctx.write(["m1"], A)                                  # offset 0 on both
    _wait_hw(ctx, 1)
    time.sleep(CHECKPOINT_WAIT_S)                         # both high-watermark checkpoints say 1
    writeback(ctx, [A, B], "m1, the topic's files and high-watermark checkpoint 1 reach both disks")
    m2 = ctx.write(["m2"], A)                             # offset 1, acknowledged once B has it too
    _wait_hw(ctx, 2)
    time.sleep(CHECKPOINT_WAIT_S)                         # A's checkpoint says 2
    writeback(ctx, [A], "m2 and high-watermark checkpoint 2 reach A's disk; B's kernel has not written them yet")
    cut = power_off(ctx, [A, B])
    disks = {"A": on_disk(ctx, A), "B": on_disk(ctx, B)}
    before = ctx.wait_for("A and B out of the metadata's leadership", lambda s: bool(s) and s["leader"] not in (A.node_id, B.node_id), 40)
    power_on(ctx, B)
    ctx.wait_leader(B, 120, unclean=True)                 # B, with m1 alone, leads a new epoch
    m3 = ctx.write(["m3"], B)                             # B:1
    power_on(ctx, A)
    full = ctx.wait_isr([A, B], 90)
    return {"m2": m2[0], "m3": m3[0], "dropped": cut["dropped"], "on_disk_after_cut": disks,
            "isr_before_B_returned": None if before is None else before["isr"],
            "isr_full_after_A_returned": full is not None, "log_lines": log_lines(ctx)}


# --- KIP-966 "last replica standing" -------------------------------------------------------------------
STANDING_TOPIC = {"min.insync.replicas": 2, "unclean.leader.election.enable": "false"}
FENCE_WAIT_S = 15.0  # broker.session.timeout.ms (9 s) and a margin for the controller to fence a dead broker


def isolate(ctx: ScenarioContext, node: Node, peers: list[Node]) -> None:
    """Cut `node` from each of `peers` both ways. A follower is cut from the controller too: a
    follower whose log end equals the leader's is never out of sync, fetching or not (Kafka's
    isCaughtUp), so with no writes the leader alone never shrinks the ISR (measured on 4.3.1:
    ISR [1, 2, 3] 60 s after cutting A<->B); the controller fences it after the session timeout."""
    for n in [node] + peers:
        if not n.address:  # measured: the separate KRaft controller's address was "" (iptables: Bad argument `DROP')
            n.read_address(ctx.cluster.network)
            ctx.step(f"address of {ctx.name(n)} read again", node=n.node_id, address=n.address)
    for peer in peers:
        ctx.cut(node, peer)


def wait_view(ctx: ScenarioContext, node: Node, what: str, predicate: Any, timeout_s: float) -> dict[str, Any] | None:
    """Like ctx.wait_for, but by what `node` alone says: while B and C are cut from the controller
    their metadata is stale, and no majority of the brokers agrees on the partition (measured)."""
    def says() -> dict[str, Any] | None:
        view = ctx.cluster.broker_views().get(node.node_id)
        return None if view is None else view.topics.get(ctx.topic, {}).get(0)

    return ctx.waited(f"{what} (as {ctx.name(node)} says)", steps.poll(says, lambda state: bool(predicate(state)), timeout_s))


def heal_controllers(ctx: ScenarioContext) -> None:
    steps.heal([n for n in ctx.cluster.controllers if n not in ctx.cluster.brokers], CUT)


def heal_all(ctx: ScenarioContext) -> None:
    """ctx.heal() heals brokers; the controller's rules go too."""
    heal_controllers(ctx)
    ctx.heal()


def _tool_main(ctx: ScenarioContext, name: str) -> str:
    return f"org.apache.kafka.tools.{name}"  # the KIP-966 scenario needs KRaft (>= 3.3); both tools live here from 3.5


def parse_partition_line(out: str) -> dict[str, str]:
    """kafka-topics --describe's line for partition 0 as fields: Leader, Replicas, Isr, Elr, LastKnownElr."""
    line = next((ln for ln in out.splitlines() if "Partition: 0" in ln), "")
    return dict(re.findall(r"(\w+):[ ]*([^\t]*?)[ ]*(?=\t|$)", line))


def parse_features(out: str) -> dict[str, int]:
    """kafka-features describe: each feature's FinalizedVersionLevel."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"Feature:\s*(\S+)[^\n]*?FinalizedVersionLevel:\s*(-?\d+)(?=\s|$)", out)}


def describe_partition(ctx: ScenarioContext, what: str, via: Node | None = None, topic: str | None = None) -> dict[str, str]:
    """kafka-topics --describe of partition 0 of `topic` (default the scenario's; DescribeTopicPartitions
    from 3.8: it shows Elr and LastKnownElr), run inside and against `via` (default C), which must
    reach the controller."""
    via, topic = via or ctx.C, topic or ctx.topic
    code, out = ctx.tool(via, _tool_main(ctx, "TopicCommand"), f"--bootstrap-server {via.hostname}:9092 --describe --topic {topic}")
    fields = parse_partition_line(out)
    label = "partition" if topic == ctx.topic else topic
    ctx.step(f"describe {label}: {what}", exit_code=code, partition=fields, output=out.strip()[-300:] if not fields else None)
    return fields


def features(ctx: ScenarioContext) -> dict[str, int]:
    """Finalized feature levels (kafka-features describe); a feature it does not list is at 0."""
    code, out = ctx.tool(ctx.C, _tool_main(ctx, "FeatureCommand"), f"--bootstrap-server {ctx.C.hostname}:9092 describe")
    found = parse_features(out)
    ctx.step("finalized features", exit_code=code, features=found, output=out.strip()[-800:])
    return found


def elr_off(ctx: ScenarioContext) -> None:
    """eligible.leader.replicas.version=0, before the topic exists ("downgrades are safe", says
    Kafka's ELR documentation); the finalized level afterwards is the evidence."""
    if features(ctx).get(ELR_FEATURE, 0) == 0:
        ctx.step(f"{ELR_FEATURE} is already 0: ELR off")
        return
    code, out = ctx.tool(ctx.C, _tool_main(ctx, "FeatureCommand"),
                         f"--bootstrap-server {ctx.C.hostname}:9092 downgrade --feature {ELR_FEATURE}=0")
    ctx.step(f"kafka-features downgrade --feature {ELR_FEATURE}=0", exit_code=code, output=out.strip()[-600:])
    if features(ctx).get(ELR_FEATURE, 0) != 0:
        ctx.fail(f"{ELR_FEATURE} is still above 0 after the downgrade: {out.strip()[-300:]}")


def last_replica_standing(ctx: ScenarioContext, elr: str = "default") -> dict[str, Any]:
    try:
        return _last_replica_standing(ctx, elr)
    finally:  # the runner heals brokers only: a step that stops the scenario must not leave D cut
        heal_controllers(ctx)


def _last_replica_standing(ctx: ScenarioContext, elr: str) -> dict[str, Any]:
    """KIP-966's motivating example. Replicas [A, B, C], min.insync.replicas 2, acks=all, unclean
    election off; D, the controller, holds none. p0..p4 reach every disk; t0..t9 are acknowledged
    by all three replicas but stay in page caches. B, then C, is cut from A and from D: D fences
    each and the ISR shrinks to [A]. A loses power and with it t0..t9. B and C, alive all along, reach
    everyone again; A comes back. Without ELR A, the last ISR member, is elected again with a log
    that ends at 5, and B and C truncate t0..t9 away: acknowledged records lost. With ELR, C left
    the ISR when it fell below min.insync.replicas and so is eligible; the controller elects C
    while A is down and A, back from an unclean shutdown, follows: nothing lost."""
    A, B, C, D = ctx.A, ctx.B, ctx.C, ctx.D
    if not ctx.cluster.is_kraft or D is None:
        ctx.fail(f"KIP-966 (ELR) is KRaft-only; Kafka {ctx.version} runs in ZooKeeper mode here: use 3.3 or later")
    if elr == "off":
        elr_off(ctx)
    levels = features(ctx)
    ctx.create_topic([A, B, C], STANDING_TOPIC)
    ctx.wait_isr([A, B, C], 60)
    ctx.wait_leader(A, 60)
    ctx.write([f"p{i}" for i in range(5)], A)            # offsets 0..4
    _wait_hw(ctx, 5)
    writeback(ctx, [A, B, C], "the topic's files and p0..p4 reach every disk")
    tail = ctx.write([f"t{i}" for i in range(10)], A)    # offsets 5..14, acknowledged by all three, never fsynced
    _wait_hw(ctx, 15)
    isolate(ctx, B, [A, D])                              # D fences B: out of the ISR, alive, its page cache kept
    ctx.wait_for("ISR [A, C]", lambda s: bool(s) and sorted(s["isr"]) == sorted([A.node_id, C.node_id]), 60)
    isolate(ctx, C, [A, D])
    if wait_view(ctx, A, "ISR [A]", lambda s: bool(s) and s["isr"] == [A.node_id], 60) is None:
        ctx.fail("the ISR did not shrink to A alone")    # not the KIP's situation: no result
    shrunk = describe_partition(ctx, "the ISR shrank to A", via=A)
    cut = power_off(ctx, [A])
    disk = on_disk(ctx, A)
    time.sleep(FENCE_WAIT_S)                              # D fences A while B and C are still cut off (KIP-966's T2)
    ctx.step(f"waited {FENCE_WAIT_S:g} s: D fences A (broker.session.timeout.ms, 9 s)")
    heal_all(ctx)                                        # T3: B and C reach A's address and D again
    while_down = ctx.wait_for("a leader among B and C while A is down",
                              lambda s: bool(s) and s["leader"] in (B.node_id, C.node_id), 45)
    down = describe_partition(ctx, "A down, B and C back")
    power_on(ctx, A)
    back = ctx.wait_for("a leader after A is back", lambda s: bool(s) and s["leader"] >= 0, 90)
    after = describe_partition(ctx, "A back")
    full = ctx.wait_isr([A, B, C], 90)
    return {"elr_mode": elr, "features": levels, "tail_acked": sum(w["acked"] for w in tail), "dropped": cut["dropped"],
            "on_disk_after_cut": disk, "partition_when_isr_shrank": shrunk, "partition_while_A_down": down,
            "leader_while_A_down": None if while_down is None else ctx.name(ctx.cluster.node(while_down["leader"])),
            "leader_after_A_back": None if back is None else ctx.name(ctx.cluster.node(back["leader"])),
            "partition_after_A_back": after, "isr_full_at_end": full is not None, "log_lines": log_lines(ctx)}


KIP966_EXPECTED = {
    "3.9.2 (no ELR)": "no leader while A is down; A, the last ISR member, is re-elected with log end 5 and B and C "
                      "truncate to 5: t0..t9 (acknowledged) lost",
    "4.3.1, ELR off": "as 3.9.2 (eligible.leader.replicas.version=0)",
    "4.3.1, ELR on (default for new clusters from 4.1)": "C joined the ELR when the ISR fell to [A]; the controller elects "
                                                        "C while A is down; A follows and refetches: nothing lost",
    "verdict": "invalid where t0..t9 are lost: acks=all, min.insync.replicas 2, RF 3 and unclean election off forbid it",
}

POWER_SCENARIOS: list[Scenario] = [
    Scenario(
        name="kip101-power-loss-divergence", kip="KIP-101 scenario 2",
        description="Replica divergence on restart after a power outage that hits both replicas: the one whose disk "
                    "lost more leads first and takes a new record at an offset the other still holds.",
        bug_versions="before 0.11 (0.10.2): the returning follower truncates to its high watermark, not to the leader's epoch",
        expected={"0.10.2": "A keeps m2 at offset 1 (its high-watermark checkpoint is 2), B has m3 there: replicas diverge",
                  ">=0.11": "A asks B where epoch 0 ends (1), truncates m2 and fetches m3: replicas identical",
                  "verdict": "m2 (acks=all) lost on every version: permitted, all replicas lost power and unclean election is on"},
        steps=power_loss_divergence, acks="all", min_insync_replicas=1, unclean=True, controller_apart=True,
        lossy_data=True, shows_bug=_unclean_bug,
    ),
    Scenario(
        name="kip966-last-replica-standing", kip="KIP-966",
        description="The last in-sync replica loses power and its unflushed tail; the other two come back. ELR as a new "
                    "cluster of the version has it: off before 4.1, on from 4.1.",
        bug_versions="without ELR (before 4.0; 4.0 unless enabled; 4.1+ with eligible.leader.replicas.version=0)",
        expected=KIP966_EXPECTED,
        steps=last_replica_standing, acks="all", min_insync_replicas=2, unclean=False, replication_factor=3,
        controller_apart=True, lossy_data=True, needs_kraft=True,
        shows_bug=lambda s: s["headline"]["lost"] > 0,
    ),
    Scenario(
        name="kip966-last-replica-standing-elr-off", kip="KIP-966",
        description="kip966-last-replica-standing with eligible.leader.replicas.version set to 0 before the topic exists.",
        bug_versions="every version: ELR is off",
        expected=KIP966_EXPECTED,
        steps=functools.partial(last_replica_standing, elr="off"), acks="all", min_insync_replicas=2, unclean=False,
        replication_factor=3, controller_apart=True, lossy_data=True, needs_kraft=True,
        shows_bug=lambda s: s["headline"]["lost"] > 0,
    ),
]
