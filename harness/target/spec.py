"""The target file: an existing Kafka cluster, how clients reach it and how to act on its brokers.

    bootstrap_servers = "kafka-1.staging:9093,kafka-2.staging:9093"
    [security]
    protocol = "SASL_SSL"
    sasl_mechanism = "SCRAM-SHA-512"
    username = "chaos"
    password_env = "CHAOS_PASSWORD"        # or password_file = "...", or password = "..."
    ca_file = "/etc/kafka/ca.pem"
    [ssh]                                   # defaults for every ssh broker; each may override them
    user = "kafka"
    key_file = "~/.ssh/id_ed25519"
    [[brokers]]
    id = 1
    host = "kafka-1.staging"

docs/target.md describes every key. A mistake (an unknown key, a missing value, a secret given
twice, a file that does not exist) is a HarnessError naming the file, the key and the fix: exit 2
before anything connects. Secrets are resolved here and kept in `Secret` objects, whose repr and
str never show them, so that a description of the target (config.json) cannot carry one.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
TRANSPORTS = ("ssh", "docker")
ROLES = ("broker", "controller")

# The commands of a broker run by systemd (a unit named `kafka`): every one can be overridden. The
# pid command prints nothing when Kafka is down (systemd's MainPID is 0 then).
SYSTEMD_COMMANDS = {
    "start": "systemctl start kafka",
    "stop": "systemctl stop kafka",
    "pid": "pid=$(systemctl show -p MainPID --value kafka); [ \"$pid\" -gt 0 ] 2>/dev/null && echo \"$pid\"",
}
NODE_KEYS = ("user", "port", "key_file", "known_hosts", "host_key_check", "sudo", "start", "stop", "pid", "log_file",
             "metadata_dir", "connect_timeout_s")
DEFAULT_TOPIC_PREFIX = "kafka-harness-"


class Secret:
    """A credential: its value only by `.reveal()`; never in a repr, a str, or JSON."""

    __slots__ = ("_value", "source")

    def __init__(self, value: str, source: str) -> None:
        self._value, self.source = value, source

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret(from {self.source})"

    __str__ = __repr__


@dataclass(frozen=True)
class Security:
    """How clients authenticate and what they trust (librdkafka's keys: harness/target/security.py)."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: Secret | None = None
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    key_password: Secret | None = None
    verify: bool = True  # TLS: the broker's certificate chain and host name; off only when the file says so

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def describe(self) -> dict[str, Any]:
        """What config.json and the report say about the security: no secret, only where it came from."""
        return {"protocol": self.protocol, "sasl_mechanism": self.sasl_mechanism, "username": self.username,
                "password": self.password.source if self.password else None,
                "ca_file": str(self.ca_file) if self.ca_file else None, "client_certificate": bool(self.cert_file),
                "tls_verify": self.verify if self.tls else None}


@dataclass(frozen=True)
class NodeAccess:
    """How to act on one broker's host: ssh (host, port, user, key) or docker (a container's name);
    the commands that start, stop and find Kafka; its log file and metadata log directory."""

    transport: str
    host: str = ""
    port: int = 22
    user: str = "root"
    key_file: Path | None = None
    known_hosts: Path | None = None
    host_key_check: bool = True
    sudo: bool = False
    container_name: str = ""
    start: str = SYSTEMD_COMMANDS["start"]
    stop: str = SYSTEMD_COMMANDS["stop"]
    pid: str = SYSTEMD_COMMANDS["pid"]
    log_file: str = "/var/log/kafka/server.log"
    metadata_dir: str = "/var/lib/kafka/data"
    connect_timeout_s: float = 10.0

    def where(self) -> str:
        return f"{self.user}@{self.host}:{self.port}" if self.transport == "ssh" else f"container {self.container_name}"


@dataclass(frozen=True)
class BrokerTarget:
    node_id: int
    roles: tuple[str, ...]
    access: NodeAccess
    address: str  # as the other brokers see it: what a partition's iptables rules name

    def describe(self) -> dict[str, Any]:
        a = self.access
        return {"node_id": self.node_id, "roles": list(self.roles), "transport": a.transport, "where": a.where(),
                "address": self.address}


@dataclass(frozen=True)
class Target:
    path: Path
    bootstrap_servers: str
    security: Security
    brokers: tuple[BrokerTarget, ...]
    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    kafka_version: str | None = None
    name: str = ""

    def describe(self) -> dict[str, Any]:
        """config.json's `target`: everything but secrets (they are named by their source only)."""
        return {"file": str(self.path), "name": self.name, "bootstrap_servers": self.bootstrap_servers,
                "topic_prefix": self.topic_prefix, "kafka_version": self.kafka_version,
                "security": self.security.describe(), "brokers": [b.describe() for b in self.brokers]}


def fail(path: Path, problem: str, hint: str) -> HarnessError:
    return HarnessError(f"target file {path}: {problem}.", hint=hint)


def load_target(path: Path | str, environ: dict[str, str] | None = None) -> Target:
    """The target that the TOML file at `path` describes; HarnessError (exit 2) on any mistake."""
    path = Path(path).expanduser()
    env = os.environ if environ is None else environ
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise fail(path, f"cannot be read ({exc.strerror or exc})", "pass an existing TOML file to --target") from None
    except tomllib.TOMLDecodeError as exc:
        raise fail(path, f"is not valid TOML ({exc})", "fix the file (https://toml.io); docs/target.md has an example") from None
    reader = _Reader(path, env)
    return reader.target(data)


class _Reader:
    def __init__(self, path: Path, env: Any) -> None:
        self.path, self.env = path, env

    def unknown(self, table: dict[str, Any], known: tuple[str, ...], where: str) -> None:
        extra = sorted(set(table) - set(known))
        if extra:
            raise fail(self.path, f"unknown key {extra[0]!r} in {where}", f"use any of: {', '.join(known)} (docs/target.md)")

    def typed(self, table: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, default: Any = None) -> Any:
        value = table.get(key, default)
        if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise fail(self.path, f"{where}.{key} = {value!r} is not a {want}", f"give {key} as a TOML {want}")
        return value

    def file(self, value: str | None, key: str) -> Path | None:
        """A file the target names, relative to the target file; it must exist and be readable."""
        if value is None:
            return None
        resolved = (self.path.parent / Path(value).expanduser()).resolve()
        if not resolved.is_file() or not os.access(resolved, os.R_OK):
            raise fail(self.path, f"{key} = {value!r}: no readable file at {resolved}", f"point {key} at an existing file")
        return resolved

    def secret(self, table: dict[str, Any], key: str, where: str) -> Secret | None:
        """`key` inline, `key_env` (an environment variable) or `key_file` (a file's first line): at most one."""
        given = [k for k in (key, f"{key}_env", f"{key}_file") if k in table]
        if len(given) > 1:
            raise fail(self.path, f"{where} gives the {key} twice ({' and '.join(given)})", f"keep one of {', '.join(given)}")
        if not given:
            return None
        source = given[0]
        value = self.typed(table, source, str, where)
        if source == f"{key}_env":
            if value not in self.env:
                raise fail(self.path, f"{where}.{source} names ${value}, which is not set",
                           f"export {value}=... before the run, or use {key}_file")
            return Secret(self.env[value], f"environment variable {value}")
        if source == f"{key}_file":
            secret_path = self.file(value, f"{where}.{source}")
            assert secret_path is not None
            text = secret_path.read_text().splitlines()
            if not text or not text[0]:
                raise fail(self.path, f"{where}.{source}: {secret_path} is empty", f"write the {key} on its first line")
            return Secret(text[0], f"file {secret_path}")
        return Secret(value, "the target file")

    def security(self, table: dict[str, Any]) -> Security:
        known = ("protocol", "sasl_mechanism", "username", "password", "password_env", "password_file", "ca_file",
                 "cert_file", "key_file", "key_password", "key_password_env", "key_password_file", "verify")
        self.unknown(table, known, "[security]")
        protocol = str(self.typed(table, "protocol", str, "security", "PLAINTEXT")).upper()
        if protocol not in PROTOCOLS:
            raise fail(self.path, f"security.protocol = {protocol!r} is not a Kafka security protocol", f"use one of {', '.join(PROTOCOLS)}")
        mechanism = self.typed(table, "sasl_mechanism", str, "security")
        username = self.typed(table, "username", str, "security")
        password = self.secret(table, "password", "security")
        sasl = protocol.startswith("SASL_")
        if sasl:
            mechanism = (mechanism or "").upper()
            if mechanism not in MECHANISMS:
                raise fail(self.path, f"security.sasl_mechanism = {mechanism or None!r} for {protocol}",
                           f"use one of {', '.join(MECHANISMS)} (OAUTHBEARER and GSSAPI are not supported yet)")
            if not username or password is None:
                raise fail(self.path, f"{protocol} needs security.username and a password",
                           "add username and one of password_env, password_file or password")
        elif mechanism or username or password:
            raise fail(self.path, f"SASL settings given for protocol {protocol}, which does not use SASL",
                       "set protocol = \"SASL_SSL\" (or SASL_PLAINTEXT), or remove the SASL keys")
        tls_keys = [k for k in ("ca_file", "cert_file", "key_file", "verify") if k in table]
        if tls_keys and protocol not in ("SSL", "SASL_SSL"):
            raise fail(self.path, f"TLS settings ({', '.join(tls_keys)}) given for protocol {protocol}, which does not use TLS",
                       "set protocol = \"SSL\" or \"SASL_SSL\", or remove them")
        cert, key = self.file(table.get("cert_file"), "security.cert_file"), self.file(table.get("key_file"), "security.key_file")
        if (cert is None) != (key is None):
            raise fail(self.path, "a client certificate needs both security.cert_file and security.key_file", "give both, or neither")
        verify = self.typed(table, "verify", bool, "security", True)
        return Security(protocol, mechanism if sasl else None, username, password,
                        self.file(table.get("ca_file"), "security.ca_file"), cert, key,
                        self.secret(table, "key_password", "security"), verify)

    def access(self, table: dict[str, Any], defaults: dict[str, Any], where: str, transport: str) -> NodeAccess:
        merged = {**defaults, **{k: v for k, v in table.items() if k in NODE_KEYS}}
        types: dict[str, Any] = {"user": str, "port": int, "key_file": str, "known_hosts": str, "host_key_check": bool,
                                 "sudo": bool, "start": str, "stop": str, "pid": str, "log_file": str, "metadata_dir": str,
                                 "connect_timeout_s": (int, float)}
        values = {k: self.typed(merged, k, types[k], where) for k in NODE_KEYS if k in merged}
        if "port" in values and not 0 < values["port"] < 65536:
            raise fail(self.path, f"{where}.port = {values['port']} is not a TCP port", "use 1 to 65535 (ssh: 22)")
        for key in ("start", "stop", "pid"):  # "" says there is none: the faults that need it are refused
            if key in values and values[key] != values[key].strip() and not values[key].strip():
                raise fail(self.path, f"{where}.{key} is blank", f"give the command, \"\" for none, or leave {key} out for systemd's")
        values["key_file"] = self.file(values.get("key_file"), f"{where}.key_file")
        values["known_hosts"] = self.file(values.get("known_hosts"), f"{where}.known_hosts")
        if transport == "ssh":
            host = self.typed(table, "host", str, where)
            if not host:
                raise fail(self.path, f"{where} has no host", "give the host name or address that ssh reaches it at")
            return NodeAccess("ssh", host=host, **values)
        container = self.typed(table, "container", str, where)
        if not container:
            raise fail(self.path, f"{where} uses transport \"docker\" but names no container", "add container = \"<name>\"")
        return NodeAccess("docker", container_name=container, host=container, **values)

    def broker(self, table: Any, index: int, ssh_defaults: dict[str, Any]) -> BrokerTarget:
        where = f"brokers[{index}]"
        if not isinstance(table, dict):
            raise fail(self.path, f"{where} is not a table", "write each broker as a [[brokers]] table")
        self.unknown(table, ("id", "host", "address", "roles", "transport", "container", *NODE_KEYS), where)
        node_id = self.typed(table, "id", int, where)
        if node_id is None or node_id < 0:
            raise fail(self.path, f"{where} has no id (or a negative one)", "give the broker's node.id as id = N")
        transport = self.typed(table, "transport", str, where, "ssh")
        if transport not in TRANSPORTS:
            raise fail(self.path, f"{where}.transport = {transport!r}", f"use one of {', '.join(TRANSPORTS)}")
        roles = tuple(self.typed(table, "roles", list, where, ["broker", "controller"]))
        if not roles or any(r not in ROLES for r in roles) or "broker" not in roles:
            raise fail(self.path, f"{where}.roles = {list(roles)!r}", "a listed node is a broker: [\"broker\"] or [\"broker\", \"controller\"]")
        access = self.access(table, ssh_defaults if transport == "ssh" else {}, where, transport)
        address = self.typed(table, "address", str, where) or access.host
        return BrokerTarget(node_id, roles, access, address)

    def target(self, data: dict[str, Any]) -> Target:
        self.unknown(data, ("name", "bootstrap_servers", "topic_prefix", "kafka_version", "security", "ssh", "brokers"),
                     "the top level")
        bootstrap = self.typed(data, "bootstrap_servers", (str, list), "target")
        if isinstance(bootstrap, list):
            bootstrap = ",".join(str(b) for b in bootstrap)
        if not bootstrap or any(":" not in s or not s.rsplit(":", 1)[1].isdigit() for s in bootstrap.split(",")):
            raise fail(self.path, f"bootstrap_servers = {bootstrap!r}", "give host:port[,host:port...] of the listener the harness may use")
        prefix = self.typed(data, "topic_prefix", str, "target", DEFAULT_TOPIC_PREFIX)
        if not prefix or not all(c.isalnum() or c in "._-" for c in prefix):
            raise fail(self.path, f"topic_prefix = {prefix!r}", "use letters, digits, '.', '_' and '-', e.g. \"kafka-harness-\"")
        security = self.security(self.typed(data, "security", dict, "target", {}))
        ssh = self.typed(data, "ssh", dict, "target", {})
        self.unknown(ssh, NODE_KEYS, "[ssh]")
        brokers = tuple(self.broker(b, i, ssh) for i, b in enumerate(self.typed(data, "brokers", list, "target", [])))
        ids = [b.node_id for b in brokers]
        if len(set(ids)) != len(ids):
            raise fail(self.path, f"broker ids repeat ({ids})", "list each broker once")
        return Target(self.path, bootstrap, security, brokers, prefix, self.typed(data, "kafka_version", str, "target"),
                      self.typed(data, "name", str, "target", "") or self.path.stem)
