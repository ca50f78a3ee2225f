"""A user's Kafka settings (issue 35 item 5): --broker-config, --topic-config, --producer-config,
--consumer-config and their TOML tables. Each bad-input case exits 2 before anything starts, judged
by the real judges (Kafka's ConfigDefs in the version's jars, librdkafka itself, the Java client's
ConfigDefs); the effective profile says where each value came from; secrets are never written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import harness.run.steps
from harness.cli import cli
from harness.errors import HarnessError
from harness.kafka_settings.given import REDACTED, parse_pairs, redact_argv
from harness.provision.settings import DEFAULT_KAFKA_VERSION
from harness.run.config import RunConfig
from harness.run.profile import effective_profile
from workloads.profile_settings import apply
from workloads.profiles import get_profile

SAFE = get_profile("safe")


def config(tmp_path: Path, **kw) -> RunConfig:
    return RunConfig(store=tmp_path / "store", **kw)


def refusal(tmp_path: Path, **kw) -> str:
    with pytest.raises(HarnessError) as caught:
        effective_profile(config(tmp_path, **kw), get_profile(kw.get("profile", "safe")), DEFAULT_KAFKA_VERSION)
    assert not (tmp_path / "store").exists()  # nothing was made
    return caught.value.message


def test_pairs_from_flags_and_from_toml_tables_nested_or_quoted():
    assert parse_pairs("producer", ("acks=1", "linger.ms = 5")) == {"acks": "1", "linger.ms": "5"}
    assert parse_pairs("producer", {"linger": {"ms": 5}, "enable.idempotence": False}) == \
        {"linger.ms": "5", "enable.idempotence": "false"}
    for bad in (("acks",), ("=1",), ("acks=1", "acks=all")):
        with pytest.raises(HarnessError, match="--producer-config"):
            parse_pairs("producer", bad)


def test_a_typo_is_refused_with_the_key_and_the_likely_fix(tmp_path):
    message = refusal(tmp_path, settings={"producer": {"lingr.ms": "5"}, "broker": {"min.insync.replica": "2"}})
    assert "--producer-config lingr.ms: librdkafka" in message and "did you mean linger.ms?" in message
    assert f"--broker-config min.insync.replica: Kafka {DEFAULT_KAFKA_VERSION} has no such setting" in message
    assert "did you mean min.insync.replicas?" in message


def test_a_value_of_the_wrong_type_or_range_is_refused_by_the_client_and_by_kafka(tmp_path):
    message = refusal(tmp_path, settings={"consumer": {"isolation.level": "read_comitted"},
                                          "topic": {"min.insync.replicas": "0"},
                                          "broker": {"log.flush.interval.messages": "often"}})
    assert '--consumer-config isolation.level: librdkafka' in message and "read_comitted" in message
    assert "--topic-config min.insync.replicas" in message and "at least 1" in message
    assert "--broker-config log.flush.interval.messages" in message and "LONG" in message


def test_a_setting_the_chosen_client_does_not_have_is_refused(tmp_path):
    # isolation.level is a consumer's: librdkafka takes it in a producer only to ignore it
    assert "--producer-config isolation.level: librdkafka" in refusal(tmp_path, settings={"producer": {"isolation.level": "read_committed"}})
    # max.block.ms is the Java client's; librdkafka has no such setting
    assert "--producer-config max.block.ms" in refusal(tmp_path, settings={"producer": {"max.block.ms": "1000"}})


def test_a_contradiction_the_client_would_refuse_at_run_time_is_refused_now(tmp_path):
    both = refusal(tmp_path, settings={"producer": {"enable.idempotence": "true", "acks": "1"}})
    assert "refuses the client's settings together" in both and "enable.idempotence" in both
    txn = refusal(tmp_path, workload="txn", settings={"producer": {"acks": "1"}})
    assert "transactional.id" in txn


def test_keys_the_harness_owns_and_broker_credentials_are_refused(tmp_path):
    message = refusal(tmp_path, settings={"producer": {"transactional.id": "x"}, "broker": {"ssl.keystore.password": "x"},
                                          "consumer": {"group.id": "g"}})
    assert "--producer-config transactional.id: the harness sets it itself" in message
    assert "--consumer-config group.id" in message and "--broker-config ssl.keystore.password" in message


def test_the_java_client_judges_with_its_own_config_defs(tmp_path):
    from harness.kafka_settings.check import problems_of
    from harness.provision.kafka_jars import ensure_kafka_jars

    given = {"producer": {"message.timeout.ms": "5"}, "consumer": {"group.protocol": "consumer", "session.timeout.ms": "9000"}}
    found = problems_of(given, client="java", kafka_version=DEFAULT_KAFKA_VERSION, client_version=DEFAULT_KAFKA_VERSION,
                        whole=lambda scope: apply(SAFE, given).consumer_config() if scope == "consumer" else {},
                        brokers=3, libs=lambda v: ensure_kafka_jars(v).libs)
    assert any("--producer-config message.timeout.ms: the Java client" in p for p in found), found  # librdkafka's name
    assert any("session.timeout.ms" in p and "group.protocol" in p.lower() for p in found), found


def test_acks_1_turns_the_profiles_idempotence_off_and_says_so():
    effective = apply(SAFE, {"producer": {"acks": "1"}})
    assert (effective.acks, effective.enable_idempotence) == ("1", False)
    assert effective.sources["acks"] == "--producer-config"
    assert effective.sources["enable.idempotence"] == "implied by acks=1 (--producer-config)"
    assert effective.as_dict()["acks"] == "1" and effective.as_dict()["enable.idempotence"] is False
    assert apply(SAFE, {}) is SAFE


def test_a_broker_default_reaches_the_topic_unless_the_topic_sets_it():
    inherited = apply(SAFE, {"broker": {"min.insync.replicas": "3"}})
    assert inherited.min_insync_replicas == 3 and "min.insync.replicas" not in inherited.topic_config()
    assert inherited.sources["min.insync.replicas"] == "--broker-config min.insync.replicas, inherited by the topic"
    own = apply(SAFE, {"broker": {"min.insync.replicas": "3"}, "topic": {"min.insync.replicas": "1"}})
    assert own.min_insync_replicas == 1 and own.topic_config()["min.insync.replicas"] == "1"
    assert apply(SAFE, {"topic": {"retention.ms": "60000"}}).topic_config()["retention.ms"] == "60000"


def test_a_secret_reaches_the_client_but_never_the_record_or_the_command_line():
    effective = apply(SAFE, {"producer": {"sasl.password": "hunter2", "linger.ms": "7"}})
    assert effective.producer_config()["sasl.password"] == "hunter2"  # the client gets it
    written = json.dumps(effective.as_dict())
    assert "hunter2" not in written and REDACTED in written and '"linger.ms": "7"' in written
    argv = ["run", "--producer-config", "sasl.password=hunter2", "--consumer-config=ssl.key.password=x", "--seed", "3"]
    assert "hunter2" not in " ".join(redact_argv(argv)) and "x" not in redact_argv(argv)[3].split("=")[-1]
    assert redact_argv(argv)[-2:] == ["--seed", "3"]


@pytest.fixture
def started(monkeypatch):
    """`run` through the command line up to the point where a cluster would start; returns the RunConfig."""
    class Captured(Exception):
        pass

    def fake_run(config, faults=None, progress=None):
        raise Captured(config)

    monkeypatch.setattr(harness.run.steps, "run", fake_run)

    def invoke(args):
        result = CliRunner().invoke(cli, ["run", "--no-check", *args])
        if isinstance(result.exception, Captured):
            return result.exception.args[0]
        return result

    return invoke


def test_flags_and_toml_tables_combine_key_by_key(started, tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('[producer-config]\nlinger.ms = 20\nacks = "1"\n[topic-config]\n"retention.ms" = 60000\n')
    config = started(["--config", str(toml), "--producer-config", "acks=all", "--group-protocol", "consumer", "--subscribe",
                      "--controllers", "3"])
    assert config.settings == {"producer": {"linger.ms": "20", "acks": "all"}, "topic": {"retention.ms": "60000"}}
    assert (config.group_protocol, config.controllers, config.client) == ("consumer", 3, "librdkafka")


def test_a_replay_keeps_the_settings_and_asks_again_for_a_secret(started, tmp_path):
    run_dir = tmp_path / "store" / "20261125T000000-abcdef"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({
        "seed": 7, "workload": "queue", "config_format": 2, "client": {"name": "librdkafka", "version": None},
        "controllers": 1, "settings": {"producer": {"linger.ms": "20", "sasl.password": REDACTED}}}))
    config = started(["--replay", str(run_dir / "config.json")])
    assert config.settings == {"producer": {"linger.ms": "20", "sasl.password": REDACTED}} and config.controllers == 1
    with pytest.raises(HarnessError, match="never recorded; give it again"):
        effective_profile(config, SAFE, DEFAULT_KAFKA_VERSION)
    again = started(["--replay", str(run_dir / "config.json"), "--producer-config", "sasl.password=x"])
    assert again.settings["producer"] == {"linger.ms": "20", "sasl.password": "x"}


def test_a_typo_on_the_command_line_exits_2_before_any_container(tmp_path):
    result = subprocess.run([sys.executable, "-m", "harness", "run", "--no-check", "--store", str(tmp_path / "s"),
                             "--producer-config", "lingr.ms=5"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "lingr.ms" in result.stderr and "linger.ms" in result.stderr and not (tmp_path / "s").exists()


def test_the_verdict_names_the_setting_that_permitted_an_anomaly():
    from analysis.rules.permissions import allowed

    def reasons(given):
        return allowed({"profile": apply(SAFE, given).as_dict(), "workload": "queue", "config_format": 2})

    permitted, why = reasons({"producer": {"acks": "1"}})
    assert {"lost-write", "duplicate"} <= permitted and "acks=1 (acks: --producer-config)" in why
    assert any("implied by acks=1 (--producer-config)" in r for r in why)
    permitted, why = reasons({"broker": {"min.insync.replicas": "1"}})
    assert "lost-write" in permitted and why == ["min.insync.replicas<2 (min.insync.replicas: --broker-config "
                                                 "min.insync.replicas, inherited by the topic)"]
    assert reasons({"topic": {"min.insync.replicas": "3"}}) == (set(), [])  # stricter than safe permits nothing more
    assert allowed({"profile": get_profile("unsafe").as_dict(), "workload": "queue"})[1][0] == "acks=1"  # a profile's own run


def test_under_the_java_client_a_profile_it_refuses_is_refused_before_the_run(tmp_path):
    message = refusal(tmp_path, client="java", profile="short-timeout")
    assert "the profile's producer settings: the Java client" in message
    assert "delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms" in message
