"""KAFKA-17754: a delayed EndTxn ends the wrong transaction (docs/scenarios.md).

Jepsen's Bufstream analysis (2024) showed that under transaction protocol v1 an EndTxn held
up in the network can reach the transaction coordinator after the producer has moved on to its
next transaction with the same producer id and epoch, and end that one: a later transaction
committed early (part of it), or records the client aborted made visible. KIP-890 part 2
(transaction.version 2, Kafka 4.0+) bumps the epoch at every transaction end, so a stale
EndTxn carries an old epoch and is fenced, but only for a client that sends EndTxn v5.

Steps (`fault` is how the coordinator's EndTxn is held up):
  the producer's transactional.id has coordinator K (txn_coordinator.py); the topic has three
  replicas led by another broker, K last (the fault is between the host's clients and K, so
  replication to K goes on), min.insync.replicas 2: the `safe` durability, so that the checker
  permits no loss and a record of a committed txn that never appears is a finding. txn1 writes a1. K is cut from the
  host's clients (the partition nemesis's `client` shape) or paused (SIGSTOP, the pause nemesis).
  commit_transaction(5 s) times out; librdkafka's EndTxn waits socket.timeout.ms (10 s; 3 s under
  a pause, which must outlast it), disconnects and retries on a new connection. K is healed (or resumed); the commit is retried
  until it answers. txn2 writes b1, waits STALE_WAIT_S while a read_committed reader polls, then
  writes b2 and commits. A stale EndTxn(commit) of txn1 that lands on txn2 commits b1 early.
Every step is a nemesis event; the writes and the reads are recorded ops (f txn, poll) that the
normal checker judges at read_committed.
"""

from __future__ import annotations

import functools
import logging
import re
import signal
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from harness.cluster.txn_coordinator import TXN_STATE_TOPIC, coordinator_of
from harness.history.faults import PARTITION, PAUSE
from harness.scenarios import Scenario
from harness.scenarios.context import CUT, ScenarioContext
from harness.scenarios.power_scenarios import features
from nemesis import net, steps
from workloads.outcomes import error_text
from workloads.txn import TxnProducerClient

TXN_ID = "kafka17754"
COMMIT_TIMEOUT_S = 5.0       # the first commit call: shorter than the fault, so it times out
SOCKET_TIMEOUT_MS = 10_000   # librdkafka's request timeout: the held EndTxn times out, disconnect, retry
# Under a pause the request must time out (and librdkafka disconnect) before K resumes, and K must
# resume before the controller fences it (broker.session.timeout.ms 9 s). Measured with 10 s: the
# 6 s pause ended first and K answered the EndTxn on the same connection (rtt 6280 ms, run
# 20261124T080620-2a0e68): no request was left behind, so the pause tested nothing.
PAUSE_SOCKET_TIMEOUT_MS = 3_000
CUT_S = 30.0                 # the client cut, from the commit call
PAUSE_S = 6.0                # the pause: under broker.session.timeout.ms (9 s), so K stays coordinator
STALE_WAIT_S = 45.0          # txn2 stays open this long after b1 (TCP's retransmissions back off to ~51 s)
RETRY_COMMIT_S = 90.0
TXN_TIMEOUT_MS = 180_000     # the coordinator must not abort txn2 for its length
LIBRDKAFKA_WORDS = ("endtxn", "timed out", "disconnect", "txn", "commit", "abort", "pid", "epoch", "coordinator")


class _Lines(logging.Handler):
    """librdkafka's log lines of the scenario's producer (its `logger`), kept as evidence."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.created:.3f} {record.getMessage()}"[:400])


def endtxn_versions(lines: list[str]) -> list[int]:
    """EndTxn request versions librdkafka reports sending ('Sent EndTxnRequest (v1, ...')."""
    return sorted({int(m.group(1)) for ln in lines for m in re.finditer(r"EndTxnRequest \(v(\d+)", ln)})


def transaction_version(levels: dict[str, int]) -> int:
    return levels.get("transaction.version", 0)


def describe_txn(ctx: ScenarioContext, via: Any, what: str) -> str:
    """kafka-transactions describe: coordinator, producer id and epoch, state, partitions."""
    code, out = ctx.tool(via, "org.apache.kafka.tools.TransactionsCommand",
                         f"--bootstrap-server {via.hostname}:9092 describe --transactional-id {TXN_ID}", timeout_s=60)
    text = "\n".join(ln for ln in out.strip().splitlines() if "WARN" not in ln)[-800:]
    ctx.step(f"kafka-transactions describe: {what}", exit_code=code, output=text)
    return text


def coordinator_log(ctx: ScenarioContext, node: Any, partition: int, limit: int = 40) -> list[str]:
    """K's server.log lines about the transactional.id or its __transaction_state partition."""
    text = node.read_log()[0].splitlines()
    keys = (TXN_ID, f"{TXN_STATE_TOPIC}-{partition}", "TransactionCoordinator", "TransactionMarker")
    return [ln[:400] for ln in text if any(k in ln for k in keys)][-limit:]


def txn_log(ctx: ScenarioContext, node: Any, partition: int) -> list[str]:
    """The coordinator's __transaction_state partition, decoded (DumpLogSegments
    --transaction-log-decoder): every state the coordinator wrote for the transactional.id."""
    from harness.cluster.broker_config import DATA_DIR
    from harness.cluster.replicas import dump_tool

    d = f"{DATA_DIR}/{TXN_STATE_TOPIC}-{partition}"
    _, files = node.exec(f"ls {d}/*.log 2>/dev/null")
    if not files.split():
        return [f"no segments in {d}"]
    code, out = ctx.tool(node, dump_tool(ctx.version), f"--files {','.join(sorted(files.split()))} --transaction-log-decoder",
                         timeout_s=90)
    keep = [ln.strip()[:600] for ln in out.splitlines() if TXN_ID in ln]
    return keep or [f"exit {code}: " + out.strip()[-300:]]


def read_all(ctx: ScenarioContext, isolation: str, timeout_s: float = 20.0) -> list[list[int]]:
    """An unrecorded reader (evidence only): [offset, value] of every record it returns."""
    c = Consumer({"bootstrap.servers": ctx.cluster.bootstrap_servers(), "group.id": f"scenario-{isolation}",
                  "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(ctx.topic, 0, -2)])
    out: list[list[int]] = []
    end = time.monotonic() + timeout_s
    try:
        while time.monotonic() < end:
            msgs = c.consume(100, 0.5)
            out += [[m.offset(), int(m.value())] for m in msgs if m.error() is None]
            if any(m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF for m in msgs):
                break
    finally:
        c.close()
    return out


def _fault_on(ctx: ScenarioContext, node: Any, fault: str, coord: dict[str, Any]) -> None:
    roles = {str(node.node_id): [f"txn-coordinator:{TXN_ID}", f"leader:{TXN_STATE_TOPIC}-{coord['partition']}"]}
    if fault == "pause":
        pid = node.send_signal(signal.SIGSTOP)
        ctx.step(f"pause K ({node.node_id})", PAUSE.start, target="txn-coordinator", targets=[node.node_id], roles=roles, pids={str(node.node_id): pid})
    else:
        net.drop_host_clients(node, CUT)
        ctx.step(f"cut the host's clients from K ({node.node_id})", PARTITION.start, shape="client", target="txn-coordinator",
                 targets=[node.node_id], roles=roles, cut="host clients")


def _fault_off(ctx: ScenarioContext, node: Any, fault: str) -> None:
    if fault == "pause":
        pid = node.send_signal(signal.SIGCONT)
        ctx.step(f"resume K ({node.node_id})", PAUSE.stop, targets=[node.node_id], pids={str(node.node_id): pid})
    else:
        steps.heal([node], CUT)
        ctx.step(f"heal K's client cut ({node.node_id})", PARTITION.stop, targets=[node.node_id])


def _commit(ctx: ScenarioContext, client: TxnProducerClient, timeout_s: float, what: str) -> tuple[str | None, Any]:
    """One commit_transaction call: (None, None) when it answered OK, else (error text, KafkaError); recorded as a step."""
    assert client.producer is not None
    began = time.monotonic()
    try:
        client.producer.raw.commit_transaction(timeout_s)  # type: ignore[attr-defined]  # librdkafka by hand
        ctx.step(f"commit_transaction ({what}): ok", seconds=round(time.monotonic() - began, 2))
        return None, None
    except KafkaException as exc:
        err = exc.args[0]
        text = error_text(exc)
        ctx.step(f"commit_transaction ({what}): {text[:120]}", seconds=round(time.monotonic() - began, 2), error=text,
                 retriable=err.retriable(), fatal=err.fatal(), txn_requires_abort=err.txn_requires_abort())
        return text, err


def delayed_endtxn(ctx: ScenarioContext, fault: str) -> dict[str, Any]:
    lines = _Lines()
    rdk = logging.getLogger("librdkafka.producer")
    level, propagate = rdk.level, rdk.propagate
    rdk.addHandler(lines)
    # librdkafka's eos,protocol,broker debug is ~5000 lines a run: kept in scenario.json, not printed
    rdk.setLevel(logging.DEBUG)
    rdk.propagate = False
    try:
        return _delayed_endtxn(ctx, fault, lines)
    finally:
        rdk.removeHandler(lines)
        rdk.setLevel(level)
        rdk.propagate = propagate
        for n in ctx.cluster.brokers:  # the runner heals its own cuts only; a step that stopped must not leave K held
            n.send_signal(signal.SIGCONT)
            steps.heal([n], CUT)


def _delayed_endtxn(ctx: ScenarioContext, fault: str, lines: _Lines) -> dict[str, Any]:
    if not ctx.at_least("0.11"):  # `scenario matrix` runs every scenario on every version
        ctx.create_topic([ctx.A, ctx.B], {"min.insync.replicas": 1})
        ctx.fail(f"transactions need Kafka 0.11 or later (KIP-98); this is {ctx.version}")
    client = TxnProducerClient(ctx.pids(), ctx.recorder, ctx.cluster.bootstrap_servers(), ctx.topic, ctx.profile, TXN_ID)
    client.config.update({"socket.timeout.ms": PAUSE_SOCKET_TIMEOUT_MS if fault == "pause" else SOCKET_TIMEOUT_MS, "transaction.timeout.ms": TXN_TIMEOUT_MS,
                          "debug": "eos,protocol,broker", "linger.ms": 0})
    client.open()                                         # init_transactions: creates __transaction_state
    coord = coordinator_of(ctx.cluster, TXN_ID)
    K = ctx.cluster.node(coord["coordinator"])
    others = [b for b in ctx.cluster.brokers if b.node_id != K.node_id]
    ctx.step("transaction coordinator found", coordinator=coord)
    levels = features(ctx)
    # RF 3, min ISR 2 (Scenario below): with min ISR 1 the checker permits an unseen write (an
    # acks=all write may then live on one broker), and so it called the torn txn2 of runs
    # 20261124T080030-5d1ee2 and -080342-46673a valid (unseen 1: b2, proven by b1's read).
    ctx.create_topic(others[:2] + [K], {"min.insync.replicas": 2})
    ctx.wait_isr(others[:2] + [K], 60)
    before = describe_txn(ctx, others[0], "after init_transactions")
    a1, b1, b2 = ctx._next_value, ctx._next_value + 1, ctx._next_value + 2
    ctx._next_value += 3
    assert client.producer is not None
    # librdkafka by hand (produce, flush, EndTxn, its own errors): the driver keeps the Producer as `raw`
    p = client.producer.raw  # type: ignore[attr-defined]

    # txn1: a1, then the commit is held up by the fault
    v1 = {"sends": [{"key": 0, "value": a1}], "records": []}
    ctx.recorder.record(client.process, "invoke", "txn", v1)
    p.begin_transaction()
    p.produce(ctx.topic, str(a1).encode(), partition=0)
    left = p.flush(30)
    ctx.step("txn1: a1 produced", value=a1, unflushed=left)
    _fault_on(ctx, K, fault, coord)
    held_at = time.monotonic()
    first, err = _commit(ctx, client, COMMIT_TIMEOUT_S, "txn1, K held")
    time.sleep(max(0.0, (PAUSE_S if fault == "pause" else CUT_S) - (time.monotonic() - held_at)))
    _fault_off(ctx, K, fault)
    answer, deadline = first, time.monotonic() + RETRY_COMMIT_S
    while err is not None and err.retriable() and time.monotonic() < deadline:  # librdkafka: a timed-out commit is resumed, never aborted
        answer, err = _commit(ctx, client, 15.0, "txn1, retried")
    txn1 = "ok" if answer is None else "info"
    ctx.recorder.record(client.process, txn1, "txn", v1, answer)

    # txn2: b1, a long wait with a read_committed reader polling, then b2 and commit
    v2 = {"sends": [{"key": 0, "value": b1}, {"key": 0, "value": b2}], "records": []}
    ctx.recorder.record(client.process, "invoke", "txn", v2)
    txn2, early, answer2 = "info", [], None
    try:
        p.begin_transaction()
        p.produce(ctx.topic, str(b1).encode(), partition=0)
        ctx.step("txn2: b1 produced", value=b1, unflushed=p.flush(30))
        reader = ctx.consumer({"isolation.level": "read_committed", "auto.offset.reset": "earliest"})
        reader.assign([0], seek="beginning")
        stop = ctx.start_poller(reader, max_s=STALE_WAIT_S + 30)
        began = time.monotonic()
        while time.monotonic() - began < STALE_WAIT_S:
            time.sleep(1.0)
            early = [r for r in read_all(ctx, "read_committed", 5) if r[1] == b1]
            if early:
                ctx.step("b1 visible at read_committed before txn2's commit", offset_value=early[0],
                         seconds_after_b1=round(time.monotonic() - began, 1))
                break
        time.sleep(2.0)
        stop()
        reader.close()
        ctx.step(f"waited {round(time.monotonic() - began, 1)} s with txn2 open", b1_visible_early=bool(early))
        p.produce(ctx.topic, str(b2).encode(), partition=0)
        ctx.step("txn2: b2 produced", value=b2, unflushed=p.flush(30))
        answer2, err2 = _commit(ctx, client, 30.0, "txn2")
        if answer2 is None:
            txn2 = "ok"
        elif err2.txn_requires_abort():
            p.abort_transaction(30)
            txn2 = "fail"
    except KafkaException as exc:
        answer2 = error_text(exc)
        ctx.step(f"txn2 failed: {answer2[:160]}", error=answer2)
        try:
            p.abort_transaction(30)
            txn2 = "fail"
        except KafkaException as exc2:
            answer2 += f"; abort failed: {error_text(exc2)}"
    ctx.recorder.record(client.process, txn2, "txn", v2, answer2)
    ctx.step(f"txn2 ended: {txn2}", error=answer2)
    after = describe_txn(ctx, others[0], "at the end")
    try:
        client.close(10)
    except KafkaException:
        pass
    committed, uncommitted = read_all(ctx, "read_committed"), read_all(ctx, "read_uncommitted")
    ctx.step("read everything", read_committed=committed, read_uncommitted=uncommitted)
    rdk = [ln for ln in lines.lines if any(w in ln.lower() for w in LIBRDKAFKA_WORDS)]
    return {"fault": fault, "coordinator": coord, "features": levels, "transaction_version": transaction_version(levels),
            "endtxn_versions_sent": endtxn_versions(lines.lines), "values": {"a1": a1, "b1": b1, "b2": b2},
            "first_commit": first, "txn1": txn1, "txn2": txn2, "txn2_error": answer2, "b1_visible_early": early,
            "read_committed": committed, "read_uncommitted": uncommitted, "describe_before": before, "describe_after": after,
            "coordinator_log": coordinator_log(ctx, K, coord["partition"]), "transaction_log": txn_log(ctx, K, coord["partition"]),
            "librdkafka_log": rdk[-120:]}


def stale_endtxn_shown(summary: dict[str, Any]) -> bool:
    """KAFKA-17754 shown: b1 of the still-open txn2 became visible at read_committed (a delayed
    EndTxn committed it early), or the checker found an aborted read or a lost write."""
    obs, counts = summary["observations"], summary["history_counts"]
    return bool(obs.get("b1_visible_early")) or counts.get("aborted-read", 0) > 0 or summary["headline"]["lost"] > 0


EXPECTED = {
    "3.9.2 (transaction.version 1 at most)": "a stale EndTxn(commit) of txn1 that reaches K after txn2 began commits "
                                             "txn2's b1 early (KAFKA-17754), if a fault delays it past txn2's start",
    "4.3.1 (transaction.version 2 by default)": "fenced by the epoch bump, but only for EndTxn v5; librdkafka sends "
                                                 "EndTxn v0-v1 (rdkafka_request.c), so the coordinator treats it as TV1",
    "verdict": "invalid wherever b1 is visible at read_committed before txn2 commits, or a txn the client aborted is read",
}

def _kafka17754(name: str, fault: str, description: str) -> Scenario:
    """The two variants differ only in how the coordinator's EndTxn is held up."""
    return Scenario(
        name=name, kip="KAFKA-17754 (KIP-890 part 2)", description=description,
        bug_versions="transaction protocol v1: before 4.0, and any client without EndTxn v5 (librdkafka included)",
        expected=EXPECTED, steps=functools.partial(delayed_endtxn, fault=fault), acks="all",
        replication_factor=3, min_insync_replicas=2,
        isolation_level="read_committed", shows_bug=stale_endtxn_shown,
    )


TXN_SCENARIOS: list[Scenario] = [
    _kafka17754("kafka17754-delayed-endtxn", "client-cut",
                "A transactional producer's commit is held up by cutting the host's clients from its transaction "
                "coordinator; it retries, begins the next transaction, and a stale EndTxn may end that one."),
    _kafka17754("kafka17754-delayed-endtxn-pause", "pause",
                "kafka17754-delayed-endtxn with the coordinator paused (SIGSTOP) for 6 s instead of cut."),
]
