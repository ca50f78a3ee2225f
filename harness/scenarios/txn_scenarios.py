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

The client (`scenario run --client librdkafka|java`, `--client-version`): the transactional producer
goes through the driver protocol (workloads/drivers/base.py), so the same steps drive librdkafka or
the Java client. Where the Java client cannot take a step the same way, it is adapted: its
commitTransaction takes no timeout and blocks up to max.block.ms, so max.block.ms is the first
commit's 5 s (and initTransactions is retried while it times out); a commit that timed out is
called again, as librdkafka's is (both clients resume the pending commit). Its request timeout is
request.timeout.ms, librdkafka's socket.timeout.ms. Which EndTxn version it sent is read from its
own log (librdkafka's protocol debug; the Java client's NetworkClient at DEBUG, in client.log).
The readers stay librdkafka's for both: read_committed is the broker's last stable offset.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import signal
import time
from typing import Any

from confluent_kafka import KafkaException

from harness.cluster.txn_coordinator import TXN_STATE_TOPIC, coordinator_of
from harness.history.faults import PARTITION, PAUSE
from harness.scenarios import Scenario
from harness.scenarios.context import CUT, ScenarioContext
from harness.scenarios.power_scenarios import features
from harness.scenarios.txn_evidence import (JAVA_WORDS, LIBRDKAFKA_WORDS, TXN_ID, _Lines, broker_endtxn, client_log_lines,
                                            coordinator_log, describe_txn, endtxn_versions, java_debug_logs, log_requests,
                                            read_all, transaction_version, txn_log)
from nemesis import net, steps
from workloads import drivers
from workloads.drivers.base import ClientError, ClientException, ProducerDriver
from workloads.outcomes import error_text
from workloads.txn_client import TxnProducerClient

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
JAVA_MAX_BLOCK_MS = int(COMMIT_TIMEOUT_S * 1000)  # the Java client's commitTransaction waits this long (no timeout argument)


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


def _commit(ctx: ScenarioContext, producer: ProducerDriver, timeout_s: float, what: str) -> ClientError | None:
    """One commit_transaction call through the driver: None when it answered OK, else its error; recorded as a step.
    librdkafka waits `timeout_s`; the Java client's commitTransaction takes no timeout and waits max.block.ms
    (JAVA_MAX_BLOCK_MS), whatever `timeout_s` says."""
    began = time.monotonic()
    try:
        producer.commit_transaction(timeout_s)
        ctx.step(f"commit_transaction ({what}): ok", seconds=round(time.monotonic() - began, 2))
        return None
    except ClientException as exc:
        err, text = exc.error, error_text(exc)
        ctx.step(f"commit_transaction ({what}): {text[:120]}", seconds=round(time.monotonic() - began, 2), error=text,
                 retriable=err.retriable, fatal=err.fatal, txn_requires_abort=err.txn_requires_abort)
        return err


def _commit_until(ctx: ScenarioContext, producer: ProducerDriver, first: ClientError | None, call_s: float, budget_s: float,
                  what: str) -> ClientError | None:
    """Call commit_transaction again while its last answer was retriable (a timeout), for up to `budget_s`.
    Both clients allow it: librdkafka resumes a timed-out commit (it refuses an abort in CommittingTransaction,
    rdkafka_txnmgr.c), and the Java client's commitTransaction called again after a TimeoutException awaits
    the same pending result (TransactionManager's cached TransactionalRequestResult, KAFKA-7763)."""
    err, deadline = first, time.monotonic() + budget_s
    while err is not None and err.retriable and not err.txn_requires_abort and time.monotonic() < deadline:
        err = _commit(ctx, producer, call_s, what)
    return err


def _abort(ctx: ScenarioContext, producer: ProducerDriver, what: str) -> ClientError | None:
    """abort_transaction (retried while it times out, 30 s at most): None when it answered OK, else its error."""
    err: ClientError | None = None
    deadline = time.monotonic() + 30.0
    while True:
        try:
            producer.abort_transaction(30.0)
            ctx.step(f"abort_transaction ({what}): ok")
            return None
        except ClientException as exc:
            err = exc.error
            ctx.step(f"abort_transaction ({what}): {error_text(exc)[:120]}", error=error_text(exc), retriable=err.retriable,
                     fatal=err.fatal)
            if not err.retriable or time.monotonic() > deadline:
                return err


def client_config(driver_name: str, fault: str) -> dict[str, Any]:
    """The transactional producer's settings beyond TxnProducerClient's, per client. The request timeout is
    librdkafka's socket.timeout.ms and the Java client's request.timeout.ms: a request without an answer
    for that long is timed out, its connection closed, and the EndTxn re-sent on a new one (librdkafka's
    rd_kafka_broker_timeout_scan; Java's NetworkClient disconnects, and TransactionManager's
    TxnRequestHandler re-enqueues a request whose response was a disconnect)."""
    request_timeout_ms = PAUSE_SOCKET_TIMEOUT_MS if fault == "pause" else SOCKET_TIMEOUT_MS
    common = {"transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 0}
    if driver_name == "java":
        # Java's commitTransaction takes no timeout: it blocks up to max.block.ms, then throws the retriable
        # TimeoutException (commitTransaction may be called again: KafkaProducer's javadoc). max.block.ms is
        # therefore the first commit's timeout, COMMIT_TIMEOUT_S as librdkafka's; it also bounds
        # initTransactions, which open_producer retries while the coordinator is being loaded.
        return {**common, "request.timeout.ms": request_timeout_ms, "max.block.ms": JAVA_MAX_BLOCK_MS}
    return {**common, "socket.timeout.ms": request_timeout_ms, "debug": "eos,protocol,broker"}


def open_producer(ctx: ScenarioContext, client: TxnProducerClient, timeout_s: float = 60.0) -> None:
    """client.open() (init_transactions, which creates __transaction_state), retried while it times out: with the
    Java client it waits only max.block.ms (5 s) for a coordinator that may still be loading."""
    deadline = time.monotonic() + timeout_s
    try:
        client.open(timeout_s)
        return
    except ClientException as exc:
        err = exc.error
    while err.retriable and time.monotonic() < deadline and client.producer is not None:
        ctx.step(f"init_transactions: {str(err)[:120]}, retried", error=str(err))
        try:
            client.producer.init_transactions(timeout_s)
            return
        except ClientException as exc:
            err = exc.error
    ctx.fail(f"init_transactions failed: {err}")


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
    # The transactional producer goes through the client driver (`scenario run --client`); the readers are
    # librdkafka's for both clients (ctx.consumer, read_all): read_committed is the broker's last stable
    # offset, whichever client asks, and one reader keeps the two clients' evidence alike.
    driver = ctx.driver if ctx.driver is not None else drivers.make()
    client = TxnProducerClient(ctx.pids(), ctx.recorder, ctx.cluster.bootstrap_servers(), ctx.topic, ctx.profile, TXN_ID,
                               driver=driver)
    client.config.update(client_config(driver.name, fault))
    with java_debug_logs() if driver.name == "java" else contextlib.nullcontext():
        open_producer(ctx, client)                        # init_transactions: creates __transaction_state
    assert client.producer is not None
    p = client.producer
    ctx.step(f"client: {driver.name}", "scenario-setup", client=driver.name, versions=driver.versions(),
             config={k: v for k, v in client.config.items() if k != "bootstrap.servers"})
    coord = coordinator_of(ctx.cluster, TXN_ID)
    K = ctx.cluster.node(coord["coordinator"])
    others = [b for b in ctx.cluster.brokers if b.node_id != K.node_id]
    ctx.step("transaction coordinator found", coordinator=coord)
    log_requests(ctx, K)
    levels = features(ctx)
    # RF 3, min ISR 2 (Scenario below): with min ISR 1 the checker permits an unseen write (an
    # acks=all write may then live on one broker), and so it called the torn txn2 of runs
    # 20261124T080030-5d1ee2 and -080342-46673a valid (unseen 1: b2, proven by b1's read).
    ctx.create_topic(others[:2] + [K], {"min.insync.replicas": 2})
    ctx.wait_isr(others[:2] + [K], 60)
    before = describe_txn(ctx, others[0], "after init_transactions")
    a1, b1, b2 = ctx._next_value, ctx._next_value + 1, ctx._next_value + 2
    ctx._next_value += 3

    # txn1: a1, then the commit is held up by the fault
    sends1 = [(0, a1)]
    ctx.recorder.record(client.process, "invoke", "txn", {"sends": [{"key": 0, "value": a1}], "records": []})
    p.begin_transaction()
    p.send(ctx.topic, 0, a1)
    ctx.step("txn1: a1 produced", value=a1, unflushed=p.flush(30))
    _fault_on(ctx, K, fault, coord)
    held_at = time.monotonic()
    first_err = _commit(ctx, p, COMMIT_TIMEOUT_S, "txn1, K held")
    first = None if first_err is None else str(first_err)
    time.sleep(max(0.0, (PAUSE_S if fault == "pause" else CUT_S) - (time.monotonic() - held_at)))
    _fault_off(ctx, K, fault)
    err = _commit_until(ctx, p, first_err, 15.0, RETRY_COMMIT_S, "txn1, retried")
    answer = None if err is None else error_text(err)
    txn1 = "ok" if err is None else "info"
    ctx.recorder.record(client.process, txn1, "txn", client.txn_value(sends1, []), answer)

    # txn2: b1, a long wait with a read_committed reader polling, then b2 and commit
    sends2 = [(0, b1), (0, b2)]
    ctx.recorder.record(client.process, "invoke", "txn", {"sends": [{"key": 0, "value": v} for _, v in sends2], "records": []})
    client.delivered = {}
    txn2, early, answer2 = "info", [], None
    try:
        p.begin_transaction()
        p.send(ctx.topic, 0, b1)
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
        p.send(ctx.topic, 0, b2)
        ctx.step("txn2: b2 produced", value=b2, unflushed=p.flush(30))
        err2 = _commit_until(ctx, p, _commit(ctx, p, 30.0, "txn2"), 30.0, 30.0, "txn2, retried")
        answer2 = None if err2 is None else error_text(err2)
        if err2 is None:
            txn2 = "ok"
        elif err2.txn_requires_abort:
            aborted = _abort(ctx, p, "txn2")
            if aborted is None:
                txn2 = "fail"
            else:
                answer2 += f"; abort failed: {error_text(aborted)}"
    except ClientException as exc:
        answer2 = error_text(exc)
        ctx.step(f"txn2 failed: {answer2[:160]}", error=answer2)
        aborted = _abort(ctx, p, "txn2")
        if aborted is None:
            txn2 = "fail"
        else:
            answer2 += f"; abort failed: {error_text(aborted)}"
    ctx.recorder.record(client.process, txn2, "txn", client.txn_value(sends2, []), answer2)
    ctx.step(f"txn2 ended: {txn2}", error=answer2)
    after = describe_txn(ctx, others[0], "at the end")
    try:
        client.close(10)
    except (ClientException, KafkaException):  # librdkafka's flush raises its fatal error (INVALID_TXN_STATE) as is
        pass
    committed, uncommitted = read_all(ctx, "read_committed"), read_all(ctx, "read_uncommitted")
    ctx.step("read everything", read_committed=committed, read_uncommitted=uncommitted)
    logged = client_log_lines(ctx, driver.name, lines.lines)
    sent = endtxn_versions(logged)
    received = broker_endtxn(K.read_log()[0].splitlines())
    ctx.step(f"EndTxn versions the {driver.name} client sent: {sent or 'not logged'}; K completed "
             f"{len(received)} EndTxn", client=driver.name, endtxn_versions=sent, endtxn_received=received)
    words = JAVA_WORDS if driver.name == "java" else LIBRDKAFKA_WORDS
    kept = [ln for ln in logged if any(w in ln.lower() for w in words)]
    return {"fault": fault, "client": driver.name, "client_versions": driver.versions(), "coordinator": coord, "features": levels,
            "transaction_version": transaction_version(levels),
            "endtxn_versions_sent": sent, "endtxn_versions_received": sorted({e["version"] for e in received}),
            "endtxn_received": received, "values": {"a1": a1, "b1": b1, "b2": b2},
            "first_commit": first, "txn1": txn1, "txn2": txn2, "txn2_error": answer2, "b1_visible_early": early,
            "read_committed": committed, "read_uncommitted": uncommitted, "describe_before": before, "describe_after": after,
            "coordinator_log": coordinator_log(ctx, K, coord["partition"]), "transaction_log": txn_log(ctx, K, coord["partition"]),
            "client_log": kept[-150:]}


def stale_endtxn_shown(summary: dict[str, Any]) -> bool:
    """KAFKA-17754 shown: b1 of the still-open txn2 became visible at read_committed (a delayed
    EndTxn committed it early), or the checker found an aborted read or a lost write."""
    obs, counts = summary["observations"], summary["history_counts"]
    return bool(obs.get("b1_visible_early")) or counts.get("aborted-read", 0) > 0 or summary["headline"]["lost"] > 0


EXPECTED = {
    "3.9.2 (transaction.version 1 at most)": "a stale EndTxn(commit) of txn1 that reaches K after txn2 began commits "
                                             "txn2's b1 early (KAFKA-17754), if a fault delays it past txn2's start",
    "4.x (transaction.version 2 finalized by default)": "fenced by the epoch bump, but only for EndTxn v5 (the coordinator's "
                                                        "TransactionVersion.transactionVersionForEndTxn: v5+ is TV2, below is TV1): "
                                                        "librdkafka sends EndTxn v0-v1 (rdkafka_request.c), so it is treated as TV1; "
                                                        "the Java client 4.x sends v5 to a cluster that finalized TV2",
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

# The scenarios whose driven client is chosen with `scenario run --client` (runner.clients_of).
DRIVER_SCENARIOS = frozenset(s.name for s in TXN_SCENARIOS)
