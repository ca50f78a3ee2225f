"""The local checker: one Spark Connect server on loopback, started on the first check and reused by
every later one (`harness run`, `harness check`, controls, scenarios), then stopped by itself once
idle. Why: a check's own cost on a fresh JVM is mostly start-up, class loading and a cold JIT, paid
again by every `harness run`; a warm server answers in a fraction of it (bench/bench_overhead.py).

It is a supervisor (`python -m analysis.checking.spark_server`, detached from the caller's session) that
starts the JVM as its child, writes STATE (port, token, pids, log) into a 0700 folder, and watches:
no client connected for IDLE_S → it stops the JVM and removes STATE. The JVM dies with the
supervisor (PR_SET_PDEATHSIG), so a SIGKILLed supervisor does not leave a JVM behind either.
The token keeps other local users out (a Connect client can run Python on the server).

KAFKA_CHAOS_CHECKER_DIR moves the folder (the test suite points it at its own and stops what it
finds there at the end); KAFKA_CHAOS_CHECKER_IDLE sets the idle limit in seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

from harness.errors import HarnessError

IDLE_S = 600.0
READY_S = 180.0  # a cold JVM on a 2-core machine shared with four others took up to 60 s to listen
LOOPBACK = "127.0.0.1"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
WARMUP_STATUS = "warmup.json"  # written by the warm-up (analysis/checking/warmup.py)
WARMUP_ENV = "KAFKA_CHAOS_CHECKER_WARMUP"  # 0 turns it off
# The JVM and its warm-up run this much nicer than the harness: background work beside the brokers
# under test (each nice-0 thread weighs as much as all of Docker's containers together on a cgroup v1 host).
NICE_ENV, NICE = "KAFKA_CHAOS_CHECKER_NICE", 10


ROOT = Path(__file__).resolve().parents[2]


def home() -> Path:
    """The server's folder: one per user and checkout, so two worktrees never check with each
    other's code (the server's Python workers import this checkout's analysis/)."""
    tag = hashlib.sha1(str(ROOT).encode()).hexdigest()[:8]
    path = Path(os.environ.get("KAFKA_CHAOS_CHECKER_DIR") or Path(tempfile.gettempdir()) / f"kafka-chaos-checker-{os.getuid()}-{tag}")
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def idle_limit() -> float:
    return float(os.environ.get("KAFKA_CHAOS_CHECKER_IDLE") or IDLE_S)


def _alive(pid: int) -> bool:
    """Running (a zombie, exited but not yet reaped by the process that started it, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _is_ours(pid: int) -> bool:
    """The pid is still our supervisor (not a recycled pid)."""
    try:
        return b"analysis.checking.spark_server" in Path(f"/proc/{pid}/cmdline").read_bytes() and _alive(pid)
    except OSError:
        return _alive(pid)  # no /proc: trust the pid


def listening(port: int) -> bool:
    """Whether something accepts connections on loopback `port` now."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=1):
            return True
    except OSError:
        return False


def _connections(port: int) -> int:
    """Clients connected to the server on `port` now (Linux /proc: the server's accepted sockets,
    whose local port is `port`), or -1 when they cannot be counted. Both tables: the JVM listens
    on an IPv6 socket even for 127.0.0.1, so its connections are in tcp6 (IPv4-mapped); reading
    tcp alone saw none and let the idle clock stop a server in the middle of a check."""
    count, local, readable = 0, f":{port:04X}", False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        count += sum(1 for line in lines if (f := line.split()) and f[1].endswith(local) and f[3] == "01")
    return count if readable else -1


def read_state(folder: Path | None = None) -> dict[str, Any] | None:
    """The running server's state, or None (a stale file is removed)."""
    path = (folder or home()) / "state.json"
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not _is_ours(int(state.get("pid", 0))):
        path.unlink(missing_ok=True)
        return None
    return state


def elsewhere() -> list[tuple[Path, dict[str, Any]]]:
    """This user's running local checkers of other checkouts (each has its folder: home()). They
    stop only when idle, so `status` names them too: one started by a run in a worktree went on
    running after the worktree was removed, and this checkout's status said "not running"."""
    mine = home()
    found = []
    for folder in sorted(Path(tempfile.gettempdir()).glob(f"kafka-chaos-checker-{os.getuid()}-*")):
        if folder != mine and folder.is_dir():
            state = read_state(folder)
            if state is not None:
                found.append((folder, state))
    return found


def url(state: dict[str, Any]) -> str:
    # "localhost", not 127.0.0.1: PySpark sends a token only over TLS or, for localhost, over
    # gRPC's local credentials.
    return f"sc://localhost:{state['port']}/;token={state['token']}"


def last_used(state: dict[str, Any], folder: Path | None = None) -> float:
    """When a client last started a check (the state file's mtime, touched by `ensure`)."""
    try:
        return ((folder or home()) / "state.json").stat().st_mtime
    except OSError:
        return float(state.get("started", 0))


def claim(folder: Path | None = None) -> None:
    """A check is about to use the server: a warm-up running on it gives way (analysis/checking/warmup.py),
    and none starts on a server that is still starting."""
    with contextlib.suppress(OSError):
        ((folder or home()) / "claimed").touch()


def claimed_since(folder: Path, when: float) -> bool:
    try:
        return (folder / "claimed").stat().st_mtime >= when
    except OSError:
        return False


def warmup_enabled() -> bool:
    return os.environ.get(WARMUP_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def warmup_status(folder: Path | None = None) -> dict[str, Any] | None:
    """The warm-up's last state (analysis/checking/warmup.py), or None: "running" only while its process lives."""
    try:
        status = json.loads(((folder or home()) / WARMUP_STATUS).read_text())
    except (OSError, ValueError):
        return None
    if status.get("state") == "running" and not _alive(int(status.get("pid", 0))):
        status["state"] = "ended"
    return status


def checks_running(state: dict[str, Any], folder: Path | None = None) -> int:
    """Checks connected to the server now, the warm-up's connection left out (-1: cannot tell)."""
    n = _connections(int(state["port"]))
    warming = (warmup_status(folder) or {}).get("state") == "running"
    return max(0, n - 1) if warming and n > 0 else n


def touch(folder: Path | None = None) -> None:
    """A client used the server now (the idle clock restarts)."""
    with contextlib.suppress(OSError):
        os.utime((folder or home()) / "state.json")


@contextlib.contextmanager
def _lock(folder: Path) -> Iterator[None]:
    with open(folder / "start.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # two checks starting at once start one server
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def code_stamp() -> str:
    """This interpreter, PySpark and analysis/'s sources: a server started from other code is not
    reused (its reused Python workers keep the modules they imported when they started)."""
    import pyspark

    parts = [sys.executable, pyspark.__version__] + [f"{p.name}:{p.stat().st_mtime_ns}" for p in sorted((ROOT / "analysis").rglob("*.py"))]
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:16]


def ensure(driver_memory: str | None = None, timeout_s: float = READY_S, warm_up: bool = True) -> dict[str, Any] | None:
    """The running server's state, starting one (and waiting until it listens) when none runs, with
    a heap of `driver_memory` (default: spark_conf.driver_memory(), sized from the machine).
    warm_up=False: a check is waiting for the server it starts, so it warms up on that check.
    None when a server of older code is still serving a check (the caller checks embedded)."""
    from analysis.checking.spark_conf import driver_memory as machine_sized

    driver_memory = driver_memory or machine_sized()
    folder, stamp = home(), code_stamp()
    with _lock(folder):
        state = read_state(folder)
        if state is not None and state.get("ready") and state.get("code") != stamp:
            if checks_running(state, folder) != 0:
                return None
            stop(folder)
            state = None
        if state is not None and state.get("ready"):
            touch(folder)
            return state
        if state is not None:  # a start whose caller gave up or died: start afresh
            stop(folder)
        log = folder / "server.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "analysis.checking.spark_server", "--dir", str(folder),
                                     "--driver-memory", driver_memory, "--idle", str(idle_limit())]
                                    + ([] if warm_up else ["--no-warm-up"]),
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, cwd="/")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = read_state(folder)
            if state is not None and state.get("ready"):
                return state
            if proc.poll() is not None:
                break
            time.sleep(0.25)
        if proc.poll() is None:
            stop_pid(proc.pid)
        raise HarnessError(f"the local checker (Spark Connect) did not start within {timeout_s:.0f} s: {_last_line(log)}",
                           hint=f"its log is {log}; is Java 17 or later installed (`java -version`)? Or check on an "
                                "embedded Spark with --spark-master 'local[*]'")


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    errors = [line for line in lines if "Exception" in line or "Error" in line]
    return (errors or lines or ["no output"])[-1][:300]


def stop_pid(pid: int, timeout_s: float = 30.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def stop(folder: Path | None = None) -> dict[str, Any] | None:
    """Stop the running server (its supervisor stops the JVM); the state it had, or None."""
    state = read_state(folder)
    if state is not None:
        stop_pid(int(state["pid"]))
        if state.get("jvm_pid") and _alive(int(state["jvm_pid"])):
            stop_pid(int(state["jvm_pid"]), 10)
        ((folder or home()) / "state.json").unlink(missing_ok=True)
    return state


# --- the supervisor (python -m analysis.checking.spark_server) ------------------------------------------

def _jvm_command(port: int, driver_memory: str) -> list[str]:
    from analysis.checking.spark_conf import SERVER_CONF, SPARK_HOME, java_options

    args = [str(SPARK_HOME / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", "local[*]",
            "--driver-memory", driver_memory, "--conf", f"spark.driver.extraJavaOptions={java_options()}",
            "--conf", f"spark.connect.grpc.binding.address={LOOPBACK}", "--conf", f"spark.connect.grpc.binding.port={port}",
            # Sessions are reused by later checks (analysis/checking/sessions.py): kept until the server stops.
            "--conf", "spark.connect.session.manager.defaultSessionTimeout=-1"]
    for key, value in SERVER_CONF.items():
        args += ["--conf", f"{key}={value}"]
    return args + ["spark-internal"]


def _die_with_parent() -> None:
    os.setpgrp()
    os.nice(int(os.environ.get(NICE_ENV) or NICE))
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: the JVM goes with its supervisor


def _start_warmup(folder: Path, started: float) -> subprocess.Popen | None:
    """The warm-up's process (analysis/checking/warmup.py), unless it is turned off or a check
    claimed this server while it started (it warms up on that check)."""
    if not warmup_enabled() or claimed_since(folder, started):
        return None
    with open(folder / "warmup.log", "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "analysis.checking.warmup", "--dir", str(folder)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=_die_with_parent, cwd="/")


def serve(folder: Path, driver_memory: str, idle_s: float, warm_up: bool = True) -> int:
    from analysis.checking.spark_conf import SPARK_HOME, free_port

    port, token = free_port(), uuid.uuid4().hex
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_CONNECT_AUTHENTICATE_TOKEN": token,
           "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": LOOPBACK}
    for var in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_GATEWAY_PORT"):
        env.pop(var, None)
    jvm = subprocess.Popen(_jvm_command(port, driver_memory), env=env, stdin=subprocess.DEVNULL,
                           preexec_fn=_die_with_parent, cwd=folder)
    stopping = False

    def on_term(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    path = folder / "state.json"
    state = {"pid": os.getpid(), "jvm_pid": jvm.pid, "port": port, "token": token, "ready": False,
             "started": time.time(), "idle_s": idle_s, "code": code_stamp(), "log": str(folder / "server.log"), "python": sys.executable}

    def write(**changes: Any) -> None:
        state.update(changes)
        tmp = folder / "state.json.tmp"
        tmp.write_text(json.dumps(state))
        os.chmod(tmp, 0o600)
        tmp.replace(path)

    write()
    (folder / WARMUP_STATUS).unlink(missing_ok=True)  # the last server's
    last_used = time.time()
    warmup = None
    try:
        while not stopping and jvm.poll() is None:
            if not state["ready"] and listening(port):
                write(ready=True, ready_at=time.time())
                last_used = time.time()
                warmup = _start_warmup(folder, state["started"]) if warm_up else None
            if state["ready"]:
                busy = _connections(port) > 0
                with contextlib.suppress(OSError):
                    last_used = max(last_used, path.stat().st_mtime)
                if busy:
                    last_used = time.time()
                    touch(folder)  # `harness status` reads the idle time from the file
                elif time.time() - last_used > idle_s:
                    print(f"idle for {idle_s:.0f} s: stopping", flush=True)
                    break
            time.sleep(1.0)
    finally:
        if warmup is not None and warmup.poll() is None:
            warmup.terminate()
        if jvm.poll() is None:
            jvm.terminate()
            try:
                jvm.wait(timeout=20)
            except subprocess.TimeoutExpired:
                jvm.kill()
                jvm.wait(timeout=10)
        with contextlib.suppress(OSError, ValueError):
            if json.loads(path.read_text()).get("pid") == os.getpid():
                path.unlink()
    return 0 if stopping or jvm.returncode in (0, 143, -15) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description="The local checker's supervisor (started by analysis.checking.spark_server.ensure).")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--idle", type=float, default=IDLE_S)
    parser.add_argument("--no-warm-up", action="store_true", help="a check waits for this server: no warm-up")
    args = parser.parse_args()
    sys.exit(serve(args.dir, args.driver_memory, args.idle, warm_up=not args.no_warm_up))


if __name__ == "__main__":
    main()
