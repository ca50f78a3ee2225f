"""A batch of recorded events becomes its JSON lines here, send events by compiled code (format v1).

A produce loop records two send events per record. Formatting each in Python
(`%` or an f-string) costs 5-9 thousand CPU instructions per event, mostly
int-to-decimal conversion, and on 2 cores shared with three brokers that CPU is
taken from the brokers. So the recorder keeps each event as one row of seven
int64s (`ROW`) and formats a whole batch in one call of a numba-compiled loop
(`format_rows`): a few hundred instructions per line. Events of other kinds
(polls, assigns, nemesis, failed sends) are rare, carry free-form values and
keep their Python formatting: their row points at the rest of their line.

`python_send_line` writes one such line in plain Python: the reference in tests.
`_format_rows_python` fulfils `format_rows`'s contract with it where numba cannot be imported.
"""

from __future__ import annotations

import logging
import struct

import numpy as np

log = logging.getLogger(__name__)

# A row: kind, monotonic ns, then per kind:
#   SEND_INVOKE / SEND_OK: process, key, value, offset, epoch (offset and epoch < 0 mean null)
#   OTHER: id of its line's tail, its type (index into harness.history.TYPES), unused x3
ROW = struct.Struct("=7q")
WIDTH = 7
SEND_INVOKE, SEND_OK, OTHER = 0, 1, 2
MAX_SEND_LINE = 256  # the longest send line, every int at 20 characters, is 241 bytes

_PY_INVOKE = '{"index":%s,"time":%s,"process":%s,"type":"invoke","f":"send","value":{"key":%s,"value":%s}}\n'
_PY_OK = '{"index":%s,"time":%s,"process":%s,"type":"ok","f":"send","value":{"key":%s,"value":%s,"offset":%s,"epoch":%s}}\n'


def _literals(template: str) -> tuple[np.ndarray, ...]:
    """The literal parts between a template's fields, as bytes for the compiled loop."""
    return tuple(np.frombuffer(p.encode(), dtype=np.uint8) for p in template.split("%s"))


_PARTS = (_literals(_PY_INVOKE), _literals(_PY_OK))


def _format_rows_py(rows: np.ndarray, first_index: int, t0: int, last_ns: int, out: np.ndarray, ends: np.ndarray,
                    times: np.ndarray, parts_invoke: tuple, parts_ok: tuple) -> int:
    """Send rows' lines into `out` (ends[i] = end of row i's line; other rows get no bytes),
    every row's time into `times`; returns the last monotonic ns seen. Compiled by numba when available.

    Times are made non-decreasing in row order: a thread preempted between reading the clock and
    appending its row would otherwise leave an earlier time after a later one."""
    pos = 0
    for i in range(rows.shape[0]):
        ns = rows[i, 1]
        if ns < last_ns:
            ns = last_ns
        last_ns = ns
        times[i] = ns - t0
        kind = rows[i, 0]
        if kind == SEND_INVOKE:
            pos = _send_fields(out, pos, parts_invoke, first_index + i, ns - t0, rows[i])
            pos = _put(out, pos, parts_invoke[5])
        elif kind == SEND_OK:
            pos = _send_fields(out, pos, parts_ok, first_index + i, ns - t0, rows[i])
            pos = _put(out, pos, parts_ok[5])
            pos = _put_int(out, pos, rows[i, 5], True)
            pos = _put(out, pos, parts_ok[6])
            pos = _put_int(out, pos, rows[i, 6], True)
            pos = _put(out, pos, parts_ok[7])
        ends[i] = pos
    return last_ns


def _send_fields(out: np.ndarray, pos: int, parts: tuple, index: int, time: int, row: np.ndarray) -> int:
    """index, time, process, key and value with the literals before them: common to both send lines."""
    pos = _put(out, pos, parts[0])
    pos = _put_int(out, pos, index, False)
    pos = _put(out, pos, parts[1])
    pos = _put_int(out, pos, time, False)
    pos = _put(out, pos, parts[2])
    pos = _put_int(out, pos, row[2], False)
    pos = _put(out, pos, parts[3])
    pos = _put_int(out, pos, row[3], False)
    pos = _put(out, pos, parts[4])
    return _put_int(out, pos, row[4], False)


def _put(out: np.ndarray, pos: int, literal: np.ndarray) -> int:
    # Unsigned indices: with a signed one numba checks each store for a negative (wraparound) index,
    # and the loop cost 2.2 ns a byte, half a line's formatting; unsigned, 0.3 (measured).
    base = np.uint64(pos)
    for j in range(literal.shape[0]):
        out[base + np.uint64(j)] = literal[j]
    return pos + literal.shape[0]


_PAIRS = np.frombuffer("".join(f"{i:02d}" for i in range(100)).encode(), dtype=np.uint8).copy()  # "00".."99"


def _put_int(out: np.ndarray, pos: int, v: int, nullable: bool) -> int:
    """v in decimal as JSON writes it; `null` instead of a negative nullable v.

    Two digits per division, from a table, and the length by multiplying rather than by a second
    pass of divisions."""
    if v < 0:
        if nullable:
            out[pos] = 110  # n
            out[pos + 1] = 117  # u
            out[pos + 2] = 108  # l
            out[pos + 3] = 108  # l
            return pos + 4
        out[pos] = 45  # '-'
        pos += 1
        u = np.uint64(-(v + 1)) + np.uint64(1)  # |v| without overflow at -2**63
    else:
        u = np.uint64(v)
    ten, hundred = np.uint64(10), np.uint64(100)
    n = 1
    p10 = ten
    while n < 20 and u >= p10:  # 10**19 is the last power of ten a uint64 holds; the 20th digit ends the loop
        n += 1
        p10 *= ten
    one, two = np.uint64(1), np.uint64(2)
    p = np.uint64(pos + n)  # unsigned, as in _put
    while u >= hundred:
        q = u // hundred
        r = (u - q * hundred) * two
        p -= two
        out[p] = _PAIRS[r]
        out[p + one] = _PAIRS[r + one]
        u = q
    if u >= ten:
        r = u * two
        out[p - two] = _PAIRS[r]
        out[p - one] = _PAIRS[r + one]
    else:
        out[p - one] = np.uint8(u) + np.uint8(48)
    return pos + n


def _compiled():
    """The numba-compiled formatter (cached on disk), or None where numba is unavailable."""
    try:
        import numba
    except ImportError as exc:  # the recorder still works, only slower
        log.warning("numba unavailable (%s): recording sends in plain Python, ~5x more CPU per event", exc)
        return None
    global _put, _put_int, _send_fields  # the compiled loop calls the compiled helpers
    jit = numba.njit(cache=True, nogil=True)
    if not hasattr(_put, "py_func"):  # once per process
        _put, _put_int, _send_fields = jit(_put), jit(_put_int), jit(_send_fields)
    return jit(_format_rows_py)


_format_rows = None


def format_rows(rows: np.ndarray, first_index: int, t0: int, last_ns: int,
                out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(bytes of the send lines, end of each row's line in them, each row's time, the last monotonic ns).

    `rows` is int64 (n, WIDTH); row i gets index first_index + i. `out`, if given and large enough
    (MAX_SEND_LINE bytes a row, `buffer_for`), receives the lines: a buffer kept across batches.
    A fresh one each batch cost more than the formatting: at 436,000 rows/s it was 110 MB/s of new
    pages for the kernel to fault in and zero (sys 1.06 of 1.71 CPU s per million sends, measured)."""
    global _format_rows
    if _format_rows is None:
        _format_rows = _compiled() or _format_rows_python
    n = rows.shape[0]
    if out is None or out.shape[0] < n * MAX_SEND_LINE:
        out = np.empty(n * MAX_SEND_LINE, dtype=np.uint8)
    ends = np.empty(n, dtype=np.int64)
    times = np.empty(n, dtype=np.int64)
    last_ns = _format_rows(rows, first_index, t0, last_ns, out, ends, times, *_PARTS)
    return out, ends, times, int(last_ns)


def buffer_for(rows: int, buffer: np.ndarray | None) -> np.ndarray:
    """`buffer` if it holds `rows` rows' lines, else a new one with room to grow (twice as many)."""
    if buffer is not None and buffer.shape[0] >= rows * MAX_SEND_LINE:
        return buffer
    return np.empty(2 * rows * MAX_SEND_LINE, dtype=np.uint8)


def _format_rows_python(rows, first_index, t0, last_ns, out, ends, times, parts_invoke, parts_ok):  # type: ignore[no-untyped-def]
    """The fallback: the same contract as the compiled loop, with Python's string formatting."""
    pos = 0
    for i, (kind, ns, process, key, value, offset, epoch) in enumerate(rows.tolist()):
        last_ns = max(ns, last_ns)
        times[i] = last_ns - t0
        if kind in (SEND_INVOKE, SEND_OK):
            line = python_send_line(first_index + i, last_ns - t0, kind, process, key, value, offset, epoch).encode()
            out[pos:pos + len(line)] = np.frombuffer(line, dtype=np.uint8)
            pos += len(line)
        ends[i] = pos
    return last_ns


def python_send_line(index: int, time: int, kind: int, process: int, key: int, value: int, offset: int,
                     epoch: int) -> str:
    """One send event's line in plain Python: the reference the compiled loop must match byte for byte."""
    if kind == SEND_INVOKE:
        return _PY_INVOKE % (index, time, process, key, value)
    return _PY_OK % (index, time, process, key, value, "null" if offset < 0 else offset,
                     "null" if epoch < 0 else epoch)
