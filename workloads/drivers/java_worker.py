"""The JVM child of the Java driver (workloads/drivers/java.py): start it, talk JSON lines to it,
and learn at once when it dies.

One request per line on the JVM's stdin, one reply per line on its stdout (the protocol is
described in clients/java/src/main/java/kafkaharness/worker/Worker.java). A call waits for the
reply with its id; a send does not wait at all: its delivery outcome is a reply line that the
reader thread hands to the producer it belongs to. The JVM exits when its stdin closes, so a
SIGKILL of this process never leaves a JVM behind; when the JVM dies first, the reader thread sees
its stdout end, fails every waiting call and gives every pending send an outcome (`JvmExited`,
which workloads/outcomes.py records as unknown).
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from harness.provision.java_client import JavaClient
from workloads.drivers.base import ClientError, ClientException

log = logging.getLogger(__name__)

# A call waits this long beyond its own timeout: the JVM bounds its blocking calls itself (the call's
# timeout, or max.block.ms: 60 s by default), so only a hung JVM is caught here.
SLACK_S = 120.0
JVM_OPTIONS = ("-XX:+UseSerialGC", "-Xmx1g", "-XX:+ExitOnOutOfMemoryError")
JVM_EXITED = "JvmExited"
PROTOCOL_PROPERTY = "kafkaharness.protocol"  # the path the JVM writes its replies to (Out.java)
ROW_LONGS = 8  # a feed row on the wire: its producer's handle, then the recorder's 7 (Out.java)
BUFFER_BYTES = 16_384  # send lines are written when this many wait, or FLUSH_S after the last write
FLUSH_S = 0.002  # the name of every outcome and call the JVM's death cut short


def error_from(e: dict[str, Any]) -> ClientError:
    """The JVM's error object (clients/java/.../Failure.java) as the protocol's ClientError."""
    return ClientError(e["name"], e["msg"], fatal=bool(e.get("fatal")), retriable=bool(e.get("retriable")),
                       txn_requires_abort=bool(e.get("abort")))


class Outcomes(Protocol):
    """What the reader thread calls on a producer (workloads/drivers/java.py's JavaProducer)."""

    def ok(self, s: int, offset: int) -> None: ...

    def rows(self, rows: bytes) -> None: ...

    def feed_failed(self, key: int, value: int, error: ClientError) -> None: ...

    def failed(self, s: int, error: ClientError) -> None: ...

    def producer_id(self, pid: int, epoch: int) -> None: ...

    def lost(self, error: ClientError) -> None: ...


class _Waiter:
    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: dict[str, Any] = {}


class Worker:
    """One JVM and the threads that read its stdout and stderr."""

    def __init__(self, client: JavaClient, log_path: Path | None = None) -> None:
        if log_path is not None:  # the Kafka client's own log, at INFO, in the run's folder
            logging_options = [f"-Dorg.slf4j.simpleLogger.logFile={log_path}", "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                               "-Dorg.slf4j.simpleLogger.showDateTime=true",
                               "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSSXXX"]
        else:  # warnings to stderr, which the stderr thread keeps (the last lines explain a death)
            logging_options = ["-Dorg.slf4j.simpleLogger.logFile=System.err", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]
        # The replies come on a pipe of their own, not stdout: the JVM prints to stdout where no Java
        # code can stop it (JFR's "Started recording" under JDK_JAVA_OPTIONS, unified-logging
        # warnings, agents): JFR's line raised a JSONDecodeError in the reader, and a line inside a
        # frame of rows would cut the history. The JVM's stdout and stderr both go to the stderr thread.
        protocol_r, protocol_w = os.pipe()
        # Its own session: a Ctrl-C in the terminal reaches Python, which ends the JVM by closing
        # its stdin after the clients closed, instead of killing it under the clients' feet.
        try:
            self.proc = subprocess.Popen(
                client.command(*JVM_OPTIONS, *logging_options, f"-D{PROTOCOL_PROPERTY}=/proc/self/fd/{protocol_w}"),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=(protocol_w,),
                start_new_session=True)
        except BaseException:
            os.close(protocol_r)
            raise
        finally:
            os.close(protocol_w)  # the JVM holds the only write end: its death ends the reader's file
        self._protocol = os.fdopen(protocol_r, "rb", buffering=1 << 16)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin.fileno()
        self._write_lock = threading.Lock()
        self._buffer = bytearray()  # request lines not written yet (sends only: `write(soon=True)`)
        self._written_at = 0.0
        self._lock = threading.Lock()  # guards _calls, producers and dead
        self._calls: dict[int, _Waiter] = {}
        self._ids = itertools.count(1)
        self.producers: dict[int, Outcomes] = {}
        self.dead: ClientError | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self._complained: set[type | str] = set()
        self._reader = threading.Thread(target=self._read, name=f"java-worker-{self.proc.pid}", daemon=True)
        self._reader.start()
        threading.Thread(target=self._read_stderr, name=f"java-worker-{self.proc.pid}-stderr", daemon=True).start()
        threading.Thread(target=self._flush_soon, name=f"java-worker-{self.proc.pid}-flush", daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def write(self, line: bytes, soon: bool = False) -> None:
        """One request line, written now, after every line written `soon` before it. Raises
        ClientException(JvmExited) if the JVM is gone.

        `soon` (sends): the line may wait in a buffer until more follow, at most FLUSH_S. One write
        a send made the sending thread give up the GIL once a send, and the reader thread take it:
        at full speed that ping-pong cost more than the rest of a send together."""
        if self.dead is not None:
            raise ClientException(self.dead)
        try:
            with self._write_lock:
                self._buffer += line
                now = time.monotonic()
                if not soon or len(self._buffer) >= BUFFER_BYTES or now - self._written_at >= FLUSH_S:
                    self._flush(now)
        except OSError as exc:  # EPIPE: the JVM closed its stdin by dying
            raise ClientException(self.dead or ClientError(JVM_EXITED, f"the Java client's JVM is gone ({exc})",
                                                           fatal=True)) from None

    def _flush(self, now: float) -> None:  # with _write_lock held
        view = memoryview(self._buffer)
        try:
            while view:  # a blocking pipe takes it whole, unless a signal cuts a write short
                view = view[os.write(self._stdin, view):]
        finally:
            view.release()
            self._buffer.clear()
            self._written_at = now

    def _flush_soon(self) -> None:
        """The buffer's timer: lines written `soon` leave within FLUSH_S even when no other follows."""
        while self.dead is None and self.proc.poll() is None:
            time.sleep(FLUSH_S)
            if self._buffer:
                try:
                    with self._write_lock:
                        if self._buffer:
                            self._flush(time.monotonic())
                except OSError:
                    return  # the JVM is gone: the reader thread gives the buffered sends their outcome

    def call(self, op: str, timeout_s: float, **fields: Any) -> dict[str, Any]:
        """One request with an id; its reply's fields, or ClientException with the JVM's error."""
        call_id = next(self._ids)
        waiter = _Waiter()
        with self._lock:
            if self.dead is not None:
                raise ClientException(self.dead)
            self._calls[call_id] = waiter
        try:
            self.write(json.dumps({"id": call_id, "op": op, **fields}).encode() + b"\n")
        except ClientException:
            with self._lock:
                self._calls.pop(call_id, None)
            raise
        if not waiter.done.wait(timeout_s + SLACK_S):
            with self._lock:
                self._calls.pop(call_id, None)
            # Fatal: the client's thread in the JVM is stuck, and a late reply would be dropped.
            raise ClientException(ClientError("WorkerTimeout", f"the Java worker did not answer {op} within "
                                              f"{timeout_s + SLACK_S:.0f} s", fatal=True))
        reply = waiter.reply
        if "err" in reply:
            raise ClientException(error_from(reply["err"]))
        return reply

    def close(self, timeout_s: float = 10.0) -> None:
        """End the JVM: close its stdin (it halts at once), kill it if it has not after `timeout_s`."""
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self._reader.join(timeout_s)

    # --- the reader thread ------------------------------------------------------------
    def _read(self) -> None:
        producers = self.producers
        stdout = self._protocol
        for line in stdout:
            try:
                if line[:1] == b"+":  # a send written: "+H S OFFSET", most of the lines
                    h, s, offset = line[1:].split()
                    producer = producers.get(int(h))
                    if producer is not None:
                        producer.ok(int(s), int(offset))
                    continue
                if line[:3] == b"#R ":  # the feed's rows: "#R N", then N rows of ROW_LONGS little-endian longs
                    self._rows(stdout.read(int(line[3:]) * ROW_LONGS * 8))
                    continue
                if line[:1] != b"{":  # not the worker's (Out.java writes nothing else): name it, once
                    if "foreign" not in self._complained:
                        self._complained.add("foreign")
                        log.warning("java worker %s: a line on the protocol's pipe that is not the worker's, "
                                    "ignored (later ones are logged at debug level): %r", self.proc.pid, line[:300])
                    else:
                        log.debug("java worker %s: not a reply, ignored: %r", self.proc.pid, line[:300])
                    continue
                self._route(json.loads(line))
            except Exception as exc:  # a callback's error must not stop every other client's outcomes
                # Once per kind: a producer whose history closed first (RecorderClosed) fails once per outcome.
                if type(exc) not in self._complained:
                    self._complained.add(type(exc))
                    log.exception("java worker %s: reply %r (later %s are logged at debug level)", self.proc.pid,
                                  line[:300], type(exc).__name__)
                else:
                    log.debug("java worker %s: reply %r: %r", self.proc.pid, line[:300], exc)
        stdout.close()
        self._ended()

    def _rows(self, data: bytes) -> None:
        """A frame of the feed's rows: each row's handle, then the history recorder's row (Out.java)."""
        if len(data) % (ROW_LONGS * 8):
            raise ValueError(f"a cut frame of rows ({len(data)} bytes): the JVM ended mid-frame")
        rows = np.frombuffer(data, dtype="<i8").reshape(-1, ROW_LONGS)
        handles = rows[:, 0]
        # Nearly always one handle a frame: one comparison pass, not np.unique's sort (a third of
        # this function's CPU at 436,000 rows/s, measured).
        ids = [int(handles[0])] if (handles == handles[0]).all() else np.unique(handles).tolist()
        for h in ids:
            producer = self.producers.get(h)
            if producer is not None:
                mine = rows[:, 1:] if len(ids) == 1 else rows[handles == h, 1:]
                producer.rows(np.ascontiguousarray(mine).tobytes())

    def _route(self, reply: dict[str, Any]) -> None:
        s = reply.get("s")
        if s is not None:
            producer = self.producers.get(reply["h"])
            if producer is not None:
                producer.failed(s, error_from(reply["err"]))
        elif "id" in reply:
            with self._lock:
                waiter = self._calls.pop(reply["id"], None)
            if waiter is not None:
                waiter.reply = reply
                waiter.done.set()
        elif reply.get("ev") == "feedfail":
            producer = self.producers.get(reply["h"])
            if producer is not None:
                producer.feed_failed(reply["k"], reply["v"], error_from(reply["err"]))
        elif reply.get("ev") == "pid":
            producer = self.producers.get(reply["h"])
            if producer is not None:
                producer.producer_id(reply["pid"], reply["epoch"])

    def _ended(self) -> None:
        try:
            code: int | None = self.proc.wait(10)
        except subprocess.TimeoutExpired:  # stdout closed but the process lingers: it is of no use now
            self.proc.kill()
            code = self.proc.wait()
        error = ClientError(JVM_EXITED, f"the Java client's JVM (pid {self.proc.pid}) exited with code {code} "
                                        "before this outcome was known", fatal=True)
        with self._lock:
            self.dead = error
            calls, self._calls = self._calls, {}
            producers = list(self.producers.values())
        if code not in (0, None) or calls or producers:
            log.warning("java worker %s exited with code %s; its last stderr lines:\n%s", self.proc.pid, code,
                        "\n".join(self.stderr_tail))
        for waiter in calls.values():
            waiter.reply = {"err": {"name": error.name, "msg": error.message, "fatal": True}}
            waiter.done.set()
        for producer in producers:
            try:
                producer.lost(error)
            except Exception:
                log.exception("java worker %s: outcomes of a lost producer", self.proc.pid)

    def _read_stderr(self) -> None:
        """The JVM's stdout and stderr, together: kept for a death's explanation, logged at debug."""
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            self.stderr_tail.append(line)
            log.debug("java worker %s: %s", self.proc.pid, line)
