"""Client drivers: the Kafka client libraries the workloads can drive, by name.

The protocol is in base.py; `librdkafka` (confluent-kafka) is the first driver and the default.
Another client (issue 35's Java client) is one more entry here and one module implementing
base.Driver; the workloads and their history stay as they are. A driver's module loads when it
is made, not when this one is imported, so naming the drivers costs no client import.
"""

from __future__ import annotations

import importlib

from harness.errors import HarnessError
from workloads.drivers.base import Driver

DEFAULT = "librdkafka"

DRIVERS: dict[str, str] = {  # name -> "module:Class", the class made with no arguments
    "librdkafka": "workloads.drivers.librdkafka:LibrdkafkaDriver",
}


def names() -> tuple[str, ...]:
    return tuple(DRIVERS)


def make(name: str = DEFAULT) -> Driver:
    """A new driver of the client `name`."""
    try:
        home = DRIVERS[name]
    except KeyError:
        raise HarnessError(f"unknown client driver {name!r}.", hint=f"use one of: {', '.join(DRIVERS)}") from None
    module, cls = home.split(":")
    return getattr(importlib.import_module(module), cls)()
