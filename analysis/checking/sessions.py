"""The local checker's Spark Connect sessions, reused from one check to the next.

Why: a Connect session has its own class loader on the server, so the code Spark generates for a
check is compiled and JIT-warmed again in every new session. One check per process (`./chaos
run`, `harness check`) meant a new session, and so a cold one, every time: on a warm server the
first check of a process took 7.5 s and the next in the same process 5.0 s; with the session of
the previous process taken over, the first check of each new process took 5.5, 5.3 and 5.0 s
(97,213 events, quiet machine, 2026-11-29).

A process takes one of SLOTS sessions for its lifetime: an exclusive lock on `slot-N.lock` in the
checker's folder, held until the process exits (the kernel drops it even after a SIGKILL). Two
checks never share a session (a session's conf is its own); a process that finds every slot
taken gets a new session of its own, released when it exits. The session ids derive from the
server's token, so a new server starts with new sessions. The server keeps sessions until it
stops (spark.connect.session.manager.defaultSessionTimeout=-1 in spark_server._jvm_command).

The warm-up (analysis/checking/warmup.py) warms slot 0; a check that comes while it runs waits
for it to give way (it stops within a second of the claim) rather than take a cold slot.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
import uuid
from pathlib import Path
from typing import Any

SLOTS = 4
WAIT_FOR_WARMUP_S = 15.0

_held: dict[Path, Any] = {}  # folder -> the open lock file of this process's slot (kept open: the lock lives with it)


def session_id(state: dict[str, Any], slot: int) -> str:
    digest = hashlib.sha256(f"{state['token']}:{slot}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def _try(folder: Path, slot: int) -> Any | None:
    handle = open(folder / f"slot-{slot}.lock", "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def take(folder: Path, state: dict[str, Any], warming: bool = False) -> int | None:
    """The slot this process holds (taking the first free one), or None when all are taken.
    warming: the warm-up holds slot 0 now; wait up to WAIT_FOR_WARMUP_S for it to give way."""
    held = _held.get(folder)
    if held is not None and held[1] == state["token"]:
        return held[2]
    if held is not None:  # a slot of an earlier server of this folder
        held[0].close()
        del _held[folder]
    deadline = time.monotonic() + (WAIT_FOR_WARMUP_S if warming else 0.0)
    while True:
        for slot in range(SLOTS):
            handle = _try(folder, slot)
            if handle is not None:
                _held[folder] = (handle, state["token"], slot)
                return slot
            if warming and slot == 0 and time.monotonic() < deadline:
                break  # slot 0 is the warm one: wait for it rather than take a cold one
        else:
            return None
        time.sleep(0.1)


def url(base: str, state: dict[str, Any], folder: Path, warming: bool = False) -> str:
    """The Connect URL of this process's session: a reused slot's, or `base` (a new session,
    released when the process exits) when every slot is taken."""
    slot = take(folder, state, warming)
    if slot is None:
        os.environ.setdefault("SPARK_CONNECT_RELEASE_SESSION_ON_EXIT", "true")
        return base
    # A reused session outlives this process: releasing it at exit would close it for the next.
    os.environ["SPARK_CONNECT_RELEASE_SESSION_ON_EXIT"] = "false"
    return f"{base};session_id={session_id(state, slot)}"


def connect(state: dict[str, Any], folder: Path, warming: bool = False) -> Any:
    """A Connect session on the local checker of `folder`: this process's slot's, kept for the
    next check, or (every slot taken) one of its own. warming: as for take()."""
    from pyspark.sql import SparkSession

    from analysis.checking import spark_server

    remote = url(spark_server.url(state), state, folder, warming)
    spark = SparkSession.builder.remote(remote).getOrCreate()
    if "session_id=" in remote:
        spark.release_session_on_close = False  # the next check takes this session over
    return spark
