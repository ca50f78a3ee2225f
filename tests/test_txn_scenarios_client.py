"""`scenario run --client/--client-version` (harness/scenario_commands.py, harness/scenarios/runner.py) and the
client-agnostic steps of the KAFKA-17754 scenarios (harness/scenarios/txn_scenarios.py): the refusals exit 2
before any container starts, the commit retry is the same for both clients, and what the steps record stays a
valid format v1 history. The real runs (one per client) are nightly: docker + chaos."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.history import Recorder
from harness.history.files import validate_history
from harness.scenario_commands import scenario
from harness.scenarios import get_scenario
from harness.scenarios import runner as runner_module
from harness.scenarios.txn_evidence import broker_endtxn, coordinator_log, endtxn_versions, java_debug_logs
from harness.scenarios.txn_scenarios import DRIVER_SCENARIOS, JAVA_MAX_BLOCK_MS, _commit_until, client_config
from workloads.drivers.base import ClientError, ClientException

NAME = "kafka17754-delayed-endtxn"


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal must come before anything starts: constructing a cluster fails the test."""
    def boom(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(runner_module, "KafkaCluster", boom)


def _run(*args: str, store: Path) -> Any:
    return CliRunner().invoke(scenario, ["run", *args, "--store", str(store)])


@pytest.mark.parametrize("args, message", [
    (["--client", "nope"], "unknown client 'nope'"),
    (["--client", "librdkafka", "--client-version", "0.0.1"], "not available for the librdkafka driver"),
    (["--client", "java", "--client-version", "banana"], "'banana' is not a kafka-clients version"),
    (["--client", "java", "--client-version", "2.8.0"], "older than the Java worker supports"),
])
def test_bad_client_input_exits_2_before_anything_starts(args: list[str], message: str, tmp_path: Path, no_cluster: None) -> None:
    result = _run(NAME, *args, store=tmp_path / "store")
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "store").exists()  # no run directory either


def test_a_scenario_that_drives_librdkafka_only_refuses_java(tmp_path: Path, no_cluster: None) -> None:
    result = _run("kip101-unclean-divergence", "--client", "java", store=tmp_path / "store")
    assert result.exit_code == 2
    assert "drives librdkafka only" in result.output and NAME in result.output


def test_only_the_kafka17754_scenarios_take_a_client() -> None:
    assert DRIVER_SCENARIOS == {"kafka17754-delayed-endtxn", "kafka17754-delayed-endtxn-pause"}
    assert runner_module.clients_of(get_scenario(NAME)) == ("librdkafka", "java")
    assert runner_module.clients_of(get_scenario("kip279-fast-failover")) == ("librdkafka",)


@pytest.mark.parametrize("args, client, version", [([], "librdkafka", None), (["--client", "java"], "java", None),
                                                   (["--client", "java", "--client-version", "4.3.1"], "java", "4.3.1")])
def test_the_choice_reaches_the_runner(args: list[str], client: str, version: str | None, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake_run(s: Any, kafka_version: Any, store: Any, command_line: Any = None, client: str = "", client_version: Any = None) -> Path:
        seen.update(name=s.name, client=client, client_version=client_version)
        return tmp_path

    monkeypatch.setattr(runner_module, "run_scenario", fake_run)
    monkeypatch.setattr("harness.scenarios.matrix.render_run", lambda run_dir, results: "rendered")
    result = _run(NAME, *args, store=tmp_path)
    assert result.exit_code == 0, result.output
    assert seen == {"name": NAME, "client": client, "client_version": version}


def test_endtxn_versions_from_the_java_clients_debug_log() -> None:
    lines = ["2026-11-26T06:00:00.000Z [kafka-producer-network-thread | producer-1] DEBUG org.apache.kafka.clients.NetworkClient - "
             "[Producer clientId=producer-1, transactionalId=kafka17754] Sending END_TXN request with header "
             "RequestHeader(apiKey=END_TXN, apiVersion=5, clientId=producer-1, correlationId=12, headerVersion=2) and timeout "
             "10000 to node 2: EndTxnRequestData(transactionalId='kafka17754', producerId=0, producerEpoch=0, committed=true)",
             "... Received END_TXN response from node 2 for request with header RequestHeader(apiKey=END_TXN, apiVersion=4, ...)",
             "1.0 Sent EndTxnRequest (v1, 56 bytes @ 0, CorrId 9)"]
    assert endtxn_versions(lines) == [1, 5]  # a response's header is not a request sent
    assert endtxn_versions(lines[:1]) == [5]


REQUEST_LOG = ('[2026-11-26 05:48:07,712] DEBUG Completed request:{"isForwarded":false,"requestHeader":{"requestApiKey":26,'
               '"requestApiVersion":5,"correlationId":19,"clientId":"producer-kafka17754","requestApiKeyName":"END_TXN"},'
               '"request":{"transactionalId":"kafka17754","producerId":0,"producerEpoch":0,"committed":true},'
               '"response":{"throttleTimeMs":0,"errorCode":90,"producerId":-1,"producerEpoch":-1},"connection":"a-b",'
               '"totalTimeMs":1.2} (kafka.request.logger)')


def test_the_brokers_request_log_names_each_endtxn_its_version_epoch_and_answer() -> None:
    produce = REQUEST_LOG.replace('"requestApiKey":26', '"requestApiKey":0').replace("END_TXN", "PRODUCE")
    assert broker_endtxn([produce, "[2026-11-26 05:48:08,000] INFO something else (kafka.server)", REQUEST_LOG,
                          REQUEST_LOG[:120]]) == [{  # a cut-off line is skipped
        "logged_at": "2026-11-26 05:48:07,712", "version": 5, "correlation_id": 19, "client_id": "producer-kafka17754",
        "producer_id": 0, "producer_epoch": 0, "commit": True, "error": "PRODUCER_FENCED", "answered_producer_epoch": -1,
        "total_ms": 1.2, "connection": "a-b"}]


def test_the_coordinator_log_leaves_the_request_log_out() -> None:
    class Node:
        def read_log(self) -> tuple[str, int]:
            return "\n".join([REQUEST_LOG, "[t] INFO Initialized transactionalId kafka17754 (kafka.coordinator)"]), 0

    assert coordinator_log(None, Node(), 44) == ["[t] INFO Initialized transactionalId kafka17754 (kafka.coordinator)"]  # type: ignore[arg-type]


def test_each_client_gets_its_own_request_timeout_and_commit_bound() -> None:
    java, rdk = client_config("java", "client-cut"), client_config("librdkafka", "client-cut")
    assert java["request.timeout.ms"] == rdk["socket.timeout.ms"] == 10_000
    assert java["max.block.ms"] == JAVA_MAX_BLOCK_MS == 5_000  # Java's commitTransaction has no timeout argument
    assert "socket.timeout.ms" not in java and "debug" not in java  # librdkafka's keys only
    assert "max.block.ms" not in rdk
    assert client_config("java", "pause")["request.timeout.ms"] == client_config("librdkafka", "pause")["socket.timeout.ms"] == 3_000


def test_java_debug_logs_is_scoped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JDK_JAVA_OPTIONS", "-Dx=1")
    with java_debug_logs():
        assert os.environ["JDK_JAVA_OPTIONS"].startswith("-Dx=1 ")
        assert "simpleLogger.log.org.apache.kafka.clients.NetworkClient=debug" in os.environ["JDK_JAVA_OPTIONS"]
    assert os.environ["JDK_JAVA_OPTIONS"] == "-Dx=1"
    monkeypatch.delenv("JDK_JAVA_OPTIONS")
    with java_debug_logs():
        pass
    assert "JDK_JAVA_OPTIONS" not in os.environ


TIMEOUT = ClientError("TimeoutException", "Timeout expired after 5000ms while awaiting EndTxn(COMMIT)", retriable=True)


class _Producer:
    """commit_transaction answers from a script: an error raises, None returns."""

    def __init__(self, answers: list[ClientError | None]) -> None:
        self.answers, self.calls = list(answers), 0

    def commit_transaction(self, timeout_s: float) -> None:
        self.calls += 1
        answer = self.answers.pop(0)
        if answer is not None:
            raise ClientException(answer)


class _Ctx:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder, self.steps = recorder, []

    def step(self, what: str, f: str = "scenario-step", **value: Any) -> None:
        self.recorder.nemesis(f, {"step": len(self.steps) + 1, "what": what, **value})
        self.steps.append(what)


def test_a_timed_out_commit_is_called_again_until_it_answers_and_the_history_stays_valid(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "history.jsonl")
    ctx = _Ctx(recorder)
    producer = _Producer([TIMEOUT, TIMEOUT, None])
    recorder.record(0, "invoke", "txn", {"sends": [{"key": 0, "value": 1}], "records": []})
    assert _commit_until(ctx, producer, TIMEOUT, 15.0, 60.0, "txn1, retried") is None  # type: ignore[arg-type]
    recorder.record(0, "info", "producer", {"producer_id": 0, "producer_epoch": 1})
    recorder.record(0, "ok", "txn", {"sends": [{"key": 0, "value": 1, "offset": 0, "epoch": None}], "records": []})
    recorder.close()
    assert producer.calls == 3 and len(ctx.steps) == 3
    assert validate_history(tmp_path / "history.jsonl") == []
    steps = [json.loads(ln) for ln in (tmp_path / "history.jsonl").read_text().splitlines() if '"nemesis"' in ln]
    assert [s["value"]["retriable"] for s in steps if "retriable" in s["value"]] == [True, True]


def test_a_commit_that_asks_for_an_abort_or_is_not_retriable_is_not_called_again(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "history.jsonl")
    abortable = ClientError("INVALID_TXN_STATE", "current transaction must be aborted", txn_requires_abort=True)
    assert _commit_until(_Ctx(recorder), _Producer([]), abortable, 15.0, 60.0, "x") is abortable  # type: ignore[arg-type]
    fenced = ClientError("PRODUCER_FENCED", "fenced", fatal=True)
    producer = _Producer([fenced])
    assert _commit_until(_Ctx(recorder), producer, TIMEOUT, 15.0, 60.0, "x") is fenced  # type: ignore[arg-type]
    assert producer.calls == 1
    recorder.close()


@pytest.mark.docker
@pytest.mark.chaos
@pytest.mark.slow
@pytest.mark.parametrize("client", ["java", "librdkafka"])
def test_kafka17754_runs_with_each_client(client: str, tmp_path: Path) -> None:
    """One real run per client on the default 4.x: the summary names the client and the EndTxn versions it
    sent, and the history is valid v1 (whatever the scenario found: the finding is not asserted)."""
    from harness.scenarios.runner import run_scenario

    run_dir = run_scenario(get_scenario(NAME), None, tmp_path, client=client)
    summary = json.loads((run_dir / "scenario.json").read_text())
    assert summary["client"]["name"] == client and summary["client"]["versions"]
    assert summary["observations"]["client"] == client
    assert summary["observations"]["endtxn_versions_sent"], "the client's EndTxn versions were not logged"
    assert validate_history(run_dir / "history.jsonl") == []


def test_the_matrix_runs_each_scenario_once_per_client_it_can_drive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`scenario matrix --clients librdkafka,java:3.9.1`: the KAFKA-17754 scenario once with each,
    a librdkafka-only scenario once and a 'not applicable' row for java; the client is a column."""
    ran: list[tuple[str, str, str, Any]] = []

    def fake_run(s: Any, kafka_version: Any, store: Any, command_line: Any = None, client: str = "", client_version: Any = None) -> Path:
        ran.append((s.name, kafka_version, client, client_version))
        run_dir = tmp_path / f"r{len(ran)}"
        run_dir.mkdir()
        versions = {"librdkafka": "2.16.0"} if client == "librdkafka" else {"kafka-clients": client_version or "4.4.0"}
        (run_dir / "scenario.json").write_text(json.dumps({
            "scenario": s.name, "kafka_version": kafka_version, "run_id": run_dir.name, "status": "completed", "bug_shown": False,
            "client": {"name": client, "versions": versions}, "headline": {"lost": 0, "diverged": 0, "detected_by_client": 0},
            "replica_divergence": {"diverged": False}, "observations": {}}))
        return run_dir

    monkeypatch.setattr(runner_module, "run_scenario", fake_run)
    result = CliRunner().invoke(scenario, ["matrix", "--versions", "4.4.0", "--scenarios", f"{NAME},kip279-fast-failover",
                                           "--clients", "librdkafka,java:3.9.1", "--no-checker", "--store", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert ran == [(NAME, "4.4.0", "librdkafka", None), (NAME, "4.4.0", "java", "3.9.1"),
                   ("kip279-fast-failover", "4.4.0", "librdkafka", None)]
    lines = result.output.splitlines()
    assert any(f"| {NAME} | 4.4.0 | java 3.9.1 | 0 |" in line for line in lines)
    assert any(f"| {NAME} | 4.4.0 | librdkafka 2.16.0 | 0 |" in line for line in lines)
    assert any("| kip279-fast-failover | 4.4.0 | java 3.9.1 |" in line and "not applicable | drives librdkafka only" in line
               for line in lines)


def test_an_unknown_client_in_the_matrix_is_exit_2_before_anything_runs(tmp_path: Path) -> None:
    result = CliRunner().invoke(scenario, ["matrix", "--clients", "librdkafka,jvm", "--store", str(tmp_path / "s")])
    assert result.exit_code == 2 and "unknown client 'jvm'" in result.output and not (tmp_path / "s").exists()
