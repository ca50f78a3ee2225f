"""iptables inside broker containers: the mechanism behind partitions and packet loss.

Each fault kind has its own pair of chains (KH_<TAG>_IN, KH_<TAG>_OUT),
hooked into INPUT and OUTPUT, so healing one kind is a flush of its chains
and never touches another kind's rules or anything else. DROP on INPUT stops established TCP connections too: their
packets are dropped like any others (tests/test_nemesis.py checks it).
The containers have NET_ADMIN only, never privileged.

This kernel has no netem, so delay and reordering are out of reach; random
loss uses iptables' `statistic` match instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.cluster.broker_config import EXTERNAL_PORT
from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.cluster.node import Node



def iptables(node: "Node", *rules: str) -> None:
    """Run iptables commands in `node`'s container; raise with the output on failure."""
    script = " && ".join(f"iptables -w {rule}" for rule in rules)
    code, out = node.exec(script)
    if code != 0:
        raise HarnessError(f"iptables failed on {node.hostname}: {out.strip()[:400]}", hint="the container needs NET_ADMIN")


def ensure_chains(node: "Node", tag: str) -> None:
    code, _ = node.exec(f"iptables -w -S KH_{tag}_IN >/dev/null 2>&1")
    if code != 0:
        iptables(node, f"-N KH_{tag}_IN", f"-N KH_{tag}_OUT", f"-I INPUT -j KH_{tag}_IN", f"-I OUTPUT -j KH_{tag}_OUT")


def drop_from(node: "Node", peers: list["Node"], tag: str, probability: float | None = None,
              port: int | None = None) -> None:
    """On `node`, drop packets arriving from `peers` (all, or each with `probability`); with `port`,
    only those bound for that port of `node` (every connection either way that uses it: a peer's
    connection to the port is refused at `node`, and `node`'s to the peer's port at the peer's end
    when the peer drops from `node` too)."""
    ensure_chains(node, tag)
    match = f"-m statistic --mode random --probability {probability:.4f} " if probability is not None else ""
    to_port = f"-p tcp --dport {port} " if port is not None else ""
    iptables(node, *[f"-A KH_{tag}_IN -s {peer.address} {to_port}{match}-j DROP" for peer in peers])


def drop_host_clients(node: "Node", tag: str) -> None:
    """Cut the host's clients from `node`: drop its external listener's traffic both ways."""
    ensure_chains(node, tag)
    iptables(node, f"-A KH_{tag}_IN -p tcp --dport {EXTERNAL_PORT} -j DROP", f"-A KH_{tag}_OUT -p tcp --sport {EXTERNAL_PORT} -j DROP")


def heal(node: "Node", tag: str) -> None:
    """Remove every rule of kind `tag` from `node` (a no-op where there are none)."""
    node.exec(f"iptables -w -F KH_{tag}_IN 2>/dev/null; iptables -w -F KH_{tag}_OUT 2>/dev/null; true")
