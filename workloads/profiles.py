"""Client profiles: producer, consumer and topic settings as named, first-class configuration.

A run names its profile in config.json, so a verdict can always be read
against the settings that produced it. `safe` is what Kafka's guarantees are
stated for; the others are deliberately weaker and expected to lose or
duplicate records under faults.

Note: confluent-kafka (librdkafka) defaults `enable.idempotence` to false, so
a profile always says it explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from harness.errors import HarnessError


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    acks: str = "all"  # "0", "1" or "all"
    enable_idempotence: bool = True
    retries: int = 2_147_483_647
    max_in_flight: int = 5
    isolation_level: str = "read_committed"
    enable_auto_commit: bool = False
    auto_offset_reset: str = "earliest"
    replication_factor: int = 3
    min_insync_replicas: int = 2
    unclean_leader_election: bool = False
    # librdkafka's default. A shorter timeout lets in-flight batches time out during a long
    # fault; the idempotent producer then bumps its epoch and re-sends them, duplicating any the
    # broker had already written (librdkafka INTRODUCTION.md; librdkafka#4953).
    delivery_timeout_ms: int = 300_000
    # Topic flush.messages (the broker's log.flush.interval.messages): fsync every N appends.
    # None is Kafka's default: never fsync, durability from replication alone.
    flush_messages: int | None = None
    extra_producer: dict[str, Any] = field(default_factory=dict)
    # What a user's settings add (workloads/profile_settings.py): keys no field above names, as given.
    extra_consumer: dict[str, Any] = field(default_factory=dict)
    extra_topic: dict[str, str] = field(default_factory=dict)
    # Topic keys left to the brokers' defaults, because --broker-config set them: the topic inherits.
    inherited: tuple[str, ...] = ()
    # Key -> where its value came from ("profile safe", "--producer-config", ...), for the verdict's
    # "what the configuration permitted"; empty for a bare profile (every key is the profile's).
    sources: dict[str, str] = field(default_factory=dict)
    # The user's settings by scope as given, secrets REDACTED (harness/kafka_settings/given.py).
    given: dict[str, dict[str, str]] = field(default_factory=dict)

    def producer_config(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "acks": self.acks,
            "enable.idempotence": self.enable_idempotence,
            "retries": self.retries,
            "max.in.flight.requests.per.connection": self.max_in_flight,
            "delivery.timeout.ms": self.delivery_timeout_ms,
        }
        conf.update(self.extra_producer)
        return conf

    def consumer_config(self) -> dict[str, Any]:
        return {
            "isolation.level": self.isolation_level,
            "enable.auto.commit": self.enable_auto_commit,
            "auto.offset.reset": self.auto_offset_reset,
            **self.extra_consumer,
        }

    def topic_config(self) -> dict[str, str]:
        config = {
            "min.insync.replicas": str(self.min_insync_replicas),
            "unclean.leader.election.enable": str(self.unclean_leader_election).lower(),
        }
        if self.flush_messages is not None:
            config["flush.messages"] = str(self.flush_messages)
        config.update(self.extra_topic)
        return {k: v for k, v in config.items() if k not in self.inherited}

    def for_brokers(self, brokers: int) -> "Profile":
        """This profile on a cluster of `brokers`: RF and min ISR cannot exceed the broker count."""
        rf = min(self.replication_factor, brokers)
        return replace(self, replication_factor=rf, min_insync_replicas=min(self.min_insync_replicas, rf))

    def as_dict(self) -> dict[str, Any]:
        """The profile as config.json spells it: one flat dict of Kafka's own keys, the spelling
        analysis/rules/permissions.py reads (config_format 2; older run directories spelled it three
        ways at once, which permissions still reads)."""
        from harness.kafka_settings.given import REDACTED, is_secret

        d: dict[str, Any] = {"name": self.name, "description": self.description}
        d.update({k: v for k, v in self.producer_config().items() if k != "max.in.flight.requests.per.connection"})
        d["max.in.flight"] = self.max_in_flight
        d.update(self.consumer_config())
        d["replication.factor"] = self.replication_factor
        d["min.insync.replicas"] = self.min_insync_replicas
        d["unclean.leader.election.enable"] = self.unclean_leader_election
        if self.flush_messages is not None:
            d["flush.messages"] = self.flush_messages
        if self.given:
            d.update({k: v for scope in ("topic", "consumer", "producer") for k, v in self.given.get(scope, {}).items()
                      if k not in d and k not in ("max.in.flight.requests.per.connection",)})
            d["given"] = self.given
            d["sources"] = self.sources
        return {k: REDACTED if is_secret(k) else v for k, v in d.items()}  # a credential never reaches config.json


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("safe", "acks=all, idempotence, RF 3, min.insync.replicas 2, unclean election off, read_committed"),
        Profile(
            "no-idempotence",
            "acks=all but idempotence off (confluent-kafka's default): retries may duplicate and reorder",
            enable_idempotence=False,
        ),
        Profile("acks1", "acks=1: the leader alone acknowledges; a leader crash can lose acknowledged records",
                acks="1", enable_idempotence=False),
        Profile("acks0", "acks=0: fire and forget; offsets are unknown and anything may be lost",
                acks="0", enable_idempotence=False, retries=0),
        Profile("minisr1", "acks=all with min.insync.replicas 1: 'all' may mean the leader alone", min_insync_replicas=1),
        Profile("unclean", "unclean leader election on, min.insync.replicas 1: an out-of-sync replica may become leader",
                min_insync_replicas=1, unclean_leader_election=True),
        Profile("autocommit", "safe producer; consumers auto-commit and start from the latest offset",
                enable_auto_commit=True, auto_offset_reset="latest", isolation_level="read_uncommitted"),
        Profile("short-timeout", "safe, but sends time out after 30 s: librdkafka's idempotent producer then "
                "re-sends in-flight batches under a new epoch, which can duplicate records", delivery_timeout_ms=30_000),
        Profile("fsync", "safe, and every append fsynced (flush.messages=1): what durability on disk costs, "
                "and what it saves under a power cut", flush_messages=1),
        # The nightly matrix's unsafe arm: every weakening at once, so faults can show what Kafka does not promise.
        Profile("unsafe", "acks=1, RF 2, min.insync.replicas 1, unclean election on, idempotence off: loss, "
                "divergence and duplicates are all permitted", acks="1", enable_idempotence=False,
                replication_factor=2, min_insync_replicas=1, unclean_leader_election=True),
    )
}


# KIP-98: the idempotent and the transactional producer need brokers of 0.11.0 or later. Against
# an older broker librdkafka fails every producer with a fatal _UNSUPPORTED_FEATURE once the
# cluster is up, and a run with no acknowledged send proves nothing; refuse it before it starts.
IDEMPOTENCE_SINCE = (0, 11)


def refuse_unsupported(profile: Profile, workload: str, kafka_version: str) -> None:
    """Raise HarnessError (exit 2) when this Kafka version cannot serve the profile or workload."""
    from harness.errors import KafkaVersionError
    from harness.provision.kafka_jars import parse_version

    try:
        if parse_version(kafka_version) >= IDEMPOTENCE_SINCE:
            return
    except KafkaVersionError:
        return  # not a version at all: resolving the jars says so, in a run directory marked FAILED
    if workload in ("txn", "eos"):
        raise HarnessError(f"the {workload} workload needs transactions, which Kafka {kafka_version} does not have (KIP-98: 0.11.0 and later).",
                           hint="use --workload queue on this version, or a Kafka version of 0.11.0 or later")
    if profile.enable_idempotence:
        idempotent_free = ", ".join(name for name, p in PROFILES.items() if not p.enable_idempotence)
        raise HarnessError(
            f"profile {profile.name!r} uses the idempotent producer, which Kafka {kafka_version} does not have "
            "(KIP-98: 0.11.0 and later); its producers would all fail with _UNSUPPORTED_FEATURE.",
            hint=f"use --profile no-idempotence (acks=all, the closest to safe) or another profile without it: {idempotent_free}")


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise HarnessError(f"unknown profile {name!r}.", hint=f"use one of: {', '.join(PROFILES)}") from None
