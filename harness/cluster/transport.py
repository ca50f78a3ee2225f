"""How the harness acts on a node: one small protocol, whatever the node runs on.

Jepsen puts SSH, docker and Kubernetes behind one `Remote`; here `Transport` is that seam. Every
action on a node goes through its transport: running a command, signalling a process, reading a
file from a byte offset, writing a file, and starting the broker's process. Paths are relative to
the node's folder (its Kafka working directory: server.log, kafka.pid, clock/offset). Nothing
outside harness/cluster/ touches a node's folder or container; it asks the node (harness/cluster/node.py),
which asks its transport.

`DockerTransport` is today's behaviour: commands by `docker exec` in the node's container, files
read and written on the host through the folder bind-mounted into it (a read on the host costs no
exec: a `ps` exec took 0.1-1 s under load). An SSH transport (issue 37) implements the same five
calls over one SSH connection.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from harness.history.files import write_text


class Transport(Protocol):
    """What a node's transport does; each call is bounded by the transport's own timeouts."""

    # What this node can do for a nemesis (nemesis/registry.py CAPABILITIES).
    capabilities: frozenset[str]

    def run(self, command: str) -> tuple[int, str]:
        """Run `sh -c command` on the node; (exit code, combined output)."""

    def signal(self, pid: int, sig: int) -> tuple[int, str]:
        """Send `sig` to process `pid` on the node; (exit code, output) of the kill."""

    def read_file(self, path: str, offset: int = 0) -> tuple[bytes, int]:
        """The bytes of the node's file `path` from byte `offset` on, and the offset after them;
        (b"", offset) when the file does not exist."""

    def size(self, path: str) -> int:
        """The size of the node's file `path` in bytes; 0 when it does not exist."""

    def write_file(self, path: str, text: str) -> None:
        """Replace the node's file `path` with `text`, atomically (a reader never sees half of it)."""

    def start_broker(self, args: str = "") -> tuple[int, str]:
        """Start the broker's process (a no-op if it runs); (exit code, output ending with its PID)."""


# Capabilities a docker node has: exec reaches the JVM (signals, restart), iptables (the container
# has NET_ADMIN), libfaketime (the start script preloads it), its logs (the bind-mounted folder), its
# data directory (the harness made it) and Kafka's tools (the harness's jars are mounted in it).
DOCKER_CAPABILITIES = frozenset({"signals", "restart", "iptables", "faketime", "log_files", "own_data", "kafka_tools"})


class DockerTransport:
    """A node in a local container whose folder is bind-mounted at `mount` inside it."""

    capabilities = DOCKER_CAPABILITIES

    def __init__(self, container: Any, folder: Path, mount: str, start_script: str = "start.sh") -> None:
        self.container, self.folder, self.mount, self.start_script = container, Path(folder), mount, start_script

    def run(self, command: str) -> tuple[int, str]:
        result = self.container.get_wrapped_container().exec_run(["sh", "-c", command])
        return result.exit_code, result.output.decode(errors="replace")

    def signal(self, pid: int, sig: int) -> tuple[int, str]:
        return self.run(f"kill -{int(sig)} {int(pid)}")

    def _path(self, path: str) -> Path:
        resolved = (self.folder / path).resolve()
        if self.folder.resolve() not in (resolved, *resolved.parents):
            raise ValueError(f"{path!r} lies outside the node's folder")
        return resolved

    def read_file(self, path: str, offset: int = 0) -> tuple[bytes, int]:
        try:
            with open(self._path(path), "rb") as f:
                f.seek(offset)
                data = f.read()
                return data, f.tell()
        except FileNotFoundError:
            return b"", offset

    def size(self, path: str) -> int:
        try:
            return os.stat(self._path(path)).st_size
        except FileNotFoundError:
            return 0

    def write_file(self, path: str, text: str) -> None:
        write_text(self._path(path), text)

    def start_broker(self, args: str = "") -> tuple[int, str]:
        return self.run(f"{self.mount}/{self.start_script}{args}")


__all__ = ["DOCKER_CAPABILITIES", "DockerTransport", "Transport"]
