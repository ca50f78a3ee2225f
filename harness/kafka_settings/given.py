"""The settings a user gives, by scope, as Kafka spells them: parsing, owned keys and secrets.

A value is kept as the text the user wrote (`acks=1` is "1"); Kafka's and librdkafka's own
parsers decide what it means (check.py), so the harness never reads a setting differently from
the client that uses it.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from harness.errors import HarnessError

SCOPES = ("broker", "topic", "producer", "consumer")
Given = dict[str, dict[str, str]]  # scope -> key -> value as given


def option(scope: str) -> str:
    return f"--{scope}-config"


# Keys whose value is a credential: never written to config.json, the report, a log or the recorded
# command line (each says REDACTED instead). Kafka's own list is its PASSWORD-typed keys; these
# patterns cover those and librdkafka's (`sasl.password`, `ssl.key.password`, `ssl.key.pem`,
# `sasl.oauthbearer.client.secret`, `ssl_key`...) and the JAAS line that carries a password.
SECRET = re.compile(r"password|secret|jaas|\.key\.pem$|ssl\.key$|ssl_key|keystore\.key$|user\.info|oauthbearer\.config|token")
REDACTED = "REDACTED"


def is_secret(key: str) -> bool:
    return bool(SECRET.search(key.lower()))


# Keys the harness sets itself: the cluster's layout and the workloads' identities. A user's value
# would break the run rather than configure it, so each is refused with the reason.
OWNED: dict[str, dict[str, str]] = {
    "broker": {k: "the harness lays out the cluster" for k in (
        "node.id", "broker.id", "process.roles", "listeners", "advertised.listeners", "listener.security.protocol.map",
        "inter.broker.listener.name", "controller.listener.names", "controller.quorum.voters",
        "controller.quorum.bootstrap.servers", "log.dirs", "log.dir", "zookeeper.connect", "metadata.log.dir")},
    "topic": {},
    "producer": {"bootstrap.servers": "the harness points clients at its cluster",
                 "transactional.id": "the txn and eos workloads name their own transactional ids",
                 "key.serializer": "the workloads write their own keys and values",
                 "value.serializer": "the workloads write their own keys and values"},
    "consumer": {"bootstrap.servers": "the harness points clients at its cluster",
                 "group.id": "each workload names its consumer groups",
                 "key.deserializer": "the workloads read their own keys and values",
                 "value.deserializer": "the workloads read their own keys and values"},
}


def parse_pairs(scope: str, items: Iterable[str] | Mapping[str, Any] | None) -> dict[str, str]:
    """`("acks=1", "linger.ms=5")`, or a TOML table {acks = "1", "linger.ms" = 5}, as {key: text}.
    A TOML boolean is written as Kafka writes one (true/false). Bad input raises HarnessError (exit 2)."""
    if not items:
        return {}
    if isinstance(items, Mapping):
        pairs = list(_flat(items))
    else:
        pairs = []
        for item in items:
            key, sep, value = str(item).partition("=")
            if not sep or not key.strip():
                raise HarnessError(f"{option(scope)} {item!r} is not KEY=VALUE.",
                                   hint=f"e.g. {option(scope)} {_EXAMPLE[scope]}")
            pairs.append((key.strip(), value.strip()))
    settings: dict[str, str] = {}
    for key, value in pairs:
        if key in settings and settings[key] != value:
            raise HarnessError(f"{option(scope)} gives {key} twice ({settings[key]!r} and {value!r}).",
                               hint="give each key once")
        settings[key] = value
    return settings


def _flat(table: Mapping[str, Any], prefix: str = ""):
    """A TOML table's settings: `linger.ms = 5` unquoted is the nested table {linger: {ms: 5}} in
    TOML, and means the key linger.ms, as the quoted "linger.ms" = 5 does."""
    for key, value in table.items():
        if isinstance(value, Mapping):
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", _text(value)


_EXAMPLE = {"broker": "min.insync.replicas=3", "topic": "min.insync.replicas=3", "producer": "acks=1",
            "consumer": "isolation.level=read_uncommitted"}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return str(value)


def redacted(given: Mapping[str, Mapping[str, str]]) -> Given:
    """The settings as config.json and the report may show them: every secret's value REDACTED."""
    return {scope: {k: (REDACTED if is_secret(k) else v) for k, v in values.items()}
            for scope, values in given.items() if values}


def redact_argv(argv: list[str]) -> list[str]:
    """A command line with every secret setting's value REDACTED (`--producer-config sasl.password=x`,
    `--producer-config=sasl.password=x`), as config.json records it."""
    out = []
    for arg in argv:
        head, eq, rest = arg.partition("=")
        if head.startswith("--") and head.endswith("-config") and eq:
            key = rest.partition("=")[0]
            out.append(f"{head}={key}={REDACTED}" if is_secret(key) else arg)
        else:
            key, eq2, _ = arg.partition("=")
            out.append(f"{key}={REDACTED}" if eq2 and is_secret(key) and not key.startswith("-") else arg)
    return out


def replayed(recorded: Mapping[str, Any] | None) -> Given:
    """The settings an earlier run recorded, for `run --replay`. A secret was never recorded, so a
    replay of a run that had one must be given it again (check.py refuses REDACTED values)."""
    if not recorded:
        return {}
    return {scope: {str(k): _text(v) for k, v in values.items()}
            for scope, values in recorded.items() if scope in SCOPES and isinstance(values, Mapping) and values}
