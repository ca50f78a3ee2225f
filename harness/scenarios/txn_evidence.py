"""Evidence of the KAFKA-17754 scenarios (txn_scenarios.py): what the client logged (librdkafka's protocol
debug, the Java client's DEBUG log), what the coordinator K logged and wrote (its request log, server.log and
decoded __transaction_state), kafka-transactions describe, and unrecorded reads."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from typing import Any, Iterator

from confluent_kafka import Consumer, KafkaError, TopicPartition

from harness.cluster.txn_coordinator import TXN_STATE_TOPIC
from harness.scenarios.context import ScenarioContext

TXN_ID = "kafka17754"
LIBRDKAFKA_WORDS = ("endtxn", "timed out", "disconnect", "txn", "commit", "abort", "pid", "epoch", "coordinator")
# The Java client's loggers at DEBUG (java_debug_logs): requests and their API versions, and the transaction's states
JAVA_DEBUG_LOGGERS = ("org.apache.kafka.clients.NetworkClient", "org.apache.kafka.clients.producer.internals.TransactionManager")
JAVA_WORDS = ("end_txn", "endtxn", "init_producer_id", "epoch", "transition", "disconnect", "timed out", "timeout", "fenced",
              "abort", "commit", "coordinator", "invalid_txn_state", "error")


class _Lines(logging.Handler):
    """librdkafka's log lines of the scenario's producer (its `logger`), kept as evidence."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.created:.3f} {record.getMessage()}"[:400])


ENDTXN_SENT = re.compile(r"Sent EndTxnRequest \(v(\d+)"  # librdkafka: "Sent EndTxnRequest (v1, 44 bytes @ 0, CorrId 39)"
                         r"|Sending END_TXN request with header RequestHeader\(apiKey=END_TXN, apiVersion=(\d+)")  # Java's NetworkClient


def endtxn_versions(lines: list[str]) -> list[int]:
    """EndTxn request versions the client logged sending: librdkafka's protocol debug ('Sent EndTxnRequest (v1, ...')
    or the Java client's NetworkClient at DEBUG ('Sending END_TXN request with header RequestHeader(apiKey=END_TXN,
    apiVersion=5, ...')."""
    return sorted({int(m.group(1) or m.group(2)) for ln in lines for m in ENDTXN_SENT.finditer(ln)})


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
    """K's server.log lines about the transactional.id or its __transaction_state partition (the request
    log's lines, which name the id too, are broker_endtxn's)."""
    text = node.read_log()[0].splitlines()
    keys = (TXN_ID, f"{TXN_STATE_TOPIC}-{partition}", "TransactionCoordinator", "TransactionMarker")
    return [ln[:400] for ln in text if any(k in ln for k in keys) and REQUEST_LOGGED not in ln][-limit:]


REQUEST_LOGGED = "Completed request:"
# Kafka's error codes an EndTxn answers with (org.apache.kafka.common.protocol.Errors)
ERROR_NAMES = {0: "NONE", 7: "REQUEST_TIMED_OUT", 15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR",
               47: "INVALID_PRODUCER_EPOCH", 48: "INVALID_TXN_STATE", 49: "INVALID_PRODUCER_ID_MAPPING",
               51: "CONCURRENT_TRANSACTIONS", 90: "PRODUCER_FENCED"}
# K's loggers at DEBUG while the scenario runs: every request K completes (version, producer epoch, answer), and
# the coordinator's reasons ("... returning PRODUCER_FENCED error to client for kafka17754's EndTransaction request")
BROKER_DEBUG_LOGGERS = ("kafka.request.logger", "kafka.coordinator.transaction.TransactionCoordinator")


def log_requests(ctx: ScenarioContext, node: Any) -> None:
    """K logs every request it completes, from now on (KIP-412's dynamic broker-loggers, kafka-configs): the
    broker's own record of each EndTxn that reached it (broker_endtxn), whichever client sent it. ConfigCommand
    moved from kafka.admin (3.x) to org.apache.kafka.tools (4.x)."""
    args = (f"--bootstrap-server {node.hostname}:9092 --alter --entity-type broker-loggers --entity-name {node.node_id} "
            "--add-config " + ",".join(f"{name}=DEBUG" for name in BROKER_DEBUG_LOGGERS))
    for main in ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"):
        code, out = ctx.tool(node, main, args, timeout_s=60)
        if code == 0 or not any(k in out for k in ("ClassNotFound", "Could not find or load main class")):
            break
    ctx.step(f"K ({node.node_id}) logs every request it completes (DEBUG: {', '.join(BROKER_DEBUG_LOGGERS)})", exit_code=code,
             output="\n".join(ln for ln in out.strip().splitlines() if "WARN" not in ln)[-400:])


def broker_endtxn(lines: list[str]) -> list[dict[str, Any]]:
    """Each EndTxn that K completed, from its request log ("[time] DEBUG Completed request:{json}
    (kafka.request.logger)"): when, the request's API version, correlation id, client id, producer id and
    epoch, commit or abort, and the error K answered with."""
    found = []
    for ln in lines:
        at = ln.find(REQUEST_LOGGED)
        if at < 0 or "END_TXN" not in ln and '"requestApiKey":26,' not in ln:
            continue
        body = ln[at + len(REQUEST_LOGGED):]
        body = body[:body.rfind("}") + 1]
        try:
            entry = json.loads(body)
        except ValueError:
            continue
        header, request, response = entry.get("requestHeader") or {}, entry.get("request") or {}, entry.get("response") or {}
        if header.get("requestApiKey") != 26:
            continue
        code = response.get("errorCode")
        found.append({"logged_at": ln[1:ln.find("]")] if ln.startswith("[") else None, "version": header.get("requestApiVersion"),
                      "correlation_id": header.get("correlationId"), "client_id": header.get("clientId"),
                      "producer_id": request.get("producerId"), "producer_epoch": request.get("producerEpoch"),
                      "commit": request.get("committed"), "error": ERROR_NAMES.get(code, code),
                      "answered_producer_epoch": response.get("producerEpoch"), "total_ms": entry.get("totalTimeMs"),
                      "connection": entry.get("connection")})
    return found


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


@contextlib.contextmanager
def java_debug_logs() -> Iterator[None]:
    """The Java client's EndTxn requests, with their API versions, in client.log: DEBUG for the loggers that
    name them (JAVA_DEBUG_LOGGERS; NetworkClient logs "Sending END_TXN request with header
    RequestHeader(apiKey=END_TXN, apiVersion=N, ...)"). The driver's JVM logs at INFO (java_worker.py); the
    levels go in through JDK_JAVA_OPTIONS, which the `java` launcher reads, for the JVM started inside."""
    old = os.environ.get("JDK_JAVA_OPTIONS")
    extra = " ".join(f"-Dorg.slf4j.simpleLogger.log.{name}=debug" for name in JAVA_DEBUG_LOGGERS)
    os.environ["JDK_JAVA_OPTIONS"] = f"{old} {extra}" if old else extra
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("JDK_JAVA_OPTIONS", None)
        else:
            os.environ["JDK_JAVA_OPTIONS"] = old


def client_log_lines(ctx: ScenarioContext, driver_name: str, rdk: list[str]) -> list[str]:
    """The client's own log lines of the scenario's producer: librdkafka's (its logger) or the Java client's (client.log)."""
    if driver_name != "java":
        return rdk
    try:
        text = ctx.client_log.read_text(errors="replace") if ctx.client_log is not None else ""
    except OSError:
        return []
    return [ln[:600] for ln in text.splitlines() if ln.strip()]
