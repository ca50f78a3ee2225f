"""Transports to brokers the harness did not start: over SSH, or into a named Docker container.

Both act on the broker's host by shell commands only (harness/cluster/transport.py's protocol):
Kafka is started, stopped and found by the commands its operator gave (a systemd unit by default),
its log is read with `tail -c`, and nothing of the host is assumed beyond a POSIX shell. The
SSH transport drives the system `ssh` client rather than a Python SSH library: the operator's own
client honours their ~/.ssh/config (ProxyJump, agents, certificates) and known_hosts as every
other tool of theirs does, needs no new dependency, and one multiplexed connection per broker
(ControlMaster) makes a command cost a few milliseconds, not a handshake.

Healing must survive the harness (issue 37): with a `run_tag` (the run id), every iptables rule the
transport adds carries the comment `kh-run=<run id>`, and every SIGKILL/SIGTERM or SIGSTOP it
sends leaves a marker file in MARKER_DIR on the host, removed when the broker is started again
or continued. `python -m harness cleanup --target FILE` reads both (harness/target/leftovers.py).
"""

from __future__ import annotations

import posixpath
import re
import shlex
import shutil
import signal as signals
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

MARKER_DIR = "/var/tmp/kafka-harness"  # on the target host: <run id>.stopped / <run id>.paused hold a PID
PID_NAME = "kafka.pid"  # the node-relative name Node reads the PID from (harness/cluster/node.py)
STOPPING = {int(signals.SIGKILL), int(signals.SIGTERM)}


def tag_iptables(command: str, run_tag: str | None) -> str:
    """`command` with the run's comment on every rule it appends to one of the harness's chains."""
    if not run_tag or "iptables" not in command:
        return command
    comment = f"-m comment --comment kh-run={run_tag} "
    return re.sub(r"(-A KH_\S+ [^&;]*?)(-j DROP)", lambda m: m.group(1) + comment + m.group(2), command)


class CommandTransport:
    """What SSH and docker-by-name share; a subclass says how one shell command reaches the host."""

    def __init__(self, *, start: str, stop: str, pid: str, log_file: str, metadata_dir: str,
                 capabilities: frozenset[str] = frozenset(), sudo: bool = False, timeout_s: float = 60.0) -> None:
        self.start_command, self.stop_command, self.pid_command = start, stop, pid
        self.log_file, self.metadata_dir = log_file, metadata_dir
        self.capabilities, self.sudo, self.timeout_s = capabilities, sudo, timeout_s
        self.run_tag: str | None = None  # the run id, once a run owns the target

    # --- one command -----------------------------------------------------------------------------
    def exec_bytes(self, command: str, timeout_s: float | None = None) -> tuple[int, bytes]:
        raise NotImplementedError

    def wrap(self, command: str) -> str:
        wrapped = f"sh -c {shlex.quote(command)}"
        return f"sudo -n {wrapped}" if self.sudo else wrapped

    def run(self, command: str) -> tuple[int, str]:
        code, out = self.exec_bytes(tag_iptables(command, self.run_tag))
        return code, out.decode(errors="replace")

    # --- the protocol ----------------------------------------------------------------------------
    def signal(self, pid: int, sig: int) -> tuple[int, str]:
        command = f"kill -{int(sig)} {int(pid)}"
        if self.run_tag:  # a marker for `cleanup --target`: this run stopped or paused Kafka here
            marker = posixpath.join(MARKER_DIR, self.run_tag)
            if int(sig) in STOPPING:
                command += f" && {{ mkdir -p {MARKER_DIR} && echo {int(pid)} > {marker}.stopped; }}"
            elif int(sig) == int(signals.SIGSTOP):
                command += f" && {{ mkdir -p {MARKER_DIR} && echo {int(pid)} > {marker}.paused; }}"
            elif int(sig) == int(signals.SIGCONT):
                command += f"; rm -f {marker}.paused"
        return self.run(command)

    def path(self, name: str) -> str:
        """A node-relative name (server.log, stdout.log) as a path on the host: beside the log file."""
        if name == "server.log":
            return self.log_file
        if name.startswith("/") or ".." in name.split("/"):
            raise ValueError(f"{name!r} lies outside the node's folder")
        return posixpath.join(posixpath.dirname(self.log_file), name)

    def read_file(self, path: str, offset: int = 0) -> tuple[bytes, int]:
        if path == PID_NAME:  # the operator's pid command stands for start.sh's kafka.pid
            code, out = self.exec_bytes(self.pid_command)
            return (out.strip() if code == 0 else b""), 0
        target = shlex.quote(self.path(path))
        code, out = self.exec_bytes(f"[ -f {target} ] || exit 3; tail -c +{int(offset) + 1} {target}")
        return (out, offset + len(out)) if code == 0 else (b"", offset)

    def size(self, path: str) -> int:
        code, out = self.exec_bytes(f"stat -c %s {shlex.quote(self.path(path))} 2>/dev/null || echo 0")
        text = out.decode(errors="replace").strip()
        return int(text) if code == 0 and text.isdigit() else 0

    def write_file(self, path: str, text: str) -> None:
        target = shlex.quote(self.path(path))
        code, out = self.run(f"printf %s {shlex.quote(text)} > {target}.kh-tmp && mv {target}.kh-tmp {target}")
        if code != 0:
            raise OSError(f"cannot write {path} on the broker's host: {out.strip()[:300]}")

    def start_broker(self, args: str = "") -> tuple[int, str]:
        """The operator's start command, then the PID; never a format (the target's storage is its own)."""
        if "--format" in args:
            return 2, "the harness never formats a target's storage"
        code, out = self.run(self.start_command)
        if code != 0:
            return code, out
        if self.run_tag:
            self.run(f"rm -f {posixpath.join(MARKER_DIR, self.run_tag)}.stopped")
        pid_code, pid = self.run(self.pid_command)
        return 0, out.rstrip() + "\n" + (pid.strip() if pid_code == 0 else "")

    def stop_broker(self) -> tuple[int, str]:
        return self.run(self.stop_command)

    def close(self) -> None:
        pass


class SshTransport(CommandTransport):
    """A broker's host reached by the system ssh client: key only, never a password prompt
    (BatchMode), the host's key checked against known_hosts unless the target says not to."""

    def __init__(self, host: str, port: int = 22, user: str = "root", key_file: str | None = None,
                 known_hosts: str | None = None, host_key_check: bool = True, connect_timeout_s: float = 10.0,
                 **commands: Any) -> None:
        super().__init__(**commands)
        self.host, self.port, self.user = host, int(port), user
        self.key_file, self.known_hosts, self.host_key_check = key_file, known_hosts, host_key_check
        self.connect_timeout_s = connect_timeout_s
        self._control_dir: str | None = None
        self._lock = threading.Lock()

    def ssh_args(self) -> list[str]:
        with self._lock:
            if self._control_dir is None:  # a private folder for the multiplexing socket (it grants a shell)
                self._control_dir = tempfile.mkdtemp(prefix="kh-ssh-")
        args = ["ssh", "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={int(self.connect_timeout_s)}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR",
                "-o", "ControlMaster=auto", "-o", f"ControlPath={self._control_dir}/%C", "-o", "ControlPersist=60",
                "-p", str(self.port)]
        if self.key_file:
            args += ["-i", str(self.key_file), "-o", "IdentitiesOnly=yes"]
        if not self.host_key_check:  # the target file said host_key_check = false
            args += ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
        else:
            args += ["-o", "StrictHostKeyChecking=yes"]
            if self.known_hosts:
                args += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        return args + ["-l", self.user, self.host, "--"]

    def exec_bytes(self, command: str, timeout_s: float | None = None) -> tuple[int, bytes]:
        try:
            done = subprocess.run([*self.ssh_args(), self.wrap(command)], stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=timeout_s or self.timeout_s)
        except subprocess.TimeoutExpired:
            return 255, f"ssh to {self.user}@{self.host}:{self.port} timed out after {timeout_s or self.timeout_s:.0f} s".encode()
        if done.returncode == 255:  # ssh's own failure (connection, authentication, host key), not the command's
            return 255, done.stdout + done.stderr
        return done.returncode, done.stdout + done.stderr

    def close(self) -> None:
        if self._control_dir is not None:
            subprocess.run([*self.ssh_args()[:-2], "-O", "exit", self.host], capture_output=True, timeout=10)
            shutil.rmtree(self._control_dir, ignore_errors=True)
            self._control_dir = None


class DockerExecTransport(CommandTransport):
    """A broker in a Docker container the harness did not create, by its name (`docker exec`)."""

    def __init__(self, container: str, client: Any = None, **commands: Any) -> None:
        super().__init__(**commands)
        self.container_name, self._client = container, client

    def container(self) -> Any:
        if self._client is None:
            import docker

            self._client = docker.from_env()
        return self._client.containers.get(self.container_name)

    def exec_bytes(self, command: str, timeout_s: float | None = None) -> tuple[int, bytes]:
        import docker.errors

        try:
            result = self.container().exec_run(["sh", "-c", command], user="root" if self.sudo else "")
        except docker.errors.NotFound:
            return 255, f"no container named {self.container_name}".encode()
        except docker.errors.APIError as exc:
            return 255, str(exc).encode()
        return result.exit_code, result.output


def probe_capabilities(transport: CommandTransport) -> tuple[frozenset[str], dict[str, str]]:
    """What the harness can do on this host (nemesis/registry.py CAPABILITIES), each by trying the
    harmless half of it, and why each missing one is missing."""
    have: set[str] = set()
    why: dict[str, str] = {}
    code, out = transport.run(transport.pid_command) if transport.pid_command else (1, "no pid command is given")
    if code == 0 and out.strip().isdigit():
        have.add("signals")
    else:
        why["signals"] = f"the pid command found no running Kafka (exit {code}: {out.strip()[:200] or 'no output'})"
    if "signals" in have and transport.start_command:
        have.add("restart")
    elif transport.start_command:
        why["restart"] = "without the broker's PID the harness cannot tell that it stopped"
    else:
        why["restart"] = "the target gives no start command (start = \"\")"
    code, out = transport.run("iptables -w -S INPUT >/dev/null && iptables -w -m comment --help >/dev/null 2>&1 && echo ok")
    if code == 0 and "ok" in out:
        have.add("iptables")
    else:
        why["iptables"] = f"`iptables -S INPUT` (with the comment match) failed: {out.strip()[:200] or f'exit {code}'}"
    if transport.size("server.log") > 0:
        have.add("log_files")
    else:
        why["log_files"] = f"no readable log at {transport.log_file}"
    return frozenset(have), why


__all__ = ["CommandTransport", "DockerExecTransport", "MARKER_DIR", "SshTransport", "probe_capabilities", "tag_iptables"]
