"""The watch of a target run: does any broker still answer? (harness/cluster/watch.py's for containers.)

A target has no containers to vanish, so `failure` stays None; `unresponsive` is set when no
broker has answered an ApiVersions request for `unreachable_after_s`, as for a local cluster. A TLS
listener is asked inside a TLS session: a bare TCP connect proves nothing (a proxy accepts for a
dead broker), and a TLS listener answers no plaintext request.
"""

from __future__ import annotations

from typing import Any

from harness.cluster.watch import Watch, broker_answers


def answers(host: str, port: int, tls: bool, timeout_s: float = 2.0) -> bool:
    """True when a Kafka broker at host:port answers ApiVersions within the timeout."""
    return broker_answers(port, timeout_s=timeout_s, host=host, tls=tls)


class TargetWatch(Watch):
    """`with TargetWatch(cluster, unreachable_after_s) as watch`: see the module docstring."""

    name = "target-watch"

    def __init__(self, cluster: Any, unreachable_after_s: float = 60.0, period_s: float = 1.0) -> None:
        super().__init__(cluster.run_id, unreachable_after_s, period_s)
        self.listeners = dict(cluster.addresses) or {0: cluster.bootstrap_servers().split(",")[0]}
        self.tls = cluster.target.security.tls

    def check(self, now: float) -> None:
        answered = False
        for address in self.listeners.values():
            host, _, port = address.rpartition(":")
            if answers(host, int(port), self.tls):
                answered = True
                break
        self.heard(now, answered, f"the target's listeners {', '.join(self.listeners.values())}")
