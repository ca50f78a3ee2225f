"""History format v1 (docs/history.md): its vocabulary and its one validator.

Everything that reads or writes a history meets here: the recorder, the clients, the
nemeses (through `harness.history.faults`), the checkers and the reports. The Spark loader
(`analysis/checking/history_load.py`) applies the same per-event rules as vectorised columns, and
`tests/analysis/test_validation_agreement.py` holds the two to the same verdict on every kind
of malformed event.

Three levels, each built on the one before:
- `event_problem(e)`: why the checkers cannot use one event, or None. They refuse a history
  with such an event (exit code 2).
- `strict_problem(e)`: what v1 also promises of each event (every field present, a send
  completion names its offset and epoch, ...), which a history from another tool may lack.
- `validate_events(events)`: both, plus the rules between events: indexes
  strictly increase, times never go backwards, and each client process completes what it
  invoked (one open poll/assign/subscribe/txn at a time; a send value invoked once before it
  completes). The recorder's own tests hold it to these; the checkers need only the first level.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

FORMAT_VERSION = 1
TYPES = ("invoke", "ok", "fail", "info")
TYPE_CODES = {t: i for i, t in enumerate(TYPES)}  # how the recorder's OTHER row stores its type
CLIENT_FS = ("send", "poll", "assign", "subscribe", "txn", "crash", "producer")
# Client events that are observations, not operations: recorded as `info` alone, no invoke, and
# never paired (a client's death; an idempotent producer's id and epoch, workloads/producer_ids.py).
NOTE_FS = ("crash", "producer")
READ_FS = ("poll", "txn")  # the fs whose ok completions carry records read
RESET_FS = ("assign", "subscribe")  # the fs after which a consumer's read sequence starts afresh
SEEKS = ("beginning", "committed", None)
NEMESIS = "nemesis"  # the process of every fault event
# A nemesis-process event that is an observation, not a fault: the abstract states of the workload's
# partitions that changed at one tick of the run's state watch (nemesis/guided/watch.py, docs/guided.md).
# Its value: {"states": {"queue-3": "kill|L:hit|isr2|trunc-hw|w0", ...}, "distinct_states": N,
# "distinct_transitions": M}. The checkers skip it with every nemesis event; the timeline draws no marker.
OBSERVED = "observed"
FIELDS = ("index", "time", "process", "type", "f", "value")


INT64 = (-(2**63), 2**63 - 1)
INT_FIELDS = ("key", "value", "offset", "epoch")  # in a client event's value, at any depth: int or null


# What `f` may be: a name. Spark reads a JSON true, 7 or {..} in a text field as the text "true",
# "7" or "{..}", so only a rule on the text itself lets both validators refuse the same events.
NAME = r"^[A-Za-z][A-Za-z0-9_.:-]*$"
NOT_NAMES = ("true", "false", "null")


def is_name(x: Any) -> bool:
    return isinstance(x, str) and re.match(NAME, x) is not None and x not in NOT_NAMES


def is_int(x: Any) -> bool:
    """A JSON integer the format can hold: int64 (Spark reads a larger one as null)."""
    return isinstance(x, int) and not isinstance(x, bool) and INT64[0] <= x <= INT64[1]


def _wrong_int(v: Any) -> str | None:
    """The first field named key/value/offset/epoch (at any depth of a client event's value) that
    holds neither an int nor null, or a `keys` list holding a non-int: the structural statement of
    the Spark loader's WRONG_INT rule, so both validators refuse the same events (found by the
    Hypothesis test in tests/analysis/test_validation_agreement.py: a txn invoke's send with
    `"key": {}` passed here and was refused by Spark)."""
    if isinstance(v, list):
        return next((p for p in map(_wrong_int, v) if p is not None), None)
    if not isinstance(v, dict):
        return None
    for k, x in v.items():
        if k in INT_FIELDS and x is not None and not is_int(x):
            return f"field {k!r} must hold an int, got {x!r}"
        if k == "keys" and isinstance(x, list) and not all(is_int(i) for i in x):
            return f"'keys' must list ints, got {x!r}"
        if (problem := _wrong_int(x)) is not None:
            return problem
    return None


def _opt_int(x: Any) -> bool:
    return x is None or is_int(x)


def _record_problem(r: Any) -> str | None:
    if not isinstance(r, dict) or not all(is_int(r.get(k)) for k in ("key", "offset", "value")):
        return f"a record must be {{key: int, offset: int, value: int, ...}}, got {r!r}"
    if not _opt_int(r.get("epoch")):
        return f"a record's epoch must be an int or null, got {r.get('epoch')!r}"
    return None


def _send_problem(v: Any) -> str | None:
    if not isinstance(v, dict) or not is_int(v.get("key")) or not is_int(v.get("value")):
        return f"malformed send value: a send's value must be {{key: int, value: int, ...}}, got {v!r}"
    for k in ("offset", "epoch"):
        if not _opt_int(v.get(k)):
            return f"a send's {k} must be an int or null, got {v.get(k)!r}"
    return None


def _value_problem(f: str, type_: str, v: Any) -> str | None:
    if f == "send":
        return _send_problem(v)
    if f in READ_FS and type_ == "ok":
        if not isinstance(v, dict) or not isinstance(v.get("records"), list):
            return f"an ok {f}'s value must hold a 'records' list, got {v!r}"
        for r in v["records"]:
            if (problem := _record_problem(r)) is not None:
                return problem
    if f == "txn" and type_ != "invoke":
        sends = v.get("sends") if isinstance(v, dict) else None
        if not isinstance(sends, list):
            return f"a txn completion's value must hold a 'sends' list, got {v!r}"
        for s in sends:
            if (problem := _send_problem(s)) is not None:
                return "in a txn, " + problem
    if f in RESET_FS:
        if not isinstance(v, dict) or not isinstance(v.get("keys"), list) or not all(is_int(k) for k in v["keys"]):
            return f"a {f}'s value must be {{keys: [int, ...], seek: ...}}, got {v!r}"
        if v.get("seek") not in SEEKS:
            return f"a {f}'s seek must be 'beginning', 'committed' or null, got {v.get('seek')!r}"
    return None


def event_problem(e: Any) -> str | None:
    """Why one parsed event is unusable by the checkers, or None. The Spark loader's
    `problem_column` is its vectorised twin."""
    if not isinstance(e, dict):
        return "the line is not a JSON object"
    for k in ("index", "time"):
        if not is_int(e.get(k)) or e[k] < 0:
            return f"field {k!r} must be a non-negative int, got {e.get(k)!r}"
    if e.get("process") is None:
        return "field 'process' is missing"
    if e.get("type") not in TYPES:
        return f"field 'type' must be one of {', '.join(TYPES)}, got {e.get('type')!r}"
    if not is_name(e.get("f")):
        return f"field 'f' must be a name (a letter, then letters, digits, '-', '_', '.' or ':'), got {e.get('f')!r}"
    if e["process"] == NEMESIS:
        return None
    if e["f"] not in CLIENT_FS:  # also what tells a JSON number from a string where Spark reads text
        return f"f {e['f']!r} is not one of {CLIENT_FS}"
    return _value_problem(e["f"], e["type"], e.get("value")) or _wrong_int(e.get("value"))


def strict_problem(e: dict[str, Any]) -> str | None:
    """What format v1 also promises of one usable event, beyond what the checkers need: the
    recorder's own output always keeps these, a history from another tool may not."""
    missing = [k for k in FIELDS if k not in e]
    if missing:
        return f"missing field(s) {missing}"
    process, type_, f, v = (e[k] for k in ("process", "type", "f", "value"))
    if e.get("error") is not None and not isinstance(e["error"], str):
        return "error must be a string"
    if process == NEMESIS:
        if type_ != "info" or not isinstance(v, dict):
            return "nemesis events need type 'info', a string f and an object value"
        if f == OBSERVED and (not isinstance(v.get("states"), dict)
                              or not all(isinstance(k, str) and isinstance(x, str) for k, x in v["states"].items())):
            return f"an observed event's value needs 'states': {{partition: state text}}, got {v!r}"
        return None
    if not is_int(process) or process < 0:
        return f"process must be a non-negative int or 'nemesis', got {process!r}"
    if f == "send" and type_ != "invoke" and ("offset" not in v or "epoch" not in v):
        return f"send completion needs offset and epoch (int or null), got {v!r}"
    if f == "poll" and type_ == "invoke" and v is not None:
        return f"poll invoke value must be null, got {v!r}"
    return None


def validate_events(events: Iterable[Any]) -> list[str]:
    """Problems of a v1 history, each naming the event's position and index; [] means valid."""
    problems: list[str] = []
    last_index, last_time = -1, -1
    open_sends: dict[int, set[int]] = {}  # process -> values of sends invoked, not completed
    open_seq: dict[int, str] = {}  # process -> f of its open poll/assign/subscribe/txn
    for n, e in enumerate(events):
        where = f"event #{n} (index {e.get('index')!r})" if isinstance(e, dict) else f"event #{n}"
        missing = [k for k in FIELDS if k not in e] if isinstance(e, dict) else []
        if (problem := (missing and f"missing field(s) {missing}") or event_problem(e) or strict_problem(e)) is not None:
            problems.append(f"{where}: {problem}")
            continue
        if e["index"] <= last_index:
            problems.append(f"{where}: index must be strictly greater than {last_index}")
        last_index = max(last_index, e["index"])
        if e["time"] < last_time:
            problems.append(f"{where}: time {e['time']} goes backwards (previous {last_time})")
        last_time = max(last_time, e["time"])
        process, type_, f, value = e["process"], e["type"], e["f"], e.get("value")
        if process == NEMESIS or f in NOTE_FS:
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
        elif type_ == "invoke":
            if process in open_seq:
                problems.append(f"{where}: {f} invoked while {open_seq[process]} is still open in process {process}")
            open_seq[process] = f
        elif open_seq.get(process) != f:
            problems.append(f"{where}: {f} completion without an open {f} invoke in process {process}")
        else:
            del open_seq[process]
    return problems
