"""How a client error becomes an outcome: `fail` only when the operation provably did not happen.

Everything else is `info` (unknown), because a checker that counts an unknown
send as failed would call a record that Kafka did keep "unexpected" and,
worse, could hide a real loss behind a wrong premise.

A send is `fail` when:
- `produce()` raised synchronously (the message never entered librdkafka's
  queue: unknown partition, message too large, producer fenced/in error state);
- the delivery report carries an error that is a *static* property of the
  message or the client's permissions, which every earlier attempt would
  have hit as well: MSG_SIZE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_RECORD,
  INVALID_REQUIRED_ACKS, TOPIC/CLUSTER_AUTHORIZATION_FAILED, and librdkafka's
  local _INVALID_ARG.

Everything else is `info`, notably: _UNKNOWN_PARTITION / _UNKNOWN_TOPIC in a delivery report
(librdkafka fails every message of a partition that vanishes from the metadata, including ones
already sent: on 0.10.2.2 under kills and cuts, issue 21, 3,080 values a consumer had read at
offsets up to 30 s earlier were reported `Local: Unknown partition` afterwards, e.g. key 7
value 199: sent 19.96 s, read at offset 143 at 49.53 s, failed 135.56 s), _MSG_TIMED_OUT (it may have been sent and
appended before the timeout), _TRANSPORT / _ALL_BROKERS_DOWN / REQUEST_TIMED_OUT,
NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS (an earlier attempt of a retried
message may have been appended; confluent-kafka does not expose librdkafka's
per-message persistence status), NOT_ENOUGH_REPLICAS_AFTER_APPEND (appended on
the leader), _PURGE_QUEUE / _PURGE_INFLIGHT (a retried message goes back to the
queue), and fatal idempotence errors (_FATAL, OUT_OF_ORDER_SEQUENCE_NUMBER,
UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH, _GAPLESS_GUARANTEE): the producer
stops, but what it sent before may be in the log.

The Java client (workloads/drivers/java.py) names a broker error as Kafka's protocol does
(`Errors.forException`: NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, MESSAGE_TOO_LARGE) and any
other exception by its class (TimeoutException for an expired delivery, KafkaException,
IllegalStateException). Its only definite send failures are the same static properties:
MESSAGE_TOO_LARGE (RecordTooLargeException, raised locally for max.request.size or by the broker),
RECORD_LIST_TOO_LARGE, INVALID_RECORD, INVALID_REQUIRED_ACKS and the two authorization failures.
Everything else is `info`, notably what KafkaProducer.send() threw itself: it may throw after the
record was appended (it adds the partition to the transaction after the append), so a synchronous
exception does not prove the record unwritten; TimeoutException (expired in the accumulator or in
flight); KafkaException "Producer is closed forcefully" (the driver's purge); and JvmExited (the
JVM died with the send unresolved). docs/history.md has the whole table.

A poll that raised returned nothing and changes nothing a checker reads, so
it is `fail`. A transaction is `ok` when commit_transaction() returned, `fail`
when abort_transaction() returned (an abort that succeeded aborts the whole
transaction), and `info` when neither finished (timeouts, fatal errors).
"""

from __future__ import annotations

from workloads.drivers.base import ClientError, ClientException

# By the client's own name of the error (ClientError.name): librdkafka's names, and the Java
# client's where they differ (a name shared by both means the same broker error in each).
DEFINITE_SEND_FAILURES = frozenset({
    "MSG_SIZE_TOO_LARGE",
    "RECORD_LIST_TOO_LARGE",
    "INVALID_RECORD",
    "INVALID_REQUIRED_ACKS",
    "TOPIC_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION_FAILED",
    "_INVALID_ARG",
    "_MSG_SIZE_TOO_LARGE",  # librdkafka's local twin of MSG_SIZE_TOO_LARGE, where a version has it
    "MESSAGE_TOO_LARGE",  # Java: RecordTooLargeException (Kafka's name for what librdkafka calls MSG_SIZE_TOO_LARGE)
})


def send_outcome(err: ClientError) -> str:
    """`fail` or `info` for a send whose delivery outcome carries `err`."""
    return "fail" if err.name in DEFINITE_SEND_FAILURES else "info"


def error_text(err: ClientError | BaseException | object) -> str:
    """A stable, readable error string: the client's error name, then its message."""
    if isinstance(err, ClientException):
        err = err.error
    if isinstance(err, ClientError):
        return str(err)
    if isinstance(err, BaseException) and err.args and _named(err.args[0]):
        err = err.args[0]  # confluent-kafka's KafkaException carries its KafkaError
    if _named(err):
        return f"{err.name()}: {err.str()}"  # type: ignore[attr-defined]
    return f"{type(err).__name__}: {err}"


def _named(err: object) -> bool:
    """A client library's own error object (confluent-kafka's KafkaError: name(), str()), as the
    scenarios that drive librdkafka by hand still pass it (harness/scenarios/txn_scenarios.py)."""
    return callable(getattr(err, "name", None)) and callable(getattr(err, "str", None))
