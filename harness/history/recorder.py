"""The history: every operation of a run as plain data, written as it happens (format v1, docs/history.md).

`Recorder` is thread-safe and append-only. Recording an event appends one row
of seven int64s to a buffer (`harness.history.send_lines.ROW`) with a single
`array.frombytes`, which is atomic under CPython's GIL, so the hot path takes no
lock and formats nothing. Events with free-form values (polls, assigns, nemesis,
failed sends) are formatted in the caller's thread, all but their index and
time, and their row points at that text. Index and time are filled in when a
batch is written, in buffer order, so file order, index order and time order
agree. A batch's send lines come from one compiled loop (`send_lines`): a
produce loop on 2 cores shares them with three brokers, and formatting two JSON
lines per record in Python cost them a fifth of their throughput.

A background thread writes the pending batch every 50 ms with one `os.write`,
formatting it with the GIL released, so the recording threads only append and
no event waits much more than 50 ms (the format promises 200). A SIGKILL can
therefore cut only the last line, and `read_history` drops an incomplete last
line. `close()` flushes and writes `history.parquet` beside the JSONL file.

Reading, validating and writing history files is `harness.history.files`.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from array import array
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from harness.history import send_lines
from harness.history.files import dumps as _dumps, write_parquet
from harness.history.format import NEMESIS, TYPE_CODES, TYPES
from harness.history.send_lines import OTHER, ROW, SEND_INVOKE, SEND_OK, WIDTH

FLUSH_INTERVAL_S = 0.05  # a line waits at most one interval plus one batch (the format promises 200 ms)

_now = time.monotonic_ns
_pack = ROW.pack


def _error_field(error: str | None) -> str:
    return "" if error is None else ',"error":' + _dumps(error)

# The rest of a line after its index and time, filled in by the recording thread.
_EVENT_TAIL = ',"process":%s,"type":"%s","f":%s,"value":%s%s}\n'
_SEND_TAIL = ',"process":%s,"type":"%s","f":"send","value":{"key":%s,"value":%s,"offset":%s,"epoch":%s}%s}\n'


class RecorderClosed(RuntimeError):
    """An event arrived after the history was closed (a failed run closes it while producers are
    still flushing): it is not recorded, so its operation stays uncompleted, i.e. unknown."""


class Recorder:
    """Appends events to `path` (JSON Lines); see the module docstring."""

    def __init__(self, path: Path | str, flush_interval_s: float = FLUSH_INTERVAL_S) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # O_APPEND: every batch lands at the end even if someone else appends (they should not).
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._rows = array("q")  # pending events, WIDTH int64s each, appended atomically (see the docstring)
        self._tails: dict[int, str] = {}  # OTHER rows' text after index and time, by id
        self._tail_ids = itertools.count()
        self._written = 0  # events written to the file; the next batch starts at this index
        self._counts = np.zeros(len(TYPES), dtype=np.int64)  # written events by type, in TYPES order
        # Set once a write was acknowledged (a send's ok, or a txn's): the run starts its faults
        # only then (harness/run/steps.py), as a batch is written at the latest 50 ms after it.
        self.first_write = threading.Event()
        self._t0 = _now()
        # The wall clock at the history's zero: event times are monotonic ns since then, so this one
        # reading is what places them in UTC, beside the broker logs (config.json's history_start_utc).
        self.wall_start_ns = time.time_ns()
        self._last_ns = self._t0  # times never go backwards across batches
        self._closed = False
        self._flush_interval_s = flush_interval_s
        self._write_lock = threading.Lock()  # one writer at a time keeps batches in index order
        self._out: np.ndarray | None = None  # the batches' lines, reused under the write lock (send_lines.format_rows)
        send_lines.format_rows(np.zeros((0, WIDTH), dtype=np.int64), 0, 0, 0)  # compile (or load) before the run
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name="history-flusher", daemon=True)
        self._flusher.start()

    # --- recording --------------------------------------------------------------
    # The two events of every acknowledged send are the produce loop's hot path: one packed row
    # each, no lock, nothing formatted. `array.frombytes` of a whole row cannot interleave with
    # another thread's, and struct.pack raises before anything is appended.
    def send_invoke(self, process: int, key: int, value: int) -> None:
        """A send's invoke; `process`, `key` and `value` are ints."""
        if self._closed:
            raise RecorderClosed(f"recorder for {self.path} is closed")
        self._rows.frombytes(_pack(SEND_INVOKE, _now(), process, key, value, -1, -1))

    def send_ok(self, process: int, key: int, value: int, offset: int | None, epoch: int | None) -> None:
        """A send's acknowledgement; offset and epoch are ints, None or negative for unknown (null)."""
        if self._closed:
            raise RecorderClosed(f"recorder for {self.path} is closed")
        self._rows.frombytes(_pack(SEND_OK, _now(), process, key, value, -1 if offset is None else offset,
                                   -1 if epoch is None else epoch))

    def append_rows(self, rows: bytes) -> int:
        """Send invokes and acknowledgements made elsewhere, as packed rows (ROW: kind, monotonic ns,
        process, key, value, offset, epoch): the Java client's feed (workloads/drivers/java.py)
        records its sends in the JVM and hands over its rows by the thousand, one `frombytes` each.
        Their times are the JVM's System.nanoTime(), the same CLOCK_MONOTONIC as this recorder's;
        a row that arrives after a later event takes that event's time (times never go backwards),
        so an invoke is never recorded earlier than it happened. Returns the rows appended."""
        if self._closed:
            raise RecorderClosed(f"recorder for {self.path} is closed")
        if len(rows) % ROW.size:
            raise ValueError(f"{len(rows)} bytes is not a whole number of {ROW.size}-byte rows")
        kinds = np.frombuffer(rows, dtype=np.int64)[0::WIDTH]
        if len(kinds) and not ((kinds == SEND_INVOKE) | (kinds == SEND_OK)).all():  # np.isin costs twice this
            raise ValueError("rows from outside the recorder may only be send invokes and acknowledgements")
        self._rows.frombytes(rows)
        return len(kinds)

    def _append_other(self, tail: str, type: str) -> None:
        """An event formatted here but for its index and time, which the batch writer fills in."""
        if self._closed:
            raise RecorderClosed(f"recorder for {self.path} is closed")
        tail_id = next(self._tail_ids)
        self._tails[tail_id] = tail  # before the row, so a writer that sees the row finds its text
        self._rows.frombytes(_pack(OTHER, _now(), tail_id, TYPE_CODES[type], 0, 0, 0))

    def record(self, process: int | str, type: str, f: str, value: Any = None, error: str | None = None) -> None:
        """Append one event. `value` must be JSON-serialisable."""
        if type not in TYPES:
            raise ValueError(f"event type must be one of {TYPES}, not {type!r}")
        if type == "ok" and f == "txn":
            self.first_write.set()
        self._append_other(_EVENT_TAIL % (_dumps(process), type, _dumps(f), _dumps(value), _error_field(error)), type)

    def send(self, process: int, type: str, key: int, value: int, offset: int | None = None, epoch: int | None = None,
             error: str | None = None) -> None:
        """A send event (the same JSON as `record`). `key` and `value` are ints; `offset` and `epoch`
        ints or None. Invokes and acknowledgements go through `send_invoke` / `send_ok`."""
        if type == "invoke":
            return self.send_invoke(process, key, value)
        if type == "ok" and error is None:
            return self.send_ok(process, key, value, offset, epoch)
        if type not in TYPES:
            raise ValueError(f"event type must be one of {TYPES}, not {type!r}")
        self._append_other(_SEND_TAIL % (int(process), type, int(key), int(value),
                                         "null" if offset is None else int(offset),
                                         "null" if epoch is None else int(epoch), _error_field(error)), type)

    def nemesis(self, f: str, value: dict[str, Any]) -> None:
        """A fault event: process "nemesis", type "info", `value` describing targets and what was done."""
        self.record(NEMESIS, "info", f, value)

    @property
    def counts(self) -> Counter[str]:
        """Events recorded so far by type (for progress displays); writes the pending batch first."""
        self.flush()
        return Counter(dict(zip(TYPES, self._counts.tolist())))

    @property
    def events_recorded(self) -> int:
        """Events recorded so far: the index the next event will get (unless another thread records first)."""
        with self._write_lock:
            return self._written + len(self._rows) // WIDTH

    def elapsed_ns(self) -> int:
        return _now() - self._t0

    # --- writing ----------------------------------------------------------------
    def flush(self) -> None:
        """Write every event recorded so far to the file."""
        with self._write_lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        pending = len(self._rows)
        if not pending:
            return
        # Take the first `pending` values and drop them; rows appended meanwhile stay, whole, at the end.
        batch = np.frombuffer(self._rows[:pending], dtype=np.int64).reshape(-1, WIDTH)
        del self._rows[:pending]
        self._out = send_lines.buffer_for(len(batch), self._out)
        lines, ends, times, self._last_ns = send_lines.format_rows(batch, self._written, self._t0, self._last_ns, self._out)
        kinds = batch[:, 0]
        others = np.flatnonzero(kinds == OTHER)
        if len(others):
            data = self._with_other_lines(batch, others, lines, ends, times)
            np.add.at(self._counts, batch[others, 3], 1)
        else:
            data = memoryview(lines)[:int(ends[-1])]
        self._counts[TYPE_CODES["invoke"]] += int(np.count_nonzero(kinds == SEND_INVOKE))
        acked = int(np.count_nonzero(kinds == SEND_OK))
        self._counts[TYPE_CODES["ok"]] += acked
        if acked:
            self.first_write.set()
        self._written += len(batch)
        while data:  # os.write may write less than asked
            data = data[os.write(self._fd, data):]

    def _with_other_lines(self, batch: np.ndarray, others: np.ndarray, lines: np.ndarray, ends: np.ndarray,
                          times: np.ndarray) -> memoryview:
        """The batch's bytes: the compiled send lines with each OTHER row's line in its place."""
        pieces, start = [], 0
        for row in others.tolist():
            end = int(ends[row])
            pieces.append(lines[start:end].tobytes())
            tail = self._tails.pop(int(batch[row, 2]))
            pieces.append(('{"index":%d,"time":%d' % (self._written + row, times[row]) + tail).encode())
            start = end
        pieces.append(lines[start:int(ends[-1])].tobytes())
        return memoryview(b"".join(pieces))

    def _flush_loop(self) -> None:
        # Every batch is written from here, so the recording threads only append. The compiled
        # formatter releases the GIL: a producer keeps running while its batch is formatted.
        while not self._stop.wait(self._flush_interval_s):
            self.flush()

    def close(self, parquet: bool = True) -> Path | None:
        """Flush, close the file and (by default) write history.parquet beside it; idempotent."""
        with self._write_lock:
            if self._closed:
                return None
            self._closed = True
        self._stop.set()
        self._flusher.join(timeout=5)
        self.flush()
        os.fsync(self._fd)
        os.close(self._fd)
        return write_parquet(self.path, self.path.with_suffix(".parquet")) if parquet else None

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        self.close(parquet=kind is None)  # a failed run keeps its JSON Lines only
