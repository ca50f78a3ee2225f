"""Before a run touches a target: can the harness reach it, log in, trust it, and undo its faults?

Each failure is a HarnessError (exit 2) that names the broker or the listener and the fix, raised
before any topic is created or any client opened:

- SSH (only when faults are allowed, or for cleanup): a refused key, an unreachable host, an
  unknown host key, each told apart from ssh's own message;
- the Kafka listener: unreachable, a TLS certificate signed by a CA the target does not name, SASL
  credentials refused, each told apart by librdkafka's error code;
- the brokers the cluster's metadata lists against those the target file lists;
- the faults asked for against what each host can do (nemesis/registry.py refuse_unserved).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.cluster.ssh_transport import CommandTransport, SshTransport, probe_capabilities
from harness.errors import HarnessError
from harness.target.cluster import TargetCluster

log = logging.getLogger(__name__)

# Packages that read broker metadata at 127.0.0.1:<published port> themselves (nemesis/sequence.py),
# with no client security: on a target they would see no broker. Refused, with this reason.
LOCAL_ONLY = ("flap", "rejoin", "heir", "transfer")


def ssh_failure(node: Any, transport: CommandTransport, output: str) -> HarnessError:
    """The HarnessError for a broker whose host did not answer a trivial command."""
    where = f"broker {node.node_id} ({transport.user}@{transport.host}:{transport.port})" if isinstance(transport, SshTransport) \
        else f"broker {node.node_id} (container {getattr(transport, 'container_name', '?')})"
    text = output.strip()
    if "Permission denied" in text or "Too many authentication failures" in text:
        key = getattr(transport, "key_file", None) or "your default key"
        return HarnessError(f"{where}: SSH refused the key {key} ({text.splitlines()[-1][:200]}).",
                            hint=f"add that key's public half to ~{transport.user}/.ssh/authorized_keys on the host, "  # type: ignore[attr-defined]
                                 "or set key_file in the target file to the key it accepts")
    if "Host key verification failed" in text or "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "No ED25519 host key" in text:
        return HarnessError(f"{where}: the host's SSH key is not in known_hosts, or differs from it.",
                            hint="check the host's key fingerprint, then add it (ssh-keyscan -p PORT HOST >> known_hosts) and "
                                 "name that file as known_hosts in the target file; host_key_check = false skips the check")
    if any(s in text for s in ("Connection refused", "timed out", "No route to host", "Could not resolve", "Network is unreachable",
                               "Connection closed", "Connection reset")):
        return HarnessError(f"{where}: unreachable over SSH ({text.splitlines()[-1][:200]}).",
                            hint="check host and port in the target file, that sshd runs there, and that this machine may connect")
    if "sudo" in text and "password" in text:
        return HarnessError(f"{where}: sudo asks for a password ({text[:200]}).",
                            hint="allow the SSH user passwordless sudo for the harness's commands, or log in as root (sudo = false)")
    return HarnessError(f"{where}: a trivial command failed over the transport ({text[:300] or 'no output'}).",
                        hint="run `ssh -p PORT USER@HOST true` by hand to see why")


def check_hosts(cluster: TargetCluster) -> None:
    """Every broker's host answers `echo` through its transport; the first failure is raised."""
    def ask(node: Any) -> tuple[Any, int, str]:
        code, out = node.exec("echo kh-ok")
        return node, code, out

    with ThreadPoolExecutor(max_workers=max(1, len(cluster.brokers))) as pool:
        answers = list(pool.map(ask, cluster.brokers))
    for node, code, out in answers:
        if code != 0 or "kh-ok" not in out:
            raise ssh_failure(node, node.transport, out)


def listener_failure(cluster: TargetCluster, errors: list[Any], timed_out: str) -> HarnessError:
    from confluent_kafka import KafkaError

    security = cluster.target.security
    listener = f"the listener {cluster.bootstrap_servers()} ({security.protocol})"
    codes = {e.code() for e in errors}
    telling = [e.str() for e in errors if e.code() not in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)]
    text = ((telling or [e.str() for e in errors] or [timed_out])[0])[:300]  # the first says it; the rest repeat it per broker
    if KafkaError._AUTHENTICATION in codes:
        return HarnessError(f"{listener} refused the SASL credentials of user {security.username!r} ({text}).",
                            hint=f"check the password ({security.password.source if security.password else 'none given'}) "
                                 f"and that the user exists for {security.sasl_mechanism}")
    if KafkaError._SSL in codes or "certificate" in text or "SSL" in text:
        return HarnessError(f"{listener}: the TLS handshake failed ({text}).",
                            hint="set security.ca_file to the CA that signed the brokers' certificates (a certificate must "
                                 "also name the host it is reached at); verify = false turns the check off, and the report says so")
    return HarnessError(f"{listener} does not answer ({text}).",
                        hint="check bootstrap_servers and security.protocol in the target file, and that this machine may connect")


def check_listener(cluster: TargetCluster, timeout_s: float = 15.0) -> dict[int, str]:
    """One metadata request with the target's security; the brokers' advertised addresses."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[Any] = []
    lock = threading.Lock()

    def on_error(error: Any) -> None:
        with lock:
            errors.append(error)

    client = AdminClient({**cluster.client_settings, "bootstrap.servers": cluster.bootstrap_servers(), "error_cb": on_error,
                          "logger": logging.getLogger("librdkafka.preflight")})
    # Short asks, each followed by a poll: librdkafka hands its error callbacks (a refused password,
    # an unverifiable certificate) to poll() only, and those are the errors that name the cause.
    began = time.monotonic()
    deadline, metadata, last = began + timeout_s, None, ""
    while metadata is None and time.monotonic() < deadline:
        try:
            metadata = client.list_topics(timeout=min(1.5, max(0.5, deadline - time.monotonic())))
        except KafkaException as exc:
            last = str(exc)
        client.poll(0.2)
        if any(e.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL) for e in errors):
            raise listener_failure(cluster, errors, last)
        if time.monotonic() > began + 5 and any(e.code() == KafkaError._ALL_BROKERS_DOWN for e in errors):
            break  # every bootstrap server refused for 5 s: not a broker restarting
    if metadata is None:
        raise listener_failure(cluster, errors, last)
    cluster.addresses = {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    return cluster.addresses


def check_brokers(cluster: TargetCluster, faults: bool) -> None:
    """The brokers the file lists are in the cluster's metadata; with faults, all of them are listed."""
    listed = {b.node_id for b in cluster.brokers}
    seen = set(cluster.addresses)
    missing = sorted(listed - seen)
    if missing:
        raise HarnessError(f"the target file lists broker(s) {missing}, which the cluster's metadata does not name "
                           f"(it names {sorted(seen)}).", hint="fix the ids in [[brokers]] (each broker's node.id), or start those brokers")
    extra = sorted(seen - listed)
    if faults and extra:
        raise HarnessError(f"the cluster has broker(s) {extra} that the target file does not list.",
                           hint="list every broker: faults choose among them and the heal waits for each of them")


def check_faults(cluster: TargetCluster, packages: list[str]) -> None:
    """Each package is one the target can serve and undo; each host's capabilities probed first."""
    from nemesis import registry

    local = [p for p in packages if p in LOCAL_ONLY]
    if local:
        raise HarnessError(f"the nemesis package(s) {', '.join(local)} cannot run against a target: they ask each broker for "
                           "its metadata at 127.0.0.1 without the target's security.",
                           hint="use kill, pause, partition, loss or roll against a target")

    def probe(node: Any) -> None:
        assert isinstance(node.transport, CommandTransport)
        have, why = probe_capabilities(node.transport)
        cluster.set_capabilities(node.node_id, have, why)

    with ThreadPoolExecutor(max_workers=max(1, len(cluster.brokers))) as pool:
        list(pool.map(probe, cluster.brokers))
    lacking = {p: sorted(registry.package(p).requires - cluster.capabilities) for p in packages}
    lacking = {p: m for p, m in lacking.items() if m}
    if lacking:
        reasons = "; ".join(f"broker {i}: {why}" for i, gaps in cluster.capability_gaps.items()
                            for cap, why in gaps.items() if any(cap in m for m in lacking.values()))
        try:
            registry.refuse_unserved(packages, cluster.capabilities, f"the target {cluster.target.name}")
        except HarnessError as exc:
            exc.details = reasons
            raise


def preflight(cluster: TargetCluster, packages: list[str]) -> None:
    """Every check above, in the order a person would make them; exit 2 at the first failure."""
    if packages:
        check_hosts(cluster)
    check_listener(cluster)
    check_brokers(cluster, bool(packages))
    if packages:
        check_faults(cluster, packages)
