"""One pipeline worker of the eos workload: consume a batch, then produce, commit the input
offsets and commit, all in one transaction bounded by one deadline (workloads/eos.py runs them).

Why a transaction costs what it costs. A transaction is four sequential round trips to the
coordinators, each waiting for a replicated write: AddPartitionsToTxn and the Produce (the flush),
AddOffsetsToTxn and TxnOffsetCommit (send_offsets_to_transaction), EndTxn (the commit). Measured on
4.3.1 (3 brokers, RF 3, min ISR 2, librdkafka 2.16) with only two such workers in a process, at a
load average of ~50 on the 2 cores: 0.09 s a transaction of 200 records (23 txn/s, 4,700 records/s),
0.16 s of 1000 (12.7 txn/s, 12,700 records/s). The same workers next to a 300/s feeder and two
read_committed readers in the same process: 0.9 s (2.2 txn/s); in the harness (which also records
every op): 1.2 s at 200 records (p50; flush 0.93 s, offsets 0.47 s, commit 0.16 s on average) and at
a load of ~100 0.2-0.7 txn/s whatever the settings (no delivery callbacks, a 0.5 ms GIL switch
interval). The cost is the client process's and the machine's contention, paid per transaction,
not a Kafka or librdkafka setting (librdkafka retries AddPartitionsToTxn after
CONCURRENT_TRANSACTIONS after a fixed 20 ms; the group metadata took 2-13 ms). So it is amortised:
BATCH 1000 instead of 200 took the harness's fault-free pipeline from 246 to 657 records/s.

Under faults any of those round trips can hang. Every client call gets at most STEP_S and the whole
transaction TXN_DEADLINE_S (then an abort gets ABORT_S), so a transaction ends within
TXN_DEADLINE_S + ABORT_S whatever the cluster does: `ok` when commit_transaction returned, `fail`
when abort_transaction returned, `info` otherwise (unknown: a commit may still complete). After an
`info` the worker is replaced: a new process whose init_transactions, with the same
transactional.id, fences this one and ends its open transaction.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from harness.history import Recorder
from harness.history.eos import OUTPUT_KEY_BASE, output_key, output_value
from workloads.clients import Clients, ConsumerClient
from workloads.drivers.base import ClientException, ConsumerDriver, QueueFull
from workloads.outcomes import error_text
from workloads.txn_client import TxnProducerClient

log = logging.getLogger(__name__)

BATCH = 1000  # input records per transaction at most (see the module docstring)
# Fault-free under a load average of ~50 a flush of 1000 records took up to 3.4 s, so a step gets 6 s;
# the worst transaction (18 + 5 s) plus a close still ends inside the 30 s the stop leaves threads.
STEP_S = 6.0  # one client call of a transaction at most
TXN_DEADLINE_S = 18.0  # flush, offsets and commit of one transaction together
ABORT_S = 5.0  # the abort after a failed or timed-out step
OPEN_S = 10.0  # init_transactions of a new incarnation
COMMIT_TRIES = 4  # commit_transaction retried on retriable errors, within the deadline


class Stuck(Exception):
    """A step of the transaction did not finish before its deadline."""


class StepTimes:
    """Per-step count, total and longest seconds of one worker's transactions (logged at close)."""

    def __init__(self) -> None:
        self.steps: dict[str, list[float]] = {}

    def add(self, step: str, seconds: float) -> None:
        n, total, top = self.steps.get(step, [0, 0.0, 0.0])
        self.steps[step] = [n + 1, total + seconds, max(top, seconds)]

    def lap(self, step: str, since: float) -> float:
        now = time.monotonic()
        self.add(step, now - since)
        return now

    def __str__(self) -> str:
        return ", ".join(f"{s} n={n:.0f} mean={t / n:.3f} max={m:.3f}" for s, (n, t, m) in self.steps.items())


class PipelineWorker:
    """One incarnation of a pipeline worker: a read_committed consumer of the input topic and a
    transactional producer to the output topic, recorded as one process (they act as one client: a
    txn holds the consumer's reads). Given its two clients, the history and its share of the input's
    partitions; it knows nothing of the workload that runs it (workloads/eos.py)."""

    def __init__(self, recorder: Recorder, txn: TxnProducerClient, consumer: ConsumerClient, share: list[int]) -> None:
        assert txn.process == consumer.process, "the pipeline's two clients are one process"
        self.recorder, self.txn, self.consumer, self.share = recorder, txn, consumer, share
        self.process = txn.process
        self.times = StepTimes()

    @classmethod
    def made(cls, clients: Clients, input_topic: str, output_topic: str, group_id: str, transactional_id: str,
             share: list[int]) -> "PipelineWorker":
        """A new incarnation (a new process), not open yet: its consumer reads `input_topic` in the
        group `group_id`, whose committed offsets its transactions move; its producer writes
        `output_topic` as `transactional_id`."""
        process = clients.process_ids()
        txn = clients.txn_producer(output_topic, transactional_id, process)
        consumer = clients.consumer(input_topic, group_id, process=process, report_eof=False,
                                    extra={"auto.offset.reset": "earliest", "enable.auto.commit": False})
        return cls(clients.recorder, txn, consumer, share)

    def open(self) -> "PipelineWorker":
        # Fences the previous incarnation and ends its open transaction; bounded, so that a worker
        # replaced during a fault tries again (a new process) instead of waiting out the run.
        self.txn.open(OPEN_S)
        self.consumer.open()
        self.rewind()
        return self

    def rewind(self) -> bool:
        """Read on from the group's committed offsets (recorded as an assign that seeks them)."""
        assert self.consumer.consumer is not None
        try:
            self.consumer.consumer.unassign()
        except ClientException:
            pass
        return self.consumer.assign(self.share, "committed")

    def step(self, attempt: int, abort: bool) -> str | None:
        """Consume a batch and process it in one transaction; None when nothing was read."""
        c = self.consumer.consumer
        assert c is not None
        t0 = time.monotonic()
        try:
            batch = c.consume(BATCH, 0.1)
        except ClientException as exc:
            log.info("pipeline %s consume: %s", self.process, exc)
            return None
        self.times.lap("consume", t0)
        records = [{"key": r.partition, "offset": r.offset, "value": r.value, "epoch": r.epoch} for r in batch.records]
        if batch.errors and not records:
            # Measured: the first committed-offset fetch failed with NOT_COORDINATOR while the group
            # coordinator was starting, and librdkafka never fetched again: the worker read nothing for
            # a whole run. Assigning again fetches the committed offsets again.
            log.info("pipeline %s: %s; assigning again", self.process, batch.errors[0])
            time.sleep(0.2)
            self.rewind()
        if not records:
            return None
        sends = [(output_key(r["key"]), output_value(r["value"], attempt)) for r in records]
        outcome = self._transaction(records, sends, abort, c)
        if outcome == "fail" and not self.txn.fatal:
            self.rewind()  # the aborted input is read again from the committed offsets
        elif outcome == "info" and not self.txn.fatal:
            # Its offsets may or may not be committed: only a new incarnation (which fences this
            # one and reads the committed offsets afresh) knows where to read on.
            self.txn.fatal = "transaction outcome unknown"
        return outcome

    def _transaction(self, records: list[dict], sends: list[tuple[int, int]], abort: bool, c: ConsumerDriver) -> str:
        rec, p, producer, times = self.recorder, self.process, self.txn.producer, self.times
        assert producer is not None
        rec.record(p, "invoke", "txn", {"sends": [{"key": k, "value": v} for k, v in sends], "records": []})
        self.txn.delivered = {}
        deadline = time.monotonic() + TXN_DEADLINE_S

        def left(step: str) -> float:
            """This step's timeout: STEP_S, or what is left of the transaction's deadline."""
            s = min(STEP_S, deadline - time.monotonic())
            if s <= 0:
                raise Stuck(f"transaction deadline of {TXN_DEADLINE_S:g} s passed before {step}")
            return s

        def value() -> dict[str, Any]:
            return self.txn.txn_value(sends, records)

        t0 = time.monotonic()
        try:
            producer.begin_transaction()
        except ClientException as exc:  # a local state error: nothing was sent
            self.txn.note_fatal(exc)
            rec.record(p, "fail", "txn", value(), error_text(exc))
            return "fail"
        reason = "aborted by the workload"
        try:
            for k, v in sends:
                producer.send(self.txn.topic, k - OUTPUT_KEY_BASE, v)
            # Flushed before the offsets are sent (not left to commit_transaction), so the history's
            # sends carry their offsets whatever happens next. Leaving it to the commit showed no
            # clear gain: send_offsets_to_transaction then took the flush's time instead (0.9 s a
            # transaction of 200 records, fault-free, against 0.2 s flush + 0.14 s offsets).
            undelivered = producer.flush(left("the flush"))
            t0 = times.lap("flush", t0)
            if undelivered:
                raise Stuck(f"{undelivered} output records undelivered after the flush")
            last: dict[int, int] = {}
            for r in records:
                last[r["key"]] = max(last.get(r["key"], -1), r["offset"])
            producer.send_offsets_to_transaction(self.consumer.topic, {k: o + 1 for k, o in sorted(last.items())}, c,
                                                 left("send_offsets_to_transaction"))
            t0 = times.lap("send_offsets", t0)
            if not abort:
                outcome = self._commit(value, left)
                times.lap("commit", t0)
                times.add("records", len(records))
                return outcome
        except (ClientException, QueueFull, Stuck) as exc:
            if isinstance(exc, ClientException) and self.txn.note_fatal(exc):
                rec.record(p, "info", "txn", value(), error_text(exc))
                return "info"
            reason = (error_text(exc) if isinstance(exc, ClientException)
                      else f"local queue full: {exc}" if isinstance(exc, QueueFull) else str(exc))
        return self._abort(value, reason)

    def _commit(self, value: Callable[[], dict[str, Any]], left: Callable[[str], float]) -> str:
        """commit_transaction until it returns, a non-retriable error, COMMIT_TRIES tries or the deadline."""
        producer, rec, p = self.txn.producer, self.recorder, self.process
        assert producer is not None
        last = "no try"
        for _ in range(COMMIT_TRIES):
            try:
                producer.commit_transaction(left("commit_transaction"))
                rec.record(p, "ok", "txn", value())
                return "ok"
            except Stuck as exc:
                last = str(exc)
                break
            except ClientException as exc:
                err, last = exc.error, error_text(exc)
                if self.txn.note_fatal(exc) or (not err.retriable and not err.txn_requires_abort):
                    rec.record(p, "info", "txn", value(), last)
                    return "info"
                if err.txn_requires_abort:
                    return self._abort(value, last)
        # Retriable and still unknown: the commit may yet complete. A new incarnation settles it.
        rec.record(p, "info", "txn", value(), f"commit unresolved: {last}")
        self.txn.fatal = f"commit unresolved within {TXN_DEADLINE_S:g} s: {last}"
        return "info"

    def _abort(self, value: Callable[[], dict[str, Any]], reason: str) -> str:
        producer, rec, p = self.txn.producer, self.recorder, self.process
        assert producer is not None
        try:
            producer.abort_transaction(ABORT_S)
        except ClientException as exc:  # the abort did not finish: the transaction's fate is unknown
            self.txn.note_fatal(exc)
            self.txn.fatal = self.txn.fatal or f"abort failed: {error_text(exc)}"
            rec.record(p, "info", "txn", value(), f"{reason}; abort failed: {error_text(exc)}")
            return "info"
        rec.record(p, "fail", "txn", value(), reason)
        return "fail"

    def close(self) -> None:
        log.info("pipeline %s step times: %s", self.process, self.times)
        # A short flush: a replaced worker's producer may be stuck, and its open transaction is the
        # next incarnation's to end (init_transactions fences it).
        self.txn.close(timeout_s=1)
        self.consumer.close()
