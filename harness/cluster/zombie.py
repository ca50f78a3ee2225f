"""A zombie producer: a second producer that opens a live transactional.id, as a restarted instance
of an application does (nemesis/fence.py).

Its `init_transactions` asks the coordinator for the id's producer id and a bumped epoch: the
coordinator aborts the transaction the live producer has open, and from then on refuses that
producer's epoch (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH). The zombie writes nothing: a record
that no history names would be an unexplained value to the checker, and the fencing is what is
under test. It is librdkafka whatever the run's client: the fencing happens on the coordinator.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import KafkaException, Producer

log = logging.getLogger("librdkafka.zombie")


def open_zombie(bootstrap: str, transactional_id: str, timeout_s: float = 30.0,
                settings: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """A producer with `transactional_id`, its init_transactions done (or failed): (the producer, or
    None when it did not open, and what happened: seconds taken, the error if any)."""
    producer = Producer({**(settings or {}), "bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "logger": log})
    began = time.monotonic()
    try:
        producer.init_transactions(timeout_s)
    except KafkaException as exc:
        error = exc.args[0]
        _close(producer)
        return None, {"opened": False, "init_s": round(time.monotonic() - began, 2),
                      "error": f"{error.name()}: {error.str()}" if hasattr(error, "name") else str(exc)}
    return producer, {"opened": True, "init_s": round(time.monotonic() - began, 2)}


def _close(producer: Any) -> None:
    try:
        producer.flush(5.0)
    except Exception as exc:  # a producer that never opened has nothing to flush
        log.debug("zombie flush: %s", exc)


def close_zombie(producer: Any) -> None:
    """Let go of the id: nothing in flight, so a flush returns at once."""
    if producer is not None:
        _close(producer)
