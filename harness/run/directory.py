"""A run directory and its lifecycle, shared by `run()` and the scenarios.

`RunDirectory` is a context manager that owns `<store>/<run-id>/`: it creates it, keeps
config.json up to date (atomically: a reader never sees half of it), and holds an exit stack
over the run's resources (the recorder, the cluster), closed in reverse order. When the body
raises, it writes FAILED with the reason, marks config.json `failed`, closes the recorder
without a Parquet twin (a failed run keeps its JSON Lines only), tears the cluster down, and
re-raises as a HarnessError that carries the run directory.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

from harness.cluster import new_run_id
from harness.errors import HarnessError
from harness.history import FORMAT_VERSION, write_json
from harness.history.record import write_record
from harness.run.librdkafka_log import LibrdkafkaLog

log = logging.getLogger(__name__)

T = TypeVar("T")


def prepare_store(store: Path | str) -> Path:
    """The store folder, created and proven writable, or a HarnessError naming the fix."""
    store = Path(store)
    try:
        store.mkdir(parents=True, exist_ok=True)
        probe = store / f".write-test-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise HarnessError(
            f"the store {str(store)!r} is not a writable folder: {exc.strerror or exc}.",
            hint="pass --store with a folder you can write to (it is created if missing)",
        ) from None
    return store.resolve()


class RunDirectory:
    """`with RunDirectory(store, record) as rd:` — see the module docstring."""

    def __init__(self, store: Path | str, record: dict[str, Any]) -> None:
        self.store = Path(store)
        self.record = record
        self.run_id = ""
        self.path = Path()
        self._stack = ExitStack()

    def __enter__(self) -> "RunDirectory":
        store = prepare_store(self.store)
        self.run_id = new_run_id()
        self.path = store / self.run_id
        self.path.mkdir()
        # In place: the caller keeps adding to the same dict (drain, heal, ...) until the last update.
        self.record.update(history_format=FORMAT_VERSION, run_id=self.run_id, status="running")  # the record's version: write_record
        self.write_config()
        self._stack.__enter__()
        self._stack.enter_context(LibrdkafkaLog(self.path / "librdkafka.log"))  # closed last: every client is gone by then
        return self

    def own(self, resource: T) -> T:
        """Enter `resource` (a context manager) now; it is exited when the run directory closes.
        A history recorder's wall-clock zero goes into config.json (`history_start_utc`)."""
        entered = self._stack.enter_context(resource)  # type: ignore[arg-type]
        start = getattr(resource, "wall_start_ns", None)
        if isinstance(start, int):
            when = dt.datetime.fromtimestamp(start / 1e9, dt.timezone.utc)
            self.update(history_start_utc=when.isoformat(timespec="microseconds"))
        return entered

    def write_config(self) -> None:
        write_record(self.path, self.record)  # harness/history/record.py: the one shape readers read

    def update(self, **fields: Any) -> None:
        """Merge `fields` into config.json and write it."""
        self.record.update(fields)
        self.write_config()

    def write(self, name: str, data: Any) -> Path:
        return write_json(self.path / name, data)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        if exc is None:
            self._stack.__exit__(None, None, None)
            return False
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            reason = f"interrupted ({type(exc).__name__})"
        else:
            reason = str(exc) if isinstance(exc, HarnessError) else f"{type(exc).__name__}: {exc}"
        try:
            (self.path / "FAILED").write_text(reason + "\n")
            self.update(status="failed", failure=reason)
        except Exception:  # the original failure matters more than the bookkeeping
            log.exception("could not mark %s failed", self.path)
        try:
            self._stack.__exit__(kind, exc, tb)  # the recorder keeps its JSONL only; the cluster goes
        except Exception:
            log.exception("could not tear down the resources of %s", self.path)
        if isinstance(exc, HarnessError):
            exc.run_dir = exc.run_dir or self.path
            return False
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            return False
        raise HarnessError(f"run {self.run_id} failed: {reason}", hint=f"see {self.path} (marked FAILED) and the broker logs there",
                           run_dir=self.path) from exc
