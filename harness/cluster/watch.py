"""A watch on a running cluster: it notices within seconds that the cluster is gone.

    with ClusterWatch(cluster, unreachable_after_s=60) as watch:
        ...                      # the workload
        if watch.failure: ...    # e.g. "containers removed: kh-RUN-kafka-1, ..."

Without it a run whose containers were removed from outside (a `docker rm -f`, a cleanup of
the wrong run) kept sending into nothing until its heal and drain timeouts: about 8 minutes for
a 120 s run before FAILED. One background thread looks, every `period_s`:

- at the run's containers, by its label: gone, or no longer running (exited, dead), is a
  failure at once; a paused container is a fault, not a failure;
- at the Docker engine: silent for longer than `docker_silence_s` is a failure;
- at the brokers, with a Kafka ApiVersions request on each one's host port (what every client
  sends first; any answer, even an error, means the broker is there): none answering for longer
  than `unreachable_after_s` makes the cluster `unresponsive`. Faults make every broker
  unreachable for a while (kill, pause or power-off of all), so the caller sets the bound above
  its longest fault.

`failure` (containers gone or stopped, Docker silent) is the harness's problem: the run fails.
`unresponsive` is Kafka's behaviour, not a failure: brokers whose containers run but answer
nothing. 0.10.2.2 does that after its followers refuse to truncate (KAFKA-4039: every broker of a
detection run hung within 2 min of a leader elected with a shorter log than its followers'), and
that is exactly what a run must still record and check, so the run stops its workload and faults
then, drains what it can in a short bound, and is checked (issue 21).
A TCP connect alone proves nothing: Docker's port proxy accepts for a broker that is dead.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import threading
import time
from typing import TYPE_CHECKING, Any

import docker

from harness.provision.settings import RUN_LABEL

if TYPE_CHECKING:
    from harness.cluster.kafka_cluster import KafkaCluster

log = logging.getLogger(__name__)

LIVE_STATES = ("running", "paused", "restarting")  # paused: the pause nemesis may do that
API_VERSIONS = 18


def api_versions_request(correlation_id: int, client_id: bytes = b"kh-watch") -> bytes:
    """ApiVersions v0 (empty body), which every broker since 0.10.0 answers, with its size prefix."""
    header = struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(header)) + header


def broker_answers(port: int, timeout_s: float = 1.5, host: str = "127.0.0.1", tls: bool = False) -> bool:
    """True when a Kafka broker on host:port answers an ApiVersions request within the timeout. A TLS
    listener is asked inside a TLS session (it answers no plaintext request); the handshake checks no
    certificate: it asks whether a broker is there and trusts nothing it says."""
    correlation = int(time.monotonic_ns() & 0x7FFFFFFF)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw:
            raw.settimeout(timeout_s)
            sock: Any = raw
            if tls:
                context = ssl.create_default_context()
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # liveness only
                sock = context.wrap_socket(raw, server_hostname=host)
            sock.sendall(api_versions_request(correlation))
            reply = b""
            while len(reply) < 8:  # size, correlation id; at most 8 reads of one byte
                chunk = sock.recv(8 - len(reply))
                if not chunk:
                    return False
                reply += chunk
    except (OSError, ssl.SSLError):
        return False
    return struct.unpack(">ii", reply)[1] == correlation


class Watch:
    """One background thread that looks every `period_s` (`look`, by the subclass) and keeps the
    bound on silence: no broker answering for longer than `unreachable_after_s` sets `unresponsive`.
    `failure` is None until the look returns a reason the cluster is gone; the thread then stops."""

    name = "watch"

    def __init__(self, run_id: str, unreachable_after_s: float, period_s: float) -> None:
        self.run_id = run_id
        self.unreachable_after_s, self.period_s = unreachable_after_s, period_s
        self.failure: str | None = None
        self.failed_at: float | None = None  # time.monotonic() when the failure was seen
        self.unresponsive: str | None = None  # why no broker answers
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_answer = time.monotonic()

    def __enter__(self) -> Any:
        self._last_answer = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name=f"{self.name}-{self.run_id}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while self.failure is None and not self._stop.wait(self.period_s):
            try:
                reason = self.check(time.monotonic())
            except Exception as exc:  # a watch that dies must not take the run with it
                log.warning("%s of %s stopped: %s", self.name, self.run_id, exc)
                return
            if reason is not None:
                self.failure, self.failed_at = reason, time.monotonic()
                log.error("run %s: %s", self.run_id, reason)

    def check(self, now: float) -> str | None:
        raise NotImplementedError

    def heard(self, now: float, answered: bool, silent: str) -> None:
        """Note whether a broker answered at `now`; past the bound, say once which went `silent`."""
        if answered:
            self._last_answer = now
            return
        quiet_s = now - self._last_answer
        if quiet_s > self.unreachable_after_s and self.unresponsive is None:
            self.unresponsive = f"no broker has answered for {quiet_s:.0f} s (bound {self.unreachable_after_s:.0f} s): {silent}"
            log.warning("run %s: %s", self.run_id, self.unresponsive)


class ClusterWatch(Watch):
    """See the module docstring. `failure` is None until the cluster is seen gone, then the reason."""

    name = "watch"

    def __init__(self, cluster: "KafkaCluster", unreachable_after_s: float = 60.0, period_s: float = 1.0,
                 docker_silence_s: float = 20.0, client: Any = None) -> None:
        super().__init__(cluster.run_id, unreachable_after_s, period_s)
        # The nodes are read again at every look: a node added during the run (nemesis/membership.py,
        # harness/cluster/grow.py) is watched from then on, one retired by the harness no longer is.
        self.cluster = cluster
        self.containers, self.ports = self.current()
        self.docker_silence_s = docker_silence_s
        self.client = client
        self._last_docker = time.monotonic()

    def __enter__(self) -> "ClusterWatch":
        self.client = self.client or docker.from_env()
        self._last_docker = time.monotonic()
        return super().__enter__()

    def check(self, now: float) -> str | None:
        """One look: the reason the cluster is gone, or None (`unresponsive` is set on the side)."""
        gone = self.containers_gone(now)
        if gone is not None:
            return gone
        listeners = ", ".join(f"127.0.0.1:{p}" for p in self.ports.values())
        self.heard(now, any(broker_answers(port) for port in self.ports.values()),
                   f"every broker ({listeners}) is unreachable, though its container runs")
        return None

    def current(self) -> tuple[dict[str, str], dict[int, int]]:
        """The cluster's nodes now: container name -> hostname, broker id -> host port (a node whose
        container has not started yet is left out)."""
        names = {}
        for node in list(self.cluster.nodes):
            try:
                names[node.container.get_wrapped_container().name] = node.hostname
            except Exception:  # testcontainers: "Container is not started"
                continue
        return names, {b.node_id: b.host_port for b in list(self.cluster.brokers) if b.host_port}

    def containers_gone(self, now: float) -> str | None:
        before = self.current()[0]
        try:
            listed = self.client.api.containers(all=True, filters={"label": f"{RUN_LABEL}={self.run_id}"})
        except Exception as exc:  # the engine under load may be slow: only a long silence counts
            if now - self._last_docker > self.docker_silence_s:
                return f"the Docker engine has not answered for {now - self._last_docker:.0f} s: {exc}"
            return None
        self._last_docker = now
        # Only the nodes the cluster held both before and after the listing: the harness may retire
        # one (its container removed) while the listing is under way.
        after, self.ports = self.current()
        self.containers = {name: host for name, host in before.items() if name in after}
        states = {name.lstrip("/"): c.get("State", "") for c in listed for name in c.get("Names", [])}
        missing = sorted(n for n in self.containers if n not in states)
        stopped = sorted(f"{n} ({states[n]})" for n in self.containers if n in states and states[n] not in LIVE_STATES)
        if missing:
            return f"the cluster's containers were removed from outside the harness: {', '.join(missing)}"
        if stopped:
            return f"the cluster's containers stopped: {', '.join(stopped)}"
        return None
