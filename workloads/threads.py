"""A workload's client threads: started by name, each saying when its client is open, joined at the
stop; an unexpected exception in one is kept for the run (`errors`), never silently lost.

Shared by the workloads (queue, txn, eos) by composition: each owns one `ClientThreads` and says
which loops run in it.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any, Callable

from harness.errors import HarnessError
from harness.history.recorder import RecorderClosed
from workloads.drivers.base import ClientException

log = logging.getLogger(__name__)


class ClientThreads:
    def __init__(self) -> None:
        self.errors: list[str] = []  # unexpected exceptions in worker threads
        # Threads still inside a client call when the stop's wait ended: not dead, their last
        # operation unresolved (an unknown outcome). A 3.3.2 coordinator run (20261126T232405-8caa6f)
        # had a txn producer's commit left unanswered by Kafka (KAFKA-15468, docs/operations.md);
        # counted as a dead worker, it turned the verdict `unknown` with "the history lacks what
        # they would have done", though the history lacked only that commit's answer.
        self.stuck: list[str] = []
        self._causes: list[BaseException] = []  # the same exceptions, for wait_ready's hint
        self._threads: list[threading.Thread] = []
        self._ready: list[threading.Event] = []
        self._background: list[threading.Thread] = []  # e.g. crashed producers, closing

    def spawn(self, name: str, target: Callable[[Any], None], arg: Any) -> None:
        """Run `target(arg)` on a daemon thread `name`; it calls `opened()` once its client is open
        (or is counted ready when it ends)."""
        ready = threading.Event()

        def guarded() -> None:
            try:
                target(arg)
            except RecorderClosed:  # the run ended (failed) first: nothing left to record, no traceback
                log.warning("%s stopped: the history was closed before it finished; its unresolved "
                            "operations stay uncompleted (unknown)", name)
            except Exception as exc:  # recorded for the run, never silently lost
                self.errors.append(f"{name}: {type(exc).__name__}: {exc}")  # first: the log line below can fail
                self._causes.append(exc)
                log.exception("%s died", name)
            except BaseException:  # SystemExit and the like end the thread as before
                raise
            except:  # noqa: E722 - an object raised that is no exception (a C extension's): still recorded
                raised = sys.exc_info()[1]
                self.errors.append(f"{name}: {type(raised).__name__}: {raised}")
                # A logging handler that fails while this object is being handled prints the failure's
                # context, and the object has no __traceback__: logging itself raised, the thread died
                # and the entry above was never made (a test's closed stream showed it, 2026-11-27).
                try:
                    log.error("%s died: it raised %r, which is no exception", name, raised)
                except Exception:
                    pass
            finally:
                ready.set()

        self._ready.append(ready)
        thread = threading.Thread(target=guarded, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def opened(self) -> None:
        """Called by a spawned thread: its client is open."""
        self._ready[[t.ident for t in self._threads].index(threading.get_ident())].set()

    def background(self, name: str, target: Callable[..., None], *args: Any) -> None:
        """A helper thread that `join` waits for too (e.g. a crashed producer closing)."""
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._background.append(thread)
        thread.start()

    def wait_ready(self, timeout_s: float, on_failure: Callable[[], None]) -> None:
        """Return once every thread spawned so far has opened its client, or after `timeout_s`;
        a client that could not even open means broken settings, not a finding: `on_failure()`
        (stop the others), then HarnessError."""
        deadline = time.monotonic() + timeout_s
        for event in list(self._ready):
            event.wait(max(0.0, deadline - time.monotonic()))
        if self.errors:
            on_failure()
            raise HarnessError(f"{len(self.errors)} client(s) could not start: {'; '.join(self.errors[:3])}",
                               hint=start_hint(self._causes))

    def join(self, timeout_s: float, prefix: str = "") -> None:
        """Wait up to `timeout_s` for the threads whose name starts with `prefix` (all by default;
        with every background thread), noting those still running in `errors`."""
        deadline = time.monotonic() + timeout_s
        threads = [t for t in self._threads if t.name.startswith(prefix)] + (self._background if not prefix else [])
        for thread in threads:
            thread.join(timeout=max(0.1, deadline - time.monotonic()))
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck and not prefix:
            self.stuck = [f"{name}: still inside a client call {timeout_s:.0f} s after the stop" for name in stuck]


def transient(exc: BaseException) -> bool:
    """An error that says the cluster did not answer in time, not that the settings are wrong: the
    client calls it retriable, or it is a timeout (librdkafka's `_TIMED_OUT`, Java's `TimeoutException`)."""
    if not isinstance(exc, ClientException):
        return False
    return exc.error.retriable or "TIMED_OUT" in exc.error.name.upper() or "Timeout" in exc.error.name


def start_hint(causes: list[BaseException]) -> str:
    """What to do about clients that could not start: a timeout or a retriable error is the
    cluster's state at that moment (still electing, overloaded), which settings cannot fix."""
    if causes and all(transient(c) for c in causes):
        return ("the cluster did not answer the clients in time (retriable errors: brokers still starting, "
                "electing or overloaded), not a settings problem: run again; if it repeats, read the brokers' "
                "logs in the run directory; nothing was measured")
    if any(transient(c) for c in causes):
        return ("fix the client settings named above (profile or workload options); the retriable errors among "
                "them are the cluster's state at that moment, which a second run may not see; nothing was measured")
    return "fix the client settings named above (profile or workload options); nothing was measured"
