"""Asking Kafka to create a topic, again after a transient admin error.

CI, 2026-11-25: "Kafka refused to create topic 'queue': Failed while waiting for response from
broker: Local: Broker handle destroyed without termination" failed a fault-free run at start-up.
librdkafka drops the bootstrap broker's handle once it knows the brokers' own addresses, and a
request on that handle fails with _DESTROY_BROKER. Such an error is asked again; a retry that
finds the topic already made counts as made (the failed attempt may have made it)."""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from harness.errors import ClusterError

log = logging.getLogger(__name__)

# Admin errors a creation is tried again after, besides those librdkafka calls retriable.
TRANSIENT_ADMIN = (KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT, KafkaError._TIMED_OUT)
ATTEMPTS = 3


def request_topic(admin: Any, new: Any, timeout_s: float) -> None:
    """Create `new` (a NewTopic) through `admin`, up to ATTEMPTS times within `timeout_s`."""
    name, deadline = new.topic, time.monotonic() + timeout_s
    for attempt in range(1, ATTEMPTS + 1):
        try:
            admin.create_topics([new], operation_timeout=timeout_s)[name].result(timeout=timeout_s)
            return
        except KafkaException as exc:
            err = exc.args[0]
            if attempt > 1 and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            transient = err.retriable() or err.code() in TRANSIENT_ADMIN
            if not transient or attempt == ATTEMPTS or time.monotonic() > deadline:
                raise ClusterError(f"Kafka refused to create topic {name!r}: {err.str()}") from exc
            log.info("creating topic %r failed (%s); trying again", name, err.str())
            time.sleep(1.0)
