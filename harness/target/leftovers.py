"""What a run's faults left on a target, and healing it: `cleanup --target FILE` and every target run's end.

The transports tag what faults leave (harness/cluster/ssh_transport.py): each iptables rule in one
of the harness's chains (KH_*) carries the comment `kh-run=<run id>`, and each broker a run stopped
(SIGKILL, SIGTERM) or paused (SIGSTOP) has a marker file, MARKER_DIR/<run id>.stopped or .paused,
holding the PID. Healing deletes exactly those rules (then the harness's chains, once empty),
continues a paused PID, starts a stopped broker with the target's own start command (unless Kafka
already runs again) and removes the markers. Nothing else on the host is touched.
"""

from __future__ import annotations

import re
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from harness.cluster.ssh_transport import MARKER_DIR, CommandTransport, SshTransport

SURVEY = (f"iptables -w -S 2>/dev/null | grep -e '^-A KH_' -e ' -j KH_' ; "
          f"for f in {MARKER_DIR}/*.stopped {MARKER_DIR}/*.paused; do [ -f \"$f\" ] && echo \"MARKER $f $(cat \"$f\")\"; done; true")
RUN_TAG = re.compile(r"kh-run=([^\s\"]+)")  # iptables -S quotes the comment
UNTAGGED = "(untagged)"


@dataclass(frozen=True)
class Leftover:
    node_id: int
    kind: str  # "rule", "stopped", "paused"
    run_id: str
    detail: str  # the rule as `iptables -S` prints it, or the marker's path and PID

    def describe(self) -> str:
        what = {"rule": "iptables rule", "stopped": "broker stopped", "paused": "broker paused"}[self.kind]
        return f"broker {self.node_id}: {what} of run {self.run_id}: {self.detail}"

    def commands(self, transport: CommandTransport) -> list[str]:
        """The shell commands on the broker's host that heal this leftover."""
        if self.kind == "rule":
            return [f"iptables -w {self.detail.replace('-A ', '-D ', 1)}"]
        path, pid = self.detail.split()[:2]
        if self.kind == "paused":
            return [f"kill -CONT {int(pid)} 2>/dev/null; rm -f {shlex.quote(path)}"]
        return [f"if [ -z \"$({transport.pid_command})\" ]; then {transport.start_command}; fi && rm -f {shlex.quote(path)}"]


def parse(node_id: int, text: str) -> list[Leftover]:
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("-A KH_"):
            tag = RUN_TAG.search(line)
            found.append(Leftover(node_id, "rule", tag.group(1) if tag else UNTAGGED, line))
        elif line.startswith("MARKER "):
            _, path, pid = (line.split() + ["0"])[:3]
            name = path.rsplit("/", 1)[-1]
            run_id, _, kind = name.rpartition(".")
            if kind in ("stopped", "paused") and pid.isdigit():
                found.append(Leftover(node_id, kind, run_id, f"{path} {pid}"))
    return found


def survey(cluster: Any, run_id: str | None = None) -> list[Leftover]:
    """Every leftover on the target's brokers (of `run_id` only, if given). A host that does not
    answer is skipped here; `cleanup --target` checks the hosts first."""
    def look(node: Any) -> list[Leftover]:
        code, out = node.exec(SURVEY)
        return parse(node.node_id, out) if code == 0 else []

    with ThreadPoolExecutor(max_workers=max(1, len(cluster.brokers))) as pool:
        found = [f for found in pool.map(look, cluster.brokers) for f in found]
    return [f for f in found if run_id is None or f.run_id == run_id]


def heal_leftovers(cluster: Any, found: list[Leftover]) -> tuple[list[str], list[str]]:
    """Heal every leftover found; (what was done, what failed with why), one line each."""
    done, failed = [], []
    order = {"paused": 0, "stopped": 1, "rule": 2}  # a paused JVM first: a start would wait on it
    for item in sorted(found, key=lambda f: (f.node_id, order[f.kind])):
        node = cluster.node(item.node_id)
        command = " && ".join(item.commands(node.transport))
        code, out = node.exec(command)
        (done if code == 0 else failed).append(item.describe() + ("" if code == 0 else f" (failed: {out.strip()[:200]})"))
    if any(f.kind == "rule" for f in found):
        # Every broker's host, not only those a rule was found on: the partition adds its chains and
        # hooks on every host it cuts, and an earlier cut's heal flushes them, so a run killed during a
        # later cut leaves empty chains beside the rules (CI, 2026-11-26: a host with hooks, no rule).
        for node in cluster.brokers:
            remove_empty_chains(node)
    return done, failed


def remove_empty_chains(node: Any) -> None:
    """The harness's chains on `node`'s host once they hold no rule, and their hooks: harmless when
    left, but a target's firewall is its operator's, so a run takes away what it added."""
    node.exec("for c in $(iptables -w -S 2>/dev/null | sed -n 's/^-N \\(KH_[A-Z0-9_]*\\)$/\\1/p'); do "
              "[ -z \"$(iptables -w -S $c | grep '^-A')\" ] || continue; "
              "iptables -w -D INPUT -j $c 2>/dev/null; iptables -w -D OUTPUT -j $c 2>/dev/null; iptables -w -X $c; done; true")


def manual_commands(cluster: Any, found: list[Leftover]) -> list[str]:
    """The commands an operator runs by hand to heal `found`, each with how to reach its host."""
    lines = []
    for item in found:
        transport = cluster.node(item.node_id).transport
        for command in item.commands(transport):
            inner = transport.wrap(command)
            if isinstance(transport, SshTransport):
                key = f" -i {transport.key_file}" if transport.key_file else ""
                lines.append(f"ssh -p {transport.port}{key} {transport.user}@{transport.host} {shlex.quote(inner)}")
            else:
                lines.append(f"docker exec {getattr(transport, 'container_name', '?')} {inner}")
    return lines
