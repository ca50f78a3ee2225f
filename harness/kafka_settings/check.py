"""Refuse bad settings before anything starts (exit 2), naming each key and its fix.

Who judges what:
- broker and topic settings: Kafka's own ConfigDefs in the jars of the version the run starts
  (jvm.py), so a key that version does not have (`min.insync.replica`, or a 4.x key on 1.1.1) and
  a value its validators refuse (`min.insync.replicas=0`) are caught as the broker would catch them;
- producer and consumer settings: the chosen client itself. librdkafka by making a client
  (librdkafka.py); the Java client by its ConfigDefs and its own constructor checks, in the
  kafka-clients jar of the client's version.

The whole client config the run would use (the profile, the workload's own keys, the user's
settings) is checked too, which is where contradictions show: `enable.idempotence=true` with
`acks=1`, or acks=1 under a transactional workload.
"""

from __future__ import annotations

import difflib
from typing import Any, Callable, Mapping

from harness.errors import HarnessError
from harness.kafka_settings import jvm
from harness.kafka_settings.given import OWNED, REDACTED, SCOPES, is_secret, option
from harness.kafka_settings.jvm import Verdict


def problems_of(given: Mapping[str, Mapping[str, str]], *, client: str, kafka_version: str, client_version: str | None,
                whole: Callable[[str], dict[str, Any]], brokers: int, libs: Callable[[str], Any],
                client_libs: Callable[[str], Any] | None = None) -> list[str]:
    """Every problem with `given`, one line each ([] when none). `whole(scope)` is the client
    config the run would hand the client for that scope; `libs(version)` the folder of a Kafka
    version's jars (harness/provision/kafka_jars.py); `client_libs(version)` the Java client's
    (harness/provision/java_client.py; default: `libs`, whose kafka-clients jar is that version's).
    Under the Java client the profile's own config is checked even with nothing given: the Java
    client refuses some profiles (short-timeout: delivery.timeout.ms below linger.ms + request.timeout.ms)."""
    found: list[str] = []
    given = {scope: dict(given.get(scope, {})) for scope in SCOPES}
    for scope, values in given.items():
        for key, value in values.items():
            if key in OWNED[scope]:
                found.append(f"{option(scope)} {key}: the harness sets it itself ({OWNED[scope][key]}); leave it out")
            elif value == REDACTED:
                found.append(f"{option(scope)} {key}: its value was a secret, never recorded; give it again "
                             f"({option(scope)} {key}=...)")
            elif scope in ("broker", "topic") and is_secret(key):
                found.append(f"{option(scope)} {key}: a credential in the local cluster's configuration would be "
                             "written to the run directory; the harness's local brokers take no credentials")
    if found:
        return found
    rf = given["topic"].pop("replication.factor", None)  # a creation parameter, not a topic config
    if rf is not None and (not rf.isdigit() or not 1 <= int(rf) <= brokers):
        found.append(f"{option('topic')} replication.factor={rf}: it must be a whole number from 1 to the {brokers} brokers")
    kafka = jvm.check(libs(kafka_version), kafka_version, {s: given[s] for s in ("broker", "topic")})
    for scope in ("broker", "topic"):
        found += _lines(scope, kafka.get(scope), f"Kafka {kafka_version}", kafka.get(scope))
    clients = _client_verdicts(given, client, client_version or kafka_version, whole, client_libs or libs)
    names: dict[str, Verdict] = {}
    if client == "librdkafka" and any(v.unknown for v in clients.values()):
        names = jvm.check(libs(kafka_version), kafka_version, {s: {"client.id": "x"} for s in clients if clients[s].unknown})
    for scope, verdict in clients.items():
        label = option(scope) if given[scope] else f"the profile's {scope} settings"
        found += _lines(scope, verdict, _client_name(client, client_version), names.get(scope, verdict), label)
    return found


def _client_verdicts(given: dict[str, dict[str, str]], client: str, client_version: str,
                     whole: Callable[[str], dict[str, Any]], libs: Callable[[str], Any]) -> dict[str, Verdict]:
    scopes = [s for s in ("producer", "consumer") if given[s] or client == "java"]
    if not scopes:
        return {}
    if client == "librdkafka":
        from harness.kafka_settings import librdkafka

        return {s: librdkafka.check(s, given[s], _whole_or_none(whole, s)) for s in scopes}
    # The Java client: its ConfigDefs judge the whole config; a key only the profile set is Kafka's
    # own spelling (workloads/profiles.py), so what it flags is the user's.
    verdicts = jvm.check(libs(client_version), client_version,
                         {s: {**{k: _text(v) for k, v in (_whole_or_none(whole, s) or {}).items()}, **given[s]} for s in scopes})
    for s in scopes:
        verdicts[s].unknown = [k for k in verdicts[s].unknown if k in given[s]]
    return verdicts


def _whole_or_none(whole: Callable[[str], dict[str, Any]], scope: str) -> dict[str, Any]:
    try:
        return whole(scope)
    except ValueError:  # a value the profile could not take: the per-key checks name it
        return {}


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _client_name(client: str, version: str | None) -> str:
    if client == "librdkafka":
        from confluent_kafka import libversion

        return f"librdkafka {libversion()[0]}"
    return f"the Java client (kafka-clients {version})" if version else "the Java client"


def _lines(scope: str, verdict: Verdict | None, judge: str, names: Verdict | None, label: str | None = None) -> list[str]:
    if verdict is None:
        return []
    label = label or option(scope)
    if not verdict.known:
        return [f"{option(scope)}: {judge} has no configuration of this kind to check against"]
    out = []
    for key in verdict.unknown:
        close = difflib.get_close_matches(key, sorted(names.names if names else ()), n=2, cutoff=0.75)
        guess = f" (did you mean {' or '.join(close)}?)" if close else ""
        out.append(f"{option(scope)} {key}: {judge} has no such setting{guess}")
    out += [f"{option(scope)} {key}: {judge} refuses the value: {message}" for key, message in verdict.invalid.items()]
    out += [f"{label}: {judge} refuses the client's settings together: {message}" for message in verdict.refused]
    return out


def refuse(problems: list[str]) -> None:
    """Raise the one HarnessError (exit 2) that lists every problem."""
    if problems:
        raise HarnessError("bad Kafka settings:\n  " + "\n  ".join(problems),
                           hint="fix or remove those settings (`python -m harness run --help` describes "
                                "--broker-config, --topic-config, --producer-config and --consumer-config)")
