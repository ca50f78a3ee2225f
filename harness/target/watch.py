"""The watch of a target run: does any broker still answer? (harness/cluster/watch.py's for containers.)

A target has no containers to vanish, so `failure` stays None; `unresponsive` is set when no
broker has answered an ApiVersions request for `unreachable_after_s`, as for a local cluster. A TLS
listener is asked inside a TLS session: a bare TCP connect proves nothing (a proxy accepts for a
dead broker), and a TLS listener answers no plaintext request. The handshake here checks no
certificate: it asks whether a broker is there, and trusts nothing it says.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import threading
import time
from typing import Any

from harness.cluster.watch import api_versions_request

log = logging.getLogger(__name__)


def answers(host: str, port: int, tls: bool, timeout_s: float = 2.0) -> bool:
    """True when a Kafka broker at host:port answers ApiVersions within the timeout."""
    correlation = int(time.monotonic_ns() & 0x7FFFFFFF)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw:
            raw.settimeout(timeout_s)
            sock: Any = raw
            if tls:
                context = ssl.create_default_context()
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # liveness only: see above
                sock = context.wrap_socket(raw, server_hostname=host)
            sock.sendall(api_versions_request(correlation))
            reply = b""
            while len(reply) < 8:
                chunk = sock.recv(8 - len(reply))
                if not chunk:
                    return False
                reply += chunk
    except (OSError, ssl.SSLError):
        return False
    return struct.unpack(">ii", reply)[1] == correlation


class TargetWatch:
    """`with TargetWatch(cluster, unreachable_after_s) as watch`: see the module docstring."""

    def __init__(self, cluster: Any, unreachable_after_s: float = 60.0, period_s: float = 1.0) -> None:
        self.run_id = cluster.run_id
        self.listeners = dict(cluster.addresses) or {0: cluster.bootstrap_servers().split(",")[0]}
        self.tls = cluster.target.security.tls
        self.unreachable_after_s, self.period_s = unreachable_after_s, period_s
        self.failure: str | None = None
        self.failed_at: float | None = None
        self.unresponsive: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_answer = time.monotonic()

    def __enter__(self) -> "TargetWatch":
        self._last_answer = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name=f"target-watch-{self.run_id}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.check(time.monotonic())
            except Exception as exc:  # a watch that dies must not take the run with it
                log.warning("target watch of %s stopped: %s", self.run_id, exc)
                return

    def check(self, now: float) -> None:
        for address in self.listeners.values():
            host, _, port = address.rpartition(":")
            if answers(host, int(port), self.tls):
                self._last_answer = now
                return
        silent = now - self._last_answer
        if silent > self.unreachable_after_s and self.unresponsive is None:
            self.unresponsive = (f"no broker of the target has answered for {silent:.0f} s (bound {self.unreachable_after_s:.0f} s): "
                                 f"{', '.join(self.listeners.values())}")
            log.warning("run %s: %s", self.run_id, self.unresponsive)
