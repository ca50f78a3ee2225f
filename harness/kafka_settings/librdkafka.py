"""librdkafka as the judge of its own settings: each given key is tried alone in a client made
and dropped at once (unknown keys and bad values, each named), then the whole effective config
(contradictions such as `enable.idempotence=true` with `acks=1`, or `session.timeout.ms` under
`group.protocol=consumer`). librdkafka refuses those in rd_kafka_new, before any connection.

A key of the other kind of client (`isolation.level` given to a producer) is accepted by
librdkafka with a CONFWARN that it "will be ignored": that is a setting the client does not
have, and is refused like an unknown one. A client made here takes ~1-6 ms (measured here).
"""

from __future__ import annotations

import logging
from typing import Any

from harness.kafka_settings.jvm import Verdict

NOWHERE = "127.0.0.1:9"  # the discard port: a made client's first connect fails at once, and it is dropped anyway


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _logger() -> tuple[logging.Logger, _Lines]:
    """A logger that keeps librdkafka's lines to itself (no terminal output, no propagation)."""
    lines = _Lines()
    logger = logging.getLogger("harness.kafka_settings.librdkafka.probe")
    logger.handlers[:] = [lines]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, lines


def _make(scope: str, config: dict[str, Any]) -> str | None:
    """Kafka's refusal of `config` for a `scope` client, or None when librdkafka took it."""
    from confluent_kafka import Consumer, KafkaException, Producer

    logger, lines = _logger()
    base = {"bootstrap.servers": NOWHERE, "logger": logger}
    try:
        if scope == "producer":
            client: Any = Producer({**base, **config})
            client.poll(0)  # serves the log lines rd_kafka_new queued (CONFWARN)
        else:
            client = Consumer({**base, "group.id": "config-check", **config})
            client.close()
        del client
    except KafkaException as exc:
        err = exc.args[0] if exc.args else exc
        return err.str() if hasattr(err, "str") else str(err)
    except (TypeError, ValueError) as exc:
        return str(exc)
    ignored = [line for line in lines.lines if "will be ignored" in line and "CONFWARN" in line]
    return ignored[0].split("]: ", 1)[-1] if ignored else None


def check(scope: str, given: dict[str, str], whole: dict[str, Any]) -> Verdict:
    """librdkafka's verdict on a producer's or consumer's given settings, and on `whole`, the
    client config they make with the profile's (what the run would hand librdkafka)."""
    verdict = Verdict()
    for key, value in given.items():
        refusal = _make(scope, {key: value})
        if refusal is None:
            continue
        if "No such configuration property" in refusal or "will be ignored" in refusal:
            verdict.unknown.append(key)
        else:
            verdict.invalid[key] = refusal
    if not verdict.unknown and not verdict.invalid:
        refusal = _make(scope, {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in whole.items()})
        if refusal is not None:
            verdict.refused.append(refusal)
    return verdict  # no names: librdkafka lists none; "did you mean" uses Kafka's (check.py)
