"""A target's security settings as each client library spells them, and the driver that adds them.

The settings are added to every client a run makes (producers, consumers, the drain's probes) by
`SecuredDriver`, beneath the workloads, never through the profile: the profile and the user's
settings go to config.json, and these carry a password. librdkafka's admin clients (metadata
views, topic creation) take `librdkafka_settings` directly.
"""

from __future__ import annotations

from typing import Any

from harness.errors import HarnessError
from harness.target.spec import Security


def librdkafka_settings(security: Security) -> dict[str, Any]:
    """librdkafka's configuration for `security` (secrets included: never write this down)."""
    settings: dict[str, Any] = {"security.protocol": security.protocol.lower()}
    if security.sasl:
        assert security.password is not None
        settings.update({"sasl.mechanism": security.sasl_mechanism, "sasl.username": security.username,
                         "sasl.password": security.password.reveal()})
    if security.tls:
        if security.ca_file is not None:
            settings["ssl.ca.location"] = str(security.ca_file)
        if security.cert_file is not None and security.key_file is not None:
            settings["ssl.certificate.location"] = str(security.cert_file)
            settings["ssl.key.location"] = str(security.key_file)
            if security.key_password is not None:
                settings["ssl.key.password"] = security.key_password.reveal()
        if not security.verify:  # the target file said verify = false; config.json and the report say so
            settings["enable.ssl.certificate.verification"] = False
            settings["ssl.endpoint.identification.algorithm"] = "none"
        else:
            settings["ssl.endpoint.identification.algorithm"] = "https"
    return settings


def _jaas_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_settings(security: Security) -> dict[str, Any]:
    """The Apache Kafka Java client's configuration for `security` (secrets included)."""
    settings: dict[str, Any] = {"security.protocol": security.protocol}
    if security.sasl:
        assert security.password is not None and security.username is not None
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if security.sasl_mechanism == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        settings.update({"sasl.mechanism": security.sasl_mechanism,
                         "sasl.jaas.config": f"{module} required username={_jaas_quote(security.username)} "
                                             f"password={_jaas_quote(security.password.reveal())};"})
    if security.tls:
        if security.cert_file is not None:
            raise HarnessError("the Java client takes a client certificate as one PEM keystore file, which the harness "
                               "does not assemble yet.", hint="use --client librdkafka with a client certificate")
        if not security.verify:
            raise HarnessError("the Java client cannot turn certificate verification off by a setting.",
                               hint="give security.ca_file instead of verify = false, or use --client librdkafka")
        if security.ca_file is not None:
            settings.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(security.ca_file)})
    return settings


def client_settings(security: Security, client: str) -> dict[str, Any]:
    return java_settings(security) if client == "java" else librdkafka_settings(security)


class SecuredDriver:
    """A client driver (workloads/drivers/) whose every producer and consumer gets `settings` on
    top of what the workload asked for; everything else is the wrapped driver's."""

    def __init__(self, driver: Any, settings: dict[str, Any]) -> None:
        self._driver, self._settings = driver, dict(settings)

    def producer(self, settings: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        return self._driver.producer({**settings, **self._settings}, *args, **kwargs)

    def consumer(self, settings: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        return self._driver.consumer({**settings, **self._settings}, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)

    def __repr__(self) -> str:  # never the settings: they hold the password
        return f"SecuredDriver({self._driver!r})"
