"""The eos pipeline's transaction deadline, on a stand-in producer: a stuck transaction ends within
its bound as `info` (its worker to be replaced) or, when the abort returns, as `fail`."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from workloads import eos_pipeline
from workloads.clients import ConsumerClient
from workloads.drivers.base import ClientError, ClientException
from workloads.eos_pipeline import PipelineWorker
from workloads.profiles import get_profile
from workloads.txn_client import TxnProducerClient


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def record(self, process, type_, f, value=None, error=None) -> None:
        self.events.append((type_, f, error))


class StandIn:
    """A driver's transactional producer (workloads/drivers/base.py) whose steps hang (sleep out
    their timeout) or fail as told."""

    def __init__(self, flush_left: int = 0, commit: str = "ok", abort: str = "ok") -> None:
        self.flush_left, self.commit, self.abort = flush_left, commit, abort
        self.calls: list[str] = []

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def send(self, topic, partition, value) -> None:
        pass

    def flush(self, timeout: float) -> int:
        self.calls.append("flush")
        if self.flush_left:
            time.sleep(timeout)
        return self.flush_left

    def send_offsets_to_transaction(self, topic, offsets, consumer, timeout: float) -> None:
        self.calls.append("offsets")

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append("commit")
        if self.commit == "hang":
            time.sleep(timeout)
            raise ClientException(ClientError("_TIMED_OUT", "timed out", retriable=True))
        if self.commit == "abortable":
            raise ClientException(ClientError("INVALID_TXN_STATE", "abortable", txn_requires_abort=True))

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")
        if self.abort == "hang":
            time.sleep(timeout)
            raise ClientException(ClientError("_TIMED_OUT", "timed out", retriable=True))


def worker(producer: StandIn) -> PipelineWorker:
    recorder, profile = Recorder(), get_profile("safe")
    txn = TxnProducerClient(7, recorder, "127.0.0.1:1", "out", profile, "eos-0")  # not opened: the stand-in is its producer
    txn.producer = producer
    w = PipelineWorker(recorder, txn, ConsumerClient(7, recorder, "127.0.0.1:1", "in", profile, "eos"), [0])
    w.wl = SimpleNamespace(recorder=recorder)  # what the assertions below read the history from
    return w


RECORDS = [{"key": 0, "offset": o, "value": o, "epoch": 0} for o in range(3)]
SENDS = [(1000, 1_000_000_000 + o) for o in range(3)]
GROUP = SimpleNamespace()  # the consumer whose offsets the transaction sends


@pytest.fixture(autouse=True)
def short_bounds(monkeypatch):
    monkeypatch.setattr(eos_pipeline, "STEP_S", 0.2)
    monkeypatch.setattr(eos_pipeline, "TXN_DEADLINE_S", 0.5)
    monkeypatch.setattr(eos_pipeline, "ABORT_S", 0.2)


def run(producer: StandIn, abort: bool = False) -> tuple[PipelineWorker, str, float]:
    w = worker(producer)
    began = time.monotonic()
    outcome = w._transaction(RECORDS, SENDS, abort, GROUP)
    return w, outcome, time.monotonic() - began


def test_a_commit_that_never_returns_ends_info_within_the_deadline_and_asks_for_a_new_worker():
    w, outcome, took = run(StandIn(commit="hang"))
    assert outcome == "info" and took < 0.5 + 0.2
    assert w.txn.fatal and "commit unresolved" in w.txn.fatal  # the loop replaces the worker
    assert [e[:2] for e in w.wl.recorder.events] == [("invoke", "txn"), ("info", "txn")]
    # three tries: 0.2 + 0.2 + what is left (0.1 s); no abort, the commit may still complete
    assert w.txn.producer.calls.count("commit") == 3 and "abort" not in w.txn.producer.calls


def test_a_flush_that_never_delivers_is_aborted_and_fails_when_the_abort_returns():
    w, outcome, took = run(StandIn(flush_left=3))
    assert outcome == "fail" and not w.txn.fatal and took < 0.2 + 0.2 + 0.1
    assert w.txn.producer.calls == ["begin", "flush", "abort"]
    assert "undelivered" in w.wl.recorder.events[-1][2]


def test_a_stuck_transaction_whose_abort_hangs_too_ends_info():
    w, outcome, took = run(StandIn(flush_left=3, abort="hang"))
    assert outcome == "info" and w.txn.fatal.startswith("abort failed") and took < 0.2 + 0.2 + 0.1


def test_an_abortable_commit_error_aborts_and_a_fault_free_one_commits():
    w, outcome, _ = run(StandIn(commit="abortable"))
    assert outcome == "fail" and w.txn.producer.calls[-2:] == ["commit", "abort"]
    w, outcome, _ = run(StandIn())
    assert outcome == "ok" and [e[0] for e in w.wl.recorder.events] == ["invoke", "ok"]
    w, outcome, _ = run(StandIn(), abort=True)
    assert outcome == "fail" and w.wl.recorder.events[-1][2] == "aborted by the workload"


def test_init_transactions_is_tried_again_while_kafka_answers_retriable_and_not_otherwise(monkeypatch):
    """COORDINATOR_LOAD_IN_PROGRESS right after a start is Kafka asking for another try: the
    producer opens once the coordinator has loaded; a non-retriable error ends the open at once."""
    monkeypatch.setattr("workloads.txn_client.RETRY_INIT_S", 0.01)

    def client(answers):  # type: ignore[no-untyped-def]
        tries = []

        class Producer:
            def init_transactions(self, timeout_s):  # type: ignore[no-untyped-def]
                tries.append(timeout_s)
                answer = answers[min(len(tries) - 1, len(answers) - 1)]
                if answer is not None:
                    raise ClientException(answer)

        driver = SimpleNamespace(producer=lambda *a, **k: Producer())
        recorder = SimpleNamespace(record=lambda *a, **k: None)
        return TxnProducerClient(1, recorder, "127.0.0.1:1", "t", get_profile("safe"), "tx-1", driver=driver), tries

    loading = ClientError("COORDINATOR_LOAD_IN_PROGRESS", "Coordinator load in progress", retriable=True)
    txn, tries = client([loading, loading, None])
    assert txn.open(timeout_s=5.0) is txn and len(tries) == 3
    fenced = ClientError("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "denied")
    txn, tries = client([fenced])
    with pytest.raises(ClientException, match="denied"):
        txn.open(timeout_s=5.0)
    assert len(tries) == 1
    txn, tries = client([loading])
    began = time.monotonic()
    with pytest.raises(ClientException, match="load in progress"):
        txn.open(timeout_s=0.3)
    assert time.monotonic() - began < 2.0 and len(tries) > 1  # retried until the deadline, then the error
