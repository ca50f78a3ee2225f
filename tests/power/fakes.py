"""Stand-ins shared by the power and disk nemesis unit tests."""

from __future__ import annotations

from pathlib import Path

from harness.cluster.transport import DockerTransport


class LogFolder:
    """A stand-in node's logs, read as Node.read_log reads them: files in its `node_dir`, through a
    docker transport's file half (no container is asked)."""

    node_dir: Path

    def log_size(self, name: str = "server.log") -> int:
        return DockerTransport(None, self.node_dir, "/").size(name)

    def read_log(self, offset: int = 0, name: str = "server.log") -> tuple[str, int]:
        data, end = DockerTransport(None, self.node_dir, "/").read_file(name, offset)
        return data.decode(errors="replace"), end


class Events:
    """A NemesisRecorder that keeps what it is given: (f, value) pairs."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def nemesis(self, f: str, value: dict) -> None:
        self.events.append((f, value))
