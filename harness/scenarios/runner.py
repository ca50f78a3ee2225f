"""Running one scenario on one Kafka version: a fresh cluster, the scenario's steps over a
`ScenarioContext`, heal, drain, replica dumps, and `scenario.json`, in a run directory whose
lifecycle (config.json, FAILED, tearing down) is harness/run/directory.py's, as for a run."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from harness.cluster import KafkaCluster
from harness.cluster import replicas as replica_evidence
from harness.errors import HarnessError
from harness.history import Recorder
from harness.provision.kafka_jars import kraft_supported
from harness.provision.settings import kafka_version as resolve_kafka_version
from harness.run.directory import RunDirectory
from harness.scenarios import Scenario
from harness.scenarios.context import TOPIC, ScenarioContext, ScenarioIncomplete, scenario_profile
from workloads import drivers


def clients_of(scenario: Scenario) -> tuple[str, ...]:
    """The client drivers a scenario's steps go through: the KAFKA-17754 scenarios drive their
    transactional producer through the driver protocol (workloads/drivers/base.py), so either client;
    every other scenario writes through librdkafka only."""
    from harness.scenarios.txn_scenarios import DRIVER_SCENARIOS

    return drivers.names() if scenario.name in DRIVER_SCENARIOS else (drivers.DEFAULT,)


def refuse_client(scenario: Scenario, client: str, client_version: str | None) -> None:
    """`run`'s refusals for --client and --client-version (harness/run/config.py, profile.py), before
    anything starts: an unknown client, a scenario that cannot drive it, a kafka-clients version that
    does not resolve, a librdkafka version other than the installed one. Raises HarnessError."""
    if client not in drivers.names():
        raise HarnessError(f"unknown client {client!r}.", hint=f"use --client {' or --client '.join(drivers.names())}")
    served = clients_of(scenario)
    if client not in served:
        raise HarnessError(f"scenario {scenario.name} drives {' and '.join(served)} only, not the {client} client.",
                           hint="leave --client out, or pick a scenario that takes it: "
                                + ", ".join(sorted(n for n in _names() if client in clients_of(_scenario(n)))))
    drivers.make(client, client_version).close()  # java: resolves (builds once, cached) that kafka-clients; librdkafka: its own only


def _names() -> list[str]:
    from harness.scenarios import scenarios

    return list(scenarios())


def _scenario(name: str) -> Scenario:
    from harness.scenarios import get_scenario

    return get_scenario(name)


def run_scenario(scenario: Scenario, kafka_version: str | None, store: Path | str, command_line: list[str] | None = None,
                 client: str = drivers.DEFAULT, client_version: str | None = None) -> Path:
    """Run one scenario on one version; return the run directory. Raises HarnessError on
    infrastructure failure (the run directory is marked FAILED; harness/run/directory.py). A step that
    cannot be carried out (an election that never happens) is a result, not a failure: status
    "incomplete". `client`, `client_version`: the driver of the scenario's recorded clients where it
    takes one (clients_of), as `run --client`; refused before anything starts otherwise."""
    if not scenario.runnable or scenario.steps is None:
        raise HarnessError(f"scenario {scenario.name} is not runnable: {scenario.reason}")
    refuse_client(scenario, client, client_version)
    version = resolve_kafka_version(kafka_version)
    profile = scenario_profile(scenario)
    # KRaft: D is a separate controller; ZooKeeper era: D is a fourth broker, the one elected controller.
    kraft = kraft_supported(version)
    refused = scenario.serves(kraft)
    if refused:
        raise HarnessError(f"scenario {scenario.name} cannot run on Kafka {version}: {refused}.",
                           hint="pick a KRaft version, e.g. --kafka-version 3.9.2 or 4.3.1")
    brokers, controllers = (3, 1) if scenario.controller_apart and kraft else (4 if scenario.controller_apart else 3, 0)
    record: dict[str, Any] = {
        "seed": 0, "kafka_version": version, "brokers": brokers, "workload": f"scenario:{scenario.name}",
        "profile": profile.as_dict(), "partitions": 1, "replication_factor": scenario.replication_factor,
        "producers": None, "consumers": None, "topic": TOPIC, "nemesis": ["scenario"], "scenario": scenario.summary(),
        "broker_config": scenario.broker_config, "topic_config": None, "command_line": " ".join(command_line or []),
        "drain": None, "lossy_data": scenario.lossy_data, "client": {"name": client, "version": client_version},
    }
    began = time.monotonic()
    with RunDirectory(store, record) as rd:
        recorder = rd.own(Recorder(rd.path / "history.jsonl"))
        cluster = rd.own(KafkaCluster(brokers=brokers, kafka_version=version, broker_config=dict(scenario.broker_config),
                                      controllers=controllers, run_id=rd.run_id, work_dir=rd.path, ready_timeout_s=180,
                                      lossy_data=scenario.lossy_data))
        rd.write("cluster.json", cluster.describe())
        # The JVM of the Java driver starts at its first client and logs to client.log; it ends with the run.
        driver = rd.own(contextlib.closing(drivers.make(client, client_version, log_path=rd.path / "client.log")))
        ctx = ScenarioContext(cluster, recorder, profile, version, controller_apart=scenario.controller_apart, driver=driver,
                              client_log=rd.path / "client.log")
        status, reason, observations = "completed", None, {}
        try:
            observations = scenario.steps(ctx) or {}
        except ScenarioIncomplete as exc:
            status, reason = "incomplete", str(exc)
        finally:
            ctx.stop_pollers()
        if not ctx.replica_ids:
            raise HarnessError(f"scenario {scenario.name} stopped before it created its topic: {reason}")
        ctx.heal()
        ctx.ensure_all_running()
        ctx.wait_isr([cluster.node(i) for i in ctx.replica_ids], timeout_s=30)  # the steps waited already; a short second chance
        drain = ctx.drain()
        evidence = replica_evidence.collect(cluster, TOPIC, [0], version, {0: ctx.replica_ids}, rd.path)
        recorder.close()
        rd.update(client={"name": client, "version": client_version, "versions": driver.versions()})
        rd.update(status="completed", drain=drain, counts=dict(recorder.counts), topic_config=ctx.topic_config,
                  seconds={"total": round(time.monotonic() - began, 3)})
        rd.write("scenario.json", summarize(scenario, version, rd.path, status, reason, ctx, observations, evidence, drain))
    return rd.path


def summarize(scenario: Scenario, version: str, run_dir: Path, status: str, reason: str | None, ctx: ScenarioContext,
              observations: dict[str, Any], evidence: dict[str, Any], drain: dict[str, Any]) -> dict[str, Any]:
    """scenario.json: steps, writes, observations, replica divergence and history counts (reference checker)."""
    from analysis.reference.checker import counts as reference_counts, read_jsonl
    from analysis.rules.verdict import headline

    counts = reference_counts(read_jsonl(run_dir / "history.jsonl"))
    div = evidence["partitions"]["0"]["divergence"]
    lost = headline(counts, drain.get("complete"))["lost"]  # the verdict's own reading of unseen records
    summary = {
        "scenario": scenario.name, "kip": scenario.kip, "kafka_version": version, "run_id": run_dir.name,
        "client": ctx.client_record(),
        "status": status, "incomplete_reason": reason,
        "roles": ctx.roles(),
        "writes": ctx.writes, "observations": observations,
        "replica_divergence": {k: div[k] for k in ("diverged", "first_offset", "diverged_offsets", "log_end_offsets")}
        | {"differences": div["differences"][:5]},
        "history_counts": counts,
        "headline": {"lost": lost, "diverged": counts["inconsistent-offsets"], "replica_diverged": div["diverged"],
                     "detected_by_client": observations.get("detected_by_client")},
        "steps": ctx.steps,
    }
    summary["bug_shown"] = scenario.shows_bug(summary) if scenario.shows_bug and status == "completed" else None
    return summary
