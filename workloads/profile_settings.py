"""A profile with a user's settings on top (issue 35 item 5), and where each value came from.

`apply(profile, given)` returns the effective profile: the fields the checker reads (acks,
enable.idempotence, min.insync.replicas, unclean.leader.election.enable, ...) hold the values the
run really used, and `sources` names, for each key, who set it, so that a verdict can say which
setting permitted an anomaly (`acks=1 (--producer-config)`).

Two rules make the effective settings what Kafka makes them:
- **A broker default reaches the topic.** Kafka resolves a topic's min.insync.replicas,
  unclean.leader.election.enable and flush.messages from the topic's own config, else from the
  broker's. A profile sets the first two on the topic, which would hide `--broker-config
  min.insync.replicas=3`; so a broker-level key the topic was not also given is left off the topic,
  the topic inherits it, and its source says so.
- **`acks` other than all turns the profile's idempotence off**, as the Java client does when
  enable.idempotence was not set explicitly (KIP-679): `--producer-config acks=1` on `safe` is an
  acks=1 producer, not a contradiction. Given both explicitly, the client refuses them (check.py).

Values are checked by Kafka's and librdkafka's own parsers before this runs
(harness/kafka_settings/check.py); a value that does not convert here raises ValueError.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

from harness.kafka_settings.given import option, redacted
from workloads.profiles import Profile


def _bool(text: str) -> bool:
    value = str(text).strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{text!r} is not true or false")
    return value == "true"


def _acks(text: str) -> str:
    value = str(text).strip().lower()
    return "all" if value in ("all", "-1") else value


# key -> (Profile field, converter). librdkafka's aliases name the same fields.
FIELDS: dict[str, dict[str, tuple[str, Callable[[str], Any]]]] = {
    "producer": {"acks": ("acks", _acks), "request.required.acks": ("acks", _acks),
                 "enable.idempotence": ("enable_idempotence", _bool), "retries": ("retries", int),
                 "message.send.max.retries": ("retries", int),
                 "max.in.flight.requests.per.connection": ("max_in_flight", int), "max.in.flight": ("max_in_flight", int),
                 "delivery.timeout.ms": ("delivery_timeout_ms", int), "message.timeout.ms": ("delivery_timeout_ms", int)},
    "consumer": {"isolation.level": ("isolation_level", str), "enable.auto.commit": ("enable_auto_commit", _bool),
                 "auto.offset.reset": ("auto_offset_reset", str)},
    "topic": {"min.insync.replicas": ("min_insync_replicas", int),
              "unclean.leader.election.enable": ("unclean_leader_election", _bool),
              "flush.messages": ("flush_messages", int), "replication.factor": ("replication_factor", int)},
}
# Broker keys that are a topic's default: broker key -> topic key.
INHERITED = {"min.insync.replicas": "min.insync.replicas",
             "unclean.leader.election.enable": "unclean.leader.election.enable",
             "log.flush.interval.messages": "flush.messages"}
# The profile's key for each field, as as_dict spells it (sources are keyed by these).
KEY = {"acks": "acks", "enable_idempotence": "enable.idempotence", "retries": "retries", "max_in_flight": "max.in.flight",
       "delivery_timeout_ms": "delivery.timeout.ms", "isolation_level": "isolation.level",
       "enable_auto_commit": "enable.auto.commit", "auto_offset_reset": "auto.offset.reset",
       "min_insync_replicas": "min.insync.replicas", "unclean_leader_election": "unclean.leader.election.enable",
       "flush_messages": "flush.messages", "replication_factor": "replication.factor"}


def apply(profile: Profile, given: Mapping[str, Mapping[str, str]] | None) -> Profile:
    """`profile` with `given` (scope -> key -> text) on top; the profile itself when nothing is given."""
    if not given or not any(given.values()):
        return profile
    changes: dict[str, Any] = {}
    extras: dict[str, dict[str, Any]] = {"producer": dict(profile.extra_producer), "consumer": dict(profile.extra_consumer),
                                         "topic": dict(profile.extra_topic)}
    sources = {key: f"profile {profile.name}" if getattr(profile, name) is not None else "Kafka's default"
               for name, key in KEY.items()}
    inherited: list[str] = []
    for broker_key, topic_key in INHERITED.items():
        if broker_key in given.get("broker", {}) and topic_key not in given.get("topic", {}):
            name, convert = FIELDS["topic"][topic_key]
            changes[name] = convert(given["broker"][broker_key])
            sources[topic_key] = f"{option('broker')} {broker_key}, inherited by the topic"
            inherited.append(topic_key)
    for scope in ("producer", "consumer", "topic"):
        for key, text in given.get(scope, {}).items():
            if key in FIELDS[scope]:
                name, convert = FIELDS[scope][key]
                changes[name] = convert(text)
                sources[KEY[name]] = option(scope)
            else:
                extras[scope][key] = text
                sources[key] = option(scope)
    producer = given.get("producer", {})
    if changes.get("acks", "all") != "all" and "enable.idempotence" not in producer and profile.enable_idempotence:
        changes["enable_idempotence"] = False
        acks_key = next(k for k in ("acks", "request.required.acks") if k in producer)
        sources["enable.idempotence"] = f"implied by {acks_key}={producer[acks_key]} ({option('producer')})"
    shown = redacted({s: dict(v) for s, v in given.items()})
    said = "; ".join(f"{option(scope)} " + " ".join(f"{k}={v}" for k, v in values.items()) for scope, values in shown.items())
    return replace(profile, **changes, description=f"{profile.description}; with {said}", extra_producer=extras["producer"], extra_consumer=extras["consumer"],
                   extra_topic=extras["topic"], inherited=tuple(inherited), sources=sources,
                   given=shown)
