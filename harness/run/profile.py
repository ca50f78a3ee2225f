"""The run's effective client profile and client: the named profile on this many brokers, the
user's Kafka settings on top (workloads/profile_settings.py), every setting checked by Kafka's
and the client's own rules first (harness/kafka_settings/check.py). All of it before anything
starts: bad input exits 2 with no container made."""

from __future__ import annotations

from typing import Any

from harness.errors import HarnessError
from harness.provision.kafka_jars import kraft_supported, parse_version
from harness.run.config import RunConfig

TXN_WORKLOADS = ("txn", "eos")
KIP848_SINCE = (4, 0)  # the consumer group protocol is GA from Kafka 4.0 (KIP-848)


def client_given(config: RunConfig) -> dict[str, dict[str, str]]:
    """The user's settings with what the run's own options say in Kafka's words (--group-protocol)."""
    given = {scope: dict(values) for scope, values in config.settings.items()}
    if config.group_protocol != "classic":
        consumer = given.setdefault("consumer", {})
        if consumer.get("group.protocol", config.group_protocol) != config.group_protocol:
            raise HarnessError(f"--group-protocol {config.group_protocol} and --consumer-config "
                               f"group.protocol={consumer['group.protocol']} disagree.", hint="give one of them")
        consumer["group.protocol"] = config.group_protocol
    return given


def refuse_layout(config: RunConfig, version: str) -> None:
    """Options this Kafka version cannot serve: dedicated controllers need KRaft; KIP-848 needs 4.0."""
    if config.controllers and not kraft_supported(version):
        raise HarnessError(f"--controllers {config.controllers}: Kafka {version} runs on ZooKeeper, which has no KRaft controllers.",
                           hint="leave --controllers out on this version, or use Kafka 3.3 or later")
    protocol = client_given(config).get("consumer", {}).get("group.protocol", "classic")
    if protocol == "consumer" and parse_version(version) < KIP848_SINCE:
        raise HarnessError(f"group.protocol=consumer (KIP-848) is generally available from Kafka 4.0, not {version}.",
                           hint="use --kafka-version 4.0.0 or later, or --group-protocol classic")


def effective_profile(config: RunConfig, profile: Any, version: str) -> Any:
    """`profile` with the user's settings on top, after every check (HarnessError, exit 2)."""
    from harness.kafka_settings.check import problems_of, refuse
    from harness.provision.kafka_jars import ensure_kafka_jars
    from workloads.profile_settings import apply

    refuse_layout(config, version)
    given = client_given(config)
    java = None
    if config.client == "java":  # a version that does not resolve: exit 2 now (built on first use, then cached)
        from harness.provision.java_client import ensure_java_client

        java = ensure_java_client(config.client_version)
    elif not any(given.values()):
        return profile

    def whole(scope: str) -> dict[str, Any]:
        """The client config the run would use for `scope` (the workload's own keys as placeholders)."""
        effective = apply(profile, given)
        if scope == "producer":
            extra = {"transactional.id": "config-check"} if config.workload in TXN_WORKLOADS else {}
            return {"linger.ms": 5, **effective.producer_config(), **extra}
        return effective.consumer_config()

    refuse(problems_of(given, client=config.client, kafka_version=version, client_version=config.client_version,
                       whole=whole, brokers=config.brokers, libs=lambda v: ensure_kafka_jars(v).libs,
                       client_libs=(lambda v: java.root / "libs") if java is not None else None))
    if not any(given.values()):
        return profile
    try:
        return apply(profile, given)
    except ValueError as exc:  # a value both clients took but the profile's field cannot hold
        raise HarnessError(f"a setting's value cannot be read: {exc}.", hint="give true/false or a whole number") from None
