"""The history: every operation of a run as plain data, written as it happens (format v1, docs/history.md).

`Recorder` is thread-safe and append-only. Each event becomes its JSON line in
the recording thread (json of the value before taking the lock; index and time
under it), so the hot path, a produce loop, does one `%` format per event and
nothing else. Every 50 ms the recording thread writes the pending lines with one
`os.write` per batch, and a background thread does so for quiet periods, so no
event waits more than ~150 ms (the format promises 200). A SIGKILL can therefore cut only the last line, and
`read_history` drops an incomplete last line. `close()` flushes and writes
`history.parquet` beside the JSONL file.

`validate_history` / `validate_events` check a history against v1 and return
the problems found (an empty list means valid).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

FORMAT_VERSION = 1
TYPES = ("invoke", "ok", "fail", "info")
CLIENT_FS = ("send", "poll", "assign", "subscribe", "txn", "crash")
NEMESIS = "nemesis"
FLUSH_INTERVAL_S = 0.1  # with inline flushes at half of it, a line waits at most ~150 ms (the format promises 200)

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


# Each event becomes its JSON line when it is recorded: the expensive part (json of the value) runs
# in the caller's thread before the lock, and only index and time are filled in under it.
# `%s` of an int is ~2x faster than `%d`; `send` is only ever given ints (and the validator would catch
# anything else as a malformed line).
_SEND_INVOKE = '{"index":%s,"time":%s,"process":%s,"type":"invoke","f":"send","value":{"key":%s,"value":%s}}'
_SEND_DONE = '{"index":%s,"time":%s,"process":%s,"type":"%s","f":"send","value":{"key":%s,"value":%s,"offset":%s,"epoch":%s}%s}'
_SEND_OK = '{"index":%s,"time":%s,"process":%s,"type":"ok","f":"send","value":{"key":%s,"value":%s,"offset":%s,"epoch":%s}}'
_EVENT = '{"index":%s,"time":%s,"process":%s,"type":"%s","f":%s,"value":%s%s}'


class Recorder:
    """Appends events to `path` (JSON Lines); see the module docstring.

    `index` and `time` are assigned under one lock, so file order, index order
    and time order agree.
    """

    def __init__(self, path: Path | str, flush_interval_s: float = FLUSH_INTERVAL_S) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # O_APPEND: every batch lands at the end even if someone else appends (they should not).
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()
        self._pending: list[str] = []  # complete JSON lines, in index order
        self._next_index = 0
        self._t0 = time.monotonic_ns()
        self._completed: dict[str, int] = {"ok": 0, "fail": 0, "info": 0}  # invokes are the rest
        self._sends_ok = 0  # send_ok's count, kept apart: an attribute increment is cheaper than a dict's
        self._closed = False
        self._flush_interval_s = flush_interval_s
        self._inline_ns = int(flush_interval_s * 1e9 / 2)  # staleness is at most ~1.5 intervals
        self._last_flush_ns = time.monotonic_ns()
        self._write_lock = threading.Lock()  # one writer at a time keeps batches in index order
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name="history-flusher", daemon=True)
        self._flusher.start()

    # --- recording --------------------------------------------------------------
    def _append(self, template: str, fields: tuple, type: str) -> int:
        """Fill in index and time under the lock and queue the line `template % (index, time, *fields)`."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"recorder for {self.path} is closed")
            index = self._next_index
            self._next_index = index + 1
            now = time.monotonic_ns()
            self._pending.append(template % ((index, now - self._t0) + fields))
            if type != "invoke":
                self._completed[type] += 1
        if now - self._last_flush_ns > self._inline_ns:
            self._flush_inline()
        return index

    def record(self, process: int | str, type: str, f: str, value: Any = None, error: str | None = None) -> int:
        """Append one event; return its index. `value` must be JSON-serialisable."""
        if type not in TYPES:
            raise ValueError(f"event type must be one of {TYPES}, not {type!r}")
        tail = "" if error is None else ',"error":' + _dumps(error)
        # json outside the lock: a big poll must not stall the producers
        return self._append(_EVENT, (_dumps(process), type, _dumps(f), _dumps(value), tail), type)

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
        tail = "" if error is None else ',"error":' + _dumps(error)
        self._append(_SEND_DONE, (process, type, key, value, "null" if offset is None else offset,
                                  "null" if epoch is None else epoch, tail), type)

    # The two events of every acknowledged send: the produce loop's hot path. Each has its own
    # template and nothing to decide, and `_append` is inlined (the call alone costs ~0.2 µs, a tenth
    # of the recorder's share of a send).
    def send_invoke(self, process: int, key: int, value: int) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"recorder for {self.path} is closed")
            index = self._next_index
            self._next_index = index + 1
            now = time.monotonic_ns()
            self._pending.append(_SEND_INVOKE % (index, now - self._t0, process, key, value))
        if now - self._last_flush_ns > self._inline_ns:
            self._flush_inline()

    def send_ok(self, process: int, key: int, value: int, offset: int | None, epoch: int | None) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"recorder for {self.path} is closed")
            index = self._next_index
            self._next_index = index + 1
            now = time.monotonic_ns()
            self._pending.append(_SEND_OK % (index, now - self._t0, process, key, value,
                                             "null" if offset is None else offset, "null" if epoch is None else epoch))
            self._sends_ok += 1
        if now - self._last_flush_ns > self._inline_ns:
            self._flush_inline()

    def invoke(self, process: int, f: str, value: Any = None) -> int:
        return self.record(process, "invoke", f, value)

    def complete(self, process: int, type: str, f: str, value: Any = None, error: str | None = None) -> int:
        return self.record(process, type, f, value, error)

    def nemesis(self, f: str, value: dict[str, Any]) -> int:
        """A fault event: process "nemesis", type "info", `value` describing targets and what was done."""
        return self.record(NEMESIS, "info", f, value)

    @property
    def counts(self) -> Counter[str]:
        """Events recorded so far by type (for progress displays)."""
        with self._lock:
            done = dict(self._completed)
            done["ok"] += self._sends_ok
            total = self._next_index
        return Counter(invoke=total - sum(done.values()), **done)

    @property
    def events_recorded(self) -> int:
        return self._next_index

    def elapsed_ns(self) -> int:
        return time.monotonic_ns() - self._t0

    # --- writing ----------------------------------------------------------------
    def _flush_inline(self) -> None:
        # A busy recording thread writes its own batches: handing the GIL to the flusher thread
        # instead costs a thread switch per batch, which on an overloaded machine stalls the producer.
        if self._write_lock.acquire(blocking=False):
            try:
                self._flush_locked()
            finally:
                self._write_lock.release()

    def flush(self) -> None:
        """Write every event recorded so far to the file."""
        with self._write_lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
            self._last_flush_ns = time.monotonic_ns()
        if not batch:
            return
        data = ("\n".join(batch) + "\n").encode()
        view = memoryview(data)
        while view:  # os.write may write less than asked
            written = os.write(self._fd, view)
            view = view[written:]

    def _flush_loop(self) -> None:
        # The safety net for quiet periods: every interval, write whatever a busy thread has not.
        while not self._stop.wait(self._flush_interval_s):
            if time.monotonic_ns() - self._last_flush_ns >= self._inline_ns:
                self.flush()

    def close(self, parquet: bool = True) -> Path | None:
        """Flush, close the file and (by default) write history.parquet beside it; idempotent."""
        with self._lock:
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

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- reading ------------------------------------------------------------------
def read_history(path: Path | str) -> list[dict[str, Any]]:
    """Events of a history file. An incomplete last line (a SIGKILL mid-write) is dropped; any other bad line raises."""
    events = []
    with open(path, "rb") as fh:
        data = fh.read()
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]  # tail is b"" when the file ends with a newline
    for number, line in enumerate(complete, 1):
        if line.strip():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON: {exc}") from exc
    del tail  # a partial line carries no complete event
    return events


def write_parquet(jsonl: Path, target: Path) -> Path:
    """history.parquet: the same events, columnar. `process` is a string ("3" or "nemesis");
    `value` is the JSON text of the value, so every `f` fits one schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    events = read_history(jsonl)
    table = pa.table(
        {
            "index": pa.array([e["index"] for e in events], pa.int64()),
            "time": pa.array([e["time"] for e in events], pa.int64()),
            "process": pa.array([str(e["process"]) for e in events], pa.string()),
            "type": pa.array([e["type"] for e in events], pa.string()),
            "f": pa.array([e["f"] for e in events], pa.string()),
            "value": pa.array([_dumps(e.get("value")) for e in events], pa.string()),
            "error": pa.array([e.get("error") for e in events], pa.string()),
        }
    )
    table = table.replace_schema_metadata({"history_format": str(FORMAT_VERSION)})
    tmp = target.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, target)  # never a half-written parquet under the real name
    return target


# --- validation (format v1) ---------------------------------------------------------
def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _opt_int(x: Any) -> bool:
    return x is None or _is_int(x)


def _check_record(r: Any) -> str | None:
    if not isinstance(r, dict):
        return "a record is not an object"
    for k in ("key", "offset", "value"):
        if not _is_int(r.get(k)):
            return f"record field {k!r} must be an int, got {r.get(k)!r}"
    if not _opt_int(r.get("epoch")):
        return f"record epoch must be an int or null, got {r.get('epoch')!r}"
    return None


def _check_send_value(v: Any, completion: bool) -> str | None:
    if not isinstance(v, dict) or not _is_int(v.get("key")) or not _is_int(v.get("value")):
        return f"send value must be {{key: int, value: int, ...}}, got {v!r}"
    if completion:
        if "offset" not in v or "epoch" not in v:
            return f"send completion needs offset and epoch (int or null), got {v!r}"
        if not _opt_int(v["offset"]) or not _opt_int(v["epoch"]):
            return f"send offset/epoch must be int or null, got {v!r}"
    return None


def _check_value(f: str, type_: str, v: Any) -> str | None:
    completion = type_ != "invoke"
    if f == "send":
        return _check_send_value(v, completion)
    if f == "poll":
        if type_ == "invoke":
            return None if v is None else f"poll invoke value must be null, got {v!r}"
        if type_ != "ok":
            return None  # a failed or unknown poll returned nothing to check
        if not isinstance(v, dict) or not isinstance(v.get("records"), list):
            return f"poll ok value must be {{records: [...]}}, got {v!r}"
        for r in v["records"]:
            if (problem := _check_record(r)) is not None:
                return problem
        return None
    if f in ("assign", "subscribe"):
        if not isinstance(v, dict) or not isinstance(v.get("keys"), list) or not all(_is_int(k) for k in v["keys"]):
            return f"{f} value must be {{keys: [int...], seek: ...}}, got {v!r}"
        if v.get("seek") not in ("beginning", "committed", None):
            return f"{f} seek must be 'beginning', 'committed' or null, got {v.get('seek')!r}"
        return None
    if f == "txn":
        if not isinstance(v, dict) or not isinstance(v.get("sends"), list) or not isinstance(v.get("records"), list):
            return f"txn value must be {{sends: [...], records: [...]}}, got {v!r}"
        for s in v["sends"]:
            if (problem := _check_send_value(s, completion)) is not None:
                return "txn " + problem
        for r in v["records"]:
            if (problem := _check_record(r)) is not None:
                return "txn " + problem
        return None
    return None  # crash: any value


def validate_events(events: Iterable[dict[str, Any]]) -> list[str]:
    """Problems of a v1 history, each naming the event's index; [] means valid."""
    problems: list[str] = []
    last_index, last_time = -1, -1
    open_sends: dict[int, set[int]] = {}  # process -> values of sends invoked, not completed
    open_seq: dict[int, str] = {}  # process -> f of its open poll/assign/subscribe/txn
    for n, e in enumerate(events):
        where = f"event #{n} (index {e.get('index')!r})" if isinstance(e, dict) else f"event #{n}"
        if not isinstance(e, dict):
            problems.append(f"{where}: not an object")
            continue
        missing = [k for k in ("index", "time", "process", "type", "f", "value") if k not in e]
        if missing:
            problems.append(f"{where}: missing field(s) {missing}")
            continue
        index, t, process, type_, f, value = (e[k] for k in ("index", "time", "process", "type", "f", "value"))
        if not _is_int(index) or index <= last_index:
            problems.append(f"{where}: index must be an int strictly greater than {last_index}")
        else:
            last_index = index
        if not _is_int(t) or t < 0:
            problems.append(f"{where}: time must be a non-negative int (ns since run start)")
        elif t < last_time:
            problems.append(f"{where}: time {t} goes backwards (previous {last_time})")
        else:
            last_time = t
        if type_ not in TYPES:
            problems.append(f"{where}: type {type_!r} is not one of {TYPES}")
            continue
        if "error" in e and e["error"] is not None and not isinstance(e["error"], str):
            problems.append(f"{where}: error must be a string")
        if process == NEMESIS:
            if type_ != "info" or not isinstance(f, str) or not isinstance(value, dict):
                problems.append(f"{where}: nemesis events need type 'info', a string f and an object value")
            continue
        if not _is_int(process) or process < 0:
            problems.append(f"{where}: process must be a non-negative int or 'nemesis', got {process!r}")
            continue
        if f not in CLIENT_FS:
            problems.append(f"{where}: f {f!r} is not one of {CLIENT_FS}")
            continue
        if (problem := _check_value(f, type_, value)) is not None:
            problems.append(f"{where}: {problem}")
            continue
        if f == "send":
            pending = open_sends.setdefault(process, set())
            if type_ == "invoke":
                if value["value"] in pending:
                    problems.append(f"{where}: send of value {value['value']} invoked twice before completing")
                pending.add(value["value"])
            elif value["value"] not in pending:
                problems.append(f"{where}: send completion of value {value['value']} without an open invoke in process {process}")
            else:
                pending.discard(value["value"])
        elif f != "crash":
            if type_ == "invoke":
                if process in open_seq:
                    problems.append(f"{where}: {f} invoked while {open_seq[process]} is still open in process {process}")
                open_seq[process] = f
            elif open_seq.get(process) != f:
                problems.append(f"{where}: {f} completion without an open {f} invoke in process {process}")
            else:
                del open_seq[process]
    return problems


def validate_history(path: Path | str) -> list[str]:
    """Problems of the history file at `path` against format v1; [] means valid."""
    try:
        events = read_history(path)
    except (OSError, ValueError) as exc:
        return [str(exc)]
    return validate_events(events)
