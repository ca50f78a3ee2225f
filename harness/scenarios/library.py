"""The scenarios themselves, step by step (docs/scenarios.md explains each against its KIP).

Roles: A and B hold the partition's two replicas, C is the third broker (chosen to be the
controller, so cutting A from B never cuts either from it)."""

from __future__ import annotations

import logging
import time
from typing import Any

from harness.history import read_history
from harness.scenarios import Scenario
from harness.scenarios.context import ScenarioContext
from nemesis import steps

UNCLEAN_TOPIC = {"min.insync.replicas": 1, "unclean.leader.election.enable": "true"}
CLEAN_TOPIC = {"min.insync.replicas": 1, "unclean.leader.election.enable": "false"}


def _wait_hw(ctx: ScenarioContext, target: int, timeout_s: float = 30.0) -> bool:
    """Wait until the high watermark reaches `target`: every ISR member then holds the records."""
    def high_watermark() -> int:
        try:
            return ctx.high_watermark(timeout_s=5)
        except Exception:  # no high watermark yet (no leader): not there
            return -1

    polled = steps.poll(high_watermark, lambda hw: hw >= target, timeout_s)
    ctx.step(f"waited: high watermark >= {target}", ok=polled.ok, high_watermark=polled.value)
    return polled.ok


def _out_of_isr(ctx: ScenarioContext, gone: Any, leader: Any, timeout_s: float = 60.0) -> None:
    ctx.wait_for(f"{ctx.name(gone)} out of the ISR, {ctx.name(leader)} leader",
                 lambda s: bool(s) and s["leader"] == leader.node_id and gone.node_id not in s["isr"], timeout_s)


# --- KIP-101 appendix (a) -------------------------------------------------------------------------
def unclean_divergence(ctx: ScenarioContext) -> dict[str, Any]:
    A, B = ctx.A, ctx.B
    ctx.create_topic([A, B], UNCLEAN_TOPIC)
    ctx.wait_isr([A, B], 60)
    ctx.kill(B)
    _out_of_isr(ctx, B, A)
    ctx.write(["m1"], A)                      # epoch 0 on A, offset 0
    ctx.kill(A)
    ctx.start(B)
    ctx.wait_leader(B, 120, unclean=True)     # epoch 1 on B
    ctx.write(["m2"], B)                      # B:0
    ctx.kill(B)
    ctx.start(A)
    ctx.wait_leader(A, 120, unclean=True)     # epoch 2 on A
    ctx.write(["m3"], A)                      # A:1
    ctx.kill(A)
    ctx.start(B)
    ctx.wait_leader(B, 120, unclean=True)     # epoch 3 on B
    ctx.write(["m4"], B)                      # B:1 covers up the divergence at offset 0
    ctx.start(A)
    state = ctx.wait_isr([A, B], 90)
    return {"isr_full_after_last_restart": state is not None}


# --- KIP-279 (KAFKA-6361) ------------------------------------------------------------------------
def fast_failover(ctx: ScenarioContext) -> dict[str, Any]:
    A, B, C = ctx.A, ctx.B, ctx.C
    ctx.create_topic([A, B], CLEAN_TOPIC)
    ctx.wait_isr([A, B], 60)
    ctx.write([f"r{i}" for i in range(11)], A)          # offsets 0..10, replicated to B
    _wait_hw(ctx, 11)
    ctx.cut(A, B)
    ctx.write([f"r{i}" for i in range(11, 21)], A)      # offsets 11..20 on A only; B stays in ISR (long lag time)
    ctx.reorder_replicas([B, A], via=C)
    ctx.wait_for("replica order [B, A]", lambda s: bool(s) and s["replicas"][:1] == [B.node_id], 30)
    ctx.preferred_election(via=C)
    state = ctx.wait_leader(B, 60)                      # B leads; A follows but cannot reach B to truncate
    a_in_isr = A.node_id in state["isr"]
    ctx.write([f"s{i}" for i in range(11, 16)], B)      # offsets 11..15 on B, the new epoch
    ctx.kill(B)
    state = ctx.wait_leader(A, 60)                      # clean election: A is still in the ISR
    ctx.write(["t21", "t22"], A)                        # A's new epoch gets an entry (21) in its epoch cache
    ctx.heal()
    ctx.start(B)
    full = ctx.wait_isr([A, B], 90)
    return {"A_in_isr_when_B_led": a_in_isr, "isr_full_after_restart": full is not None}


# --- KIP-320 -----------------------------------------------------------------------------------------
def consumer_truncation(ctx: ScenarioContext) -> dict[str, Any]:
    A, B = ctx.A, ctx.B
    ctx.create_topic([A, B], UNCLEAN_TOPIC)
    ctx.wait_isr([A, B], 60)
    ctx.write([f"x{i}" for i in range(5)], A)           # offsets 0..4 on both
    _wait_hw(ctx, 5)
    ctx.kill(B)
    _out_of_isr(ctx, B, A)
    ctx.write([f"x{i}" for i in range(5, 10)], A)       # offsets 5..9 on A only
    client_log = _ClientLog()
    consumer = ctx.consumer(extra={"logger": client_log.logger, "debug": "fetch,consumer"})
    consumer.assign([0], "beginning")
    halt = ctx.start_poller(consumer)
    ctx.step("consumer started", consumer=consumer.process)
    for _ in range(100):                                # bounded: 100 x 0.3 s
        if consumer.next_offset.get(0, 0) >= 10:
            break
        time.sleep(0.3)
    position = consumer.next_offset.get(0, 0)
    ctx.step("consumer position before the unclean election", position=position)
    ctx.kill(A)
    ctx.start(B)
    ctx.wait_leader(B, 120, unclean=True)
    election_index = ctx.recorder.events_recorded
    ys = ctx.write([f"y{i}" for i in range(5, 13)], B)  # offsets 5..12 on B: 5..9 lie behind the consumer
    for _ in range(100):                                # bounded: up to 30 s for the consumer to react
        if consumer.next_offset.get(0, 0) >= 13:
            break
        time.sleep(0.3)
    time.sleep(2)
    halt()
    ctx.step("consumer stopped", position=consumer.next_offset.get(0, 0))
    consumer.close()
    ctx.start(A)
    verdict = classify_consumer(ctx, consumer.process, election_index, position, ys, client_log.lines)
    ctx.step("consumer classified", **verdict)
    return verdict


def _relevant(low: str) -> bool:
    """A librdkafka log line about the consumer's position (not about connections)."""
    if "disconnected" in low or "connection reset" in low:
        return False
    return any(w in low for w in ("truncat", "offset reset", "out of range", "validat", "leader epoch"))


class _ClientLog(logging.Handler):
    """librdkafka's own log lines for one client (it reports KIP-320 truncation there too)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.logger = logging.getLogger(f"librdkafka.scenario.{id(self)}")
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        low = message.lower()
        if len(self.lines) < 200 and _relevant(low):
            self.lines.append(message)


def classify_consumer(ctx: ScenarioContext, process: int, after_index: int, position: int,
                      new_writes: list[dict[str, Any]], client_log: list[str] | None = None) -> dict[str, Any]:
    """How the consumer reacted to the truncation, from its recorded polls after the election and
    librdkafka's log: detected (a log-truncation error or log line; KIP-320 then resumes at the
    divergence point), offset reset (out-of-range / reset), re-read (it read offsets below its old
    position again without saying why) or silently skipped (records written behind its position
    were never read by it)."""
    ctx.recorder.flush()
    events = [e for e in read_history(ctx.recorder.path)
              if e["process"] == process and e["f"] == "poll" and e["type"] != "invoke" and e["index"] >= after_index]
    errors = sorted({e["error"] for e in events if e.get("error")})
    reads = [(r["offset"], r["value"]) for e in events if e["type"] == "ok" for r in e["value"]["records"]]
    behind = {w["value"] for w in new_writes if w["acked"] and w["offset"] is not None and w["offset"] < position}
    read_values = {v for _, v in reads}
    log_lines = [ln[:300] for ln in (client_log or []) if _relevant(ln.lower())]
    texts = [t.lower() for t in errors + log_lines]
    resumed_at = min((o for o, _ in reads), default=None)
    reset = any("out of range" in t or "offset reset" in t for t in texts)
    validated = any("epoch validation" in t for t in texts)
    # KIP-320: the consumer validates its position against the new leader's epoch history and,
    # finding its epoch ended earlier, resumes at that end offset (librdkafka logs the truncation
    # or, at least, the validation query); an out-of-range reset instead resumes at auto.offset.reset.
    truncation = any("truncat" in t for t in texts) or (validated and not reset and resumed_at is not None and resumed_at < position)
    reread = any(o < position for o, _ in reads)
    skipped = sorted(behind - read_values)
    if truncation:
        kind = "detected-truncation"
    elif reset:
        kind = "offset-reset"
    elif reread:
        kind = "re-read"
    elif skipped:
        kind = "silently-skipped"
    else:
        kind = "no-effect"
    return {"classification": kind, "detected_by_client": int(truncation or reset), "errors": errors[:10],
            "client_log": log_lines[:30], "resumed_at": resumed_at,
            "position_before": position, "reads_after_election": reads[:40], "skipped_values": skipped,
            "reread": reread}


# --- KIP-101 scenario 1 ------------------------------------------------------------------------------
FETCH_WAIT_MS = 8000  # how late a follower may learn a new high watermark (replica.fetch.wait.max.ms)
HW_TOPIC = {"min.insync.replicas": 2, "unclean.leader.election.enable": "false"}


def hw_truncation(ctx: ScenarioContext) -> dict[str, Any]:
    """B leads replicas [B, C, A]; D, the controller, holds none. A learns each new high watermark
    up to FETCH_WAIT_MS late, so right after all three acknowledge m2, A's high watermark still
    stops before it. A is cut from B and C (not from D) so that it never learns more; B dies and D
    makes C leader and A C's follower. Before KIP-101, becoming a follower truncates A's log to
    its high watermark, and m2 is gone from A. C dies before A can refetch, and D elects A, still
    in the ISR: a clean election of a replica that lacks an acknowledged record. From 0.11, A asks
    C for the end of its epoch instead of truncating; C cannot answer, so A keeps m2."""
    A, B, C = ctx.A, ctx.B, ctx.C
    ctx.create_topic([B, C, A], HW_TOPIC)
    ctx.wait_isr([A, B, C], 60)
    ctx.wait_leader(B, 60)
    ctx.write(["m1"], B)                                  # offset 0
    time.sleep(FETCH_WAIT_MS / 1000 + 2)                  # A's parked fetch returns: its high watermark covers m1
    m2 = ctx.write(["m2"], B)                             # offset 1, acknowledged once A and C fetched it
    ctx.cut(A, B)                                         # A's parked fetch, which would carry high watermark 2, never returns
    ctx.cut(A, C)
    if not m2[0]["acked"]:
        ctx.fail(f"m2 was not acknowledged: {m2[0]['error']}")
    ctx.kill(B)
    ctx.wait_leader(C, 60)                                # A becomes C's follower (0.10.2: truncates to its HW, 1)
    ctx.kill(C)
    state = ctx.wait_leader(A, 90)                        # clean: A is still in the ISR (0.10.2 takes ~31 s)
    hw_when_a_led, hw_error = None, None
    try:
        hw_when_a_led = ctx.high_watermark(timeout_s=10)
    except Exception as exc:  # 4.x: a leader whose ISR is below min.insync.replicas keeps its high watermark
        hw_error = str(exc)
    ctx.step("A leads", high_watermark=hw_when_a_led, error=hw_error, isr=state["isr"])
    ctx.heal()
    ctx.start(B)
    ctx.start(C)
    full = ctx.wait_isr([A, B, C], 60)
    return {"high_watermark_when_A_led": hw_when_a_led, "high_watermark_error": hw_error, "m2_offset": m2[0]["offset"],
            "isr_full_after_restart": full is not None}


# --- the scenarios' criteria ------------------------------------------------------------------------
def _unclean_bug(summary: dict[str, Any]) -> bool:
    return bool(summary["replica_divergence"]["diverged"])


SCENARIOS: list[Scenario] = [
    Scenario(
        name="kip101-unclean-divergence", kip="KIP-101 appendix (a)",
        description="Divergent logs with unclean leader election and min.isr=1: two replicas killed and restarted in "
                    "turn, each write lands on a different replica at the same offsets.",
        bug_versions="0.11 to 1.1 (KIP-101's single epoch request cannot find where the logs diverge); "
                     "from 2.0 KIP-279's repeated epoch requests find it",
        expected={"0.10.2": "the restarted replica truncates to its checkpointed high watermark: loss, divergence only "
                            "if the checkpoint kept the divergent record",
                  "0.11-1.1": "replicas diverge at offset 0: the epoch request for epoch 2 is answered with epoch 3's start (1)",
                  ">=2.0": "A asks again for epoch 0, truncates to 0 and refetches: replicas identical",
                  "verdict": "valid on every version: acks=1 and unclean election permit the loss and the offset reuse"},
        steps=unclean_divergence, acks="1", unclean=True, shows_bug=_unclean_bug,
    ),
    Scenario(
        name="kip279-fast-failover", kip="KIP-279 (KAFKA-6361)",
        description="Fast back-to-back leader fail-over: the follower that became leader while cut off had no chance "
                    "to truncate; the old leader's tail and the short-lived leader's tail share offsets.",
        bug_versions="0.11 to 1.1 (KIP-101 without KIP-279); before 0.11 HW truncation",
        expected={"0.10.2": "B truncates to its high watermark on restart and refetches: replicas identical",
                  "1.1": "B keeps s11..s15 (the epoch request answers the next epoch's start, 21): replicas diverge from 11",
                  ">=2.0": "B truncates to 11 (epoch and end offset), refetches: replicas identical; s11..s15 lost (acks=1 permits it)"},
        steps=fast_failover, acks="1", unclean=False,
        broker_config={"replica.lag.time.max.ms": 60000},
        shows_bug=_unclean_bug,
    ),
    Scenario(
        name="kip320-consumer-truncation", kip="KIP-320",
        description="A consumer that read past the new leader's log end during an unclean election: does it detect the "
                    "truncation, reset, re-read or silently skip the records written behind its position?",
        bug_versions="clients or brokers without KIP-320 (brokers before 2.1) skip silently",
        expected={"<2.1": "no epoch validation: the consumer silently skips the records written behind its position",
                  ">=2.1": "librdkafka >= 2.1 validates its position with OffsetForLeaderEpoch and reports log truncation"},
        steps=consumer_truncation, acks="1", unclean=True,
        shows_bug=lambda s: s["observations"].get("classification") == "silently-skipped",
    ),
    Scenario(
        name="kip101-hw-truncation", kip="KIP-101 scenario 1",
        description="High-watermark truncation followed by immediate leader election: a follower that has an "
                    "acknowledged record but not yet the high watermark past it becomes a follower of a new leader, "
                    "truncates to its high watermark, then is elected (cleanly) when that leader dies.",
        bug_versions="before 0.11 (0.10.2): followers truncate to their high watermark when they start following",
        expected={"0.10.2": "m2 (acks=all, in every replica when acknowledged) lost: A truncated it and then led",
                  ">=0.11": "A asks the new leader where its epoch ends instead of truncating; it keeps m2: nothing lost",
                  "verdict": "invalid where m2 is lost: acks=all, min.insync.replicas=2, RF 3 and a clean election forbid it"},
        steps=hw_truncation, acks="all", min_insync_replicas=2, unclean=False, replication_factor=3,
        controller_apart=True,
        broker_config={"replica.fetch.wait.max.ms": FETCH_WAIT_MS, "replica.lag.time.max.ms": 60000},
        shows_bug=lambda s: s["headline"]["lost"] > 0,
    ),
]  # the power-loss scenarios (KIP-101 scenario 2, KIP-966) are in power_scenarios.py
