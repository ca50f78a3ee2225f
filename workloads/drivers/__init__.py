"""Client drivers: the Kafka client libraries the workloads can drive, by name.

The protocol is in base.py; `librdkafka` (confluent-kafka) is the first driver and the default,
`java` (the Apache Kafka Java client in a JVM child, workloads/drivers/java.py) the second. The
workloads and their history are the same on each. A driver's module loads when it is made, not
when this one is imported, so naming the drivers costs no client import.

A client version (`make(name, version)`) goes to the driver: the Java driver builds that
kafka-clients version (harness/provision/java_client.py); librdkafka is the one confluent-kafka
installed in .venv, so it accepts its own version or none and refuses any other (it cannot load a
second librdkafka beside the first).
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from harness.errors import HarnessError
from workloads.drivers.base import Driver

DEFAULT = "librdkafka"

DRIVERS: dict[str, str] = {  # name -> "module:Class", made with version= and log_path= where it takes them and they are given
    "librdkafka": "workloads.drivers.librdkafka:LibrdkafkaDriver",
    "java": "workloads.drivers.java:JavaDriver",
}


def names() -> tuple[str, ...]:
    return tuple(DRIVERS)


def make(name: str = DEFAULT, version: str | None = None, log_path: Path | None = None) -> Driver:
    """A new driver of the client `name`, of client version `version` (None: the driver's default).
    `log_path`: where a driver whose client logs on its own writes that log (the Java client's, at
    INFO); drivers that log through Python's logging ignore it. Raises HarnessError for an unknown
    name, or a version the driver cannot give. Call its close() when done (the Java driver's JVM
    ends then)."""
    try:
        home = DRIVERS[name]
    except KeyError:
        raise HarnessError(f"unknown client driver {name!r}.", hint=f"use one of: {', '.join(DRIVERS)}") from None
    module, cls = home.split(":")
    factory = getattr(importlib.import_module(module), cls)
    takes = inspect.signature(factory).parameters
    options = {"log_path": log_path} if log_path is not None and "log_path" in takes else {}
    if version is None:
        return factory(**options)
    if "version" in takes:
        return factory(version=version, **options)
    driver = factory(**options)  # a client of one installed version: that one, or a clear no
    installed = driver.versions()
    if version not in installed.values():
        raise HarnessError(f"client version {version!r} is not available for the {name} driver: it runs "
                           + ", ".join(f"{k} {v}" for k, v in installed.items()) + ".",
                           hint=f"leave the client version out, or give one of: {', '.join(sorted(set(installed.values())))}")
    return driver
