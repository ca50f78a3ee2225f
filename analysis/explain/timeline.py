"""Per-second views of one run's history for the report: throughput, latency, faults, the
acknowledged and read positions, consumer lag. pandas/pyarrow only (no Spark: a report must
open quickly), vectorised so that a 10M-operation history is read in seconds.

`history.parquet` is read in record batches with column projection (`time, process, type, f,
value`); the JSON text in `value` is never parsed per row: regular expressions (RE2, in Arrow)
pull out the few integers needed (a send's key/value/offset, a read record's key/offset/value).
Without a parquet (a failed run), `history.jsonl` is read with the recorder's own reader.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.history.faults import BY_START, HEAL, STOPS, ended_by
from harness.history.format import CLIENT_FS as FS, OBSERVED, TYPES
from harness.history.record import RecordLike, as_record

NS = 1_000_000_000
COLUMNS = ["time", "process", "type", "f", "value"]
OPTIONAL = ["error"]  # read when present (every v1 parquet has it)


class TimelineError(Exception):
    """The history cannot be read for the report (the message says which file and why)."""


@dataclass
class Fault:
    f: str  # the start event's f, e.g. "kill"
    start_s: float
    end_s: float
    targets: list[int]
    label: str  # "kill 2 (leader×3)"
    detail: dict[str, Any]
    ended_by: str  # the stop event's f, "heal", or "end of history"


@dataclass
class Timeline:
    seconds: pd.DataFrame  # per bin: t (s), ok, fail, info, p50_ms, p99_ms, max_ms, lag_p50, lag_max, and
    # per operation and outcome: send_ok, send_fail, send_info, poll_ok, … (per s), send_p50_ms, send_p99_ms, poll_p50_ms, …
    bin_s: int
    faults: list[Fault]
    markers: list[dict[str, Any]]  # nemesis events that are not bands (nemesis-error, heal)
    writes: pd.DataFrame  # acknowledged sends: key, offset, value, t
    reads: pd.DataFrame  # records read by ok polls/txns: key, offset, value, t, process
    duration_s: float
    events: int
    drain_start_s: float | None
    source: str  # which file was read
    notes: list[str] = field(default_factory=list)
    op_table: list[dict[str, Any]] = field(default_factory=list)  # per (op, outcome): count, per s, latency quantiles
    errors: list[dict[str, Any]] = field(default_factory=list)  # client errors: name, count, first/last time, ops
    start_gap_s: float | None = None  # the cluster start: history time 0 until the workload began


# ---------------------------------------------------------------------------- reading
def _jsonl_table(path: Path) -> pa.Table:
    """history.jsonl as the parquet's columns (process as text, value as JSON text)."""
    from harness.history import read_history

    try:
        events = read_history(path)
    except (OSError, ValueError) as exc:
        raise TimelineError(str(exc)) from exc
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    try:
        return pa.table({
            "time": pa.array([e["time"] for e in events], pa.int64()),
            "process": pa.array([str(e["process"]) for e in events], pa.string()),
            "type": pa.array([e["type"] for e in events], pa.string()),
            "f": pa.array([e["f"] for e in events], pa.string()),
            "value": pa.array([dumps(e.get("value")) for e in events], pa.string()),
            "error": pa.array([e.get("error") if isinstance(e.get("error"), str) else None for e in events], pa.string()),
        })
    except (KeyError, TypeError, pa.ArrowException) as exc:
        raise TimelineError(f"{path}: an event lacks a v1 field or has the wrong type ({exc})") from exc


def _batches(run_dir: Path, batch_rows: int = 1_000_000) -> tuple[str, Iterator[pa.RecordBatch], int]:
    parquet, jsonl = run_dir / "history.parquet", run_dir / "history.jsonl"
    if parquet.exists():
        try:
            pf = pq.ParquetFile(parquet)
            missing = [c for c in COLUMNS if c not in pf.schema_arrow.names]
            if missing:
                raise TimelineError(f"{parquet}: missing column(s) {missing}")
            cols = COLUMNS + [c for c in OPTIONAL if c in pf.schema_arrow.names]
            return str(parquet), pf.iter_batches(batch_size=batch_rows, columns=cols), pf.metadata.num_rows
        except (OSError, pa.ArrowException) as exc:
            if not jsonl.exists():
                raise TimelineError(f"{parquet}: unreadable ({exc})") from exc
    if jsonl.exists():
        table = _jsonl_table(jsonl)
        return str(jsonl), iter(table.to_batches(batch_rows)), table.num_rows
    raise TimelineError(f"{run_dir}: no history.parquet or history.jsonl")


def _int(arr: pa.Array, pattern: str) -> np.ndarray:
    """The first integer captured by `pattern` in each string, -1 where absent."""
    got = pc.struct_field(pc.extract_regex(arr, pattern), [0])
    return pc.fill_null(pc.cast(got, pa.int64(), safe=False), -1).to_numpy(zero_copy_only=False)


def _field(name: str) -> str:
    return rf'"{name}":\s*(?P<x>-?\d+)'


def _codes(arr: pa.Array, names: tuple[str, ...]) -> np.ndarray:
    idx = pc.index_in(arr, value_set=pa.array(names))
    return pc.fill_null(idx, len(names)).to_numpy(zero_copy_only=False).astype(np.int8)


@dataclass
class _Parts:
    ops: list[pd.DataFrame] = field(default_factory=list)
    writes: list[pd.DataFrame] = field(default_factory=list)
    reads: list[pd.DataFrame] = field(default_factory=list)
    nemesis: list[dict[str, Any]] = field(default_factory=list)
    errors: list[pd.DataFrame] = field(default_factory=list)  # t, f, type, name of events with an error


def _every(mask: np.ndarray, stride: int) -> np.ndarray:
    """`mask` keeping only every `stride`-th True (an even sample, cheap)."""
    if stride <= 1:
        return mask
    keep = mask.copy()
    idx = np.flatnonzero(mask)
    keep[idx[np.arange(len(idx)) % stride != 0]] = False
    return keep


def _read_batch(b: pa.RecordBatch, parts: _Parts, stride: int = 1) -> None:
    proc = b.column("process")
    is_nem = pc.equal(proc, "nemesis").to_numpy(zero_copy_only=False)
    if is_nem.any():
        nem = b.filter(pa.array(is_nem)).to_pydict()
        for t, f, v in zip(nem["time"], nem["f"], nem["value"]):
            try:
                value = json.loads(v) if v else {}
            except ValueError:
                value = {"raw": v}
            parts.nemesis.append({"t": t / NS, "f": f, "value": value if isinstance(value, dict) else {"value": value}})
        b = b.filter(pa.array(~is_nem))
    if b.num_rows == 0:
        return
    time = b.column("time").to_numpy(zero_copy_only=False)
    type_ = _codes(b.column("type"), TYPES)
    f = _codes(b.column("f"), FS)
    value = b.column("value")
    procs = pc.cast(b.column("process"), pa.int64(), safe=False).to_numpy(zero_copy_only=False)
    if "error" in b.schema.names:
        has = pc.is_valid(b.column("error")).to_numpy(zero_copy_only=False)
        if has.any():
            names = pc.utf8_trim_whitespace(pc.struct_field(pc.extract_regex(
                b.column("error").filter(pa.array(has)), r"^(?P<n>[^:]*)"), [0]))
            parts.errors.append(pd.DataFrame({"t": time[has] / NS, "f": f[has], "type": type_[has],
                                              "name": names.to_numpy(zero_copy_only=False)}))
    is_send = f == 0
    sid = np.full(len(f), -1, np.int64)
    if is_send.any():
        sid[is_send] = _int(value.filter(pa.array(is_send)), _field("value"))
        ok_send = _every(is_send & (type_ == 1), stride)
        sv = value.filter(pa.array(ok_send))
        w = pd.DataFrame({"key": _int(sv, _field("key")), "offset": _int(sv, _field("offset")),
                          "value": _int(sv, _field("value")), "t": time[ok_send] / NS})
        parts.writes.append(w[w["offset"] >= 0])
    parts.ops.append(pd.DataFrame({"t": time / NS, "process": procs, "type": type_, "f": f, "sid": sid}))
    is_read = _every(((f == 1) | (f == 4)) & (type_ == 1), stride)
    if is_read.any():
        rv = value.filter(pa.array(is_read))
        body = pc.struct_field(pc.extract_regex(rv, r'"records":\s*\[(?P<r>[^\]]*)\]'), [0])
        pieces = pc.split_pattern_regex(pc.fill_null(body, ""), r"\}\s*,\s*\{")
        parent = pc.list_parent_indices(pieces).to_numpy(zero_copy_only=False)
        flat = pc.list_flatten(pieces)
        r = pd.DataFrame({"key": _int(flat, _field("key")), "offset": _int(flat, _field("offset")),
                          "value": _int(flat, _field("value")),
                          "t": (time[is_read] / NS)[parent], "process": procs[is_read][parent]})
        parts.reads.append(r[r["offset"] >= 0])


def _concat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame({c: [] for c in columns})


# ---------------------------------------------------------------------------- aggregations
def _latencies(ops: pd.DataFrame) -> pd.DataFrame:
    """Invoke→completion pairs: sends by (process, value) since they overlap; every other op of a
    process is sequential, so its completion directly follows its invoke within (process, f)."""
    order = np.lexsort((np.arange(len(ops)), ops["sid"].to_numpy(), ops["f"].to_numpy(), ops["process"].to_numpy()))
    p, f, s = (ops[c].to_numpy()[order] for c in ("process", "f", "sid"))
    t, ty = ops["t"].to_numpy()[order], ops["type"].to_numpy()[order]
    same = np.zeros(len(order), bool)
    same[1:] = (p[1:] == p[:-1]) & (f[1:] == f[:-1]) & (s[1:] == s[:-1]) & (ty[:-1] == 0) & (ty[1:] != 0)
    prev_t = np.roll(t, 1)
    return pd.DataFrame({"t": t[same], "ms": (t[same] - prev_t[same]) * 1000.0, "f": f[same], "type": ty[same]})


def _lag(writes: pd.DataFrame, reads: pd.DataFrame, exclude: set[int]) -> pd.DataFrame:
    """For each record read, the highest offset acknowledged on its key by then minus the offset
    read (≥ 0): how far behind the producers the consumer was."""
    r = reads[~reads["process"].isin(exclude)] if exclude else reads
    if r.empty or writes.empty:
        return pd.DataFrame({"t": [], "lag": []})
    w = writes.sort_values("t", kind="stable")
    w = w.assign(high=w.groupby("key")["offset"].cummax())[["t", "key", "high"]]
    r = r.sort_values("t", kind="stable")[["t", "key", "offset"]]
    m = pd.merge_asof(r, w, on="t", by="key", direction="backward")
    return pd.DataFrame({"t": m["t"], "lag": (m["high"] - m["offset"]).clip(lower=0)}).dropna()


def _roles_text(roles: Any) -> str:
    if not isinstance(roles, dict):
        return ""
    out = []
    for node, rs in sorted(roles.items(), key=lambda kv: str(kv[0])):
        rs = rs if isinstance(rs, list) else []
        bits = (["controller"] if "controller" in rs else []) + \
               ([f"leader×{sum(str(r).startswith('leader') for r in rs)}"] if any(str(r).startswith("leader") for r in rs) else []) + \
               [str(r) for r in rs if "coordinator:" in str(r)]
        if bits:
            out.append(f"{node}: {', '.join(bits)}" if len(roles) > 1 else ", ".join(bits))
    return "; ".join(out)


def _fault_label(f: str, value: dict[str, Any]) -> tuple[list[int], str]:
    targets = [t for t in value.get("targets") or [] if isinstance(t, int)]
    name = BY_START[f].label if f in BY_START else f
    if f == "start-partition" and value.get("shape"):
        name = f"partition {value['shape']}"
    if f == "node-stop":  # an operation's step: "roll: clean stop"
        name = f"{value.get('op') or 'operation'}: {value.get('how') or ''} stop".replace(":  ", ": ")
    if value.get("to_version"):  # a rolling upgrade (nemesis/upgrade.py), a node's switch, or the features
        name += f" ({value['from_version']} to {value['to_version']})" if value.get("from_version") else f" (to {value['to_version']})"
    label = f"{name} → broker{'s' if len(targets) != 1 else ''} {','.join(map(str, targets)) or '?'}"
    roles = _roles_text(value.get("roles"))
    return targets, f"{label} ({roles})" if roles else label


def faults_from(nemesis: list[dict[str, Any]], end_s: float) -> tuple[list[Fault], list[dict[str, Any]]]:
    """Bands from start/stop pairs (harness.history.faults); a start never stopped runs to the
    next heal (or the end). A stop that names its targets ends only those nodes' bands (a kill
    of broker 1 then of broker 2, restarted one at a time, ends each band at its own restart)."""
    open_: list[Fault] = []
    done: list[Fault] = []
    markers: list[dict[str, Any]] = []
    for ev in sorted(nemesis, key=lambda e: e["t"]):
        f, t, v = ev["f"], ev["t"], ev["value"]
        if f in BY_START:
            targets, label = _fault_label(f, v)
            open_.append(Fault(f, t, end_s, targets, label, v, "end of history"))
        elif f == OBSERVED:  # the state watch's observations (docs/guided.md): neither a fault nor a marker
            continue
        elif f in STOPS or f == HEAL:
            kinds = {k.start for k in ended_by(f)}
            named = {x for x in (v.get("targets") or []) if isinstance(x, int)} if isinstance(v, dict) else set()
            closing = [x for x in open_ if f == HEAL or (x.f in kinds and (
                not named or not x.targets or set(x.targets) & named))]
            for x in closing:
                x.end_s, x.ended_by = t, f
                done.append(x)
            open_ = [x for x in open_ if x not in closing]
            if f == HEAL:
                markers.append({"t": t, "f": f, "label": "heal", "detail": v})
        else:  # nemesis-error, scenario steps and anything new: a point in time, not a band
            markers.append({"t": t, "f": f, "label": f, "detail": v})
    done.extend(open_)
    return sorted(done, key=lambda x: x.start_s), markers


def build(run_dir: Path | str, config: RecordLike = None, max_bins: int = 3600,
          max_positions: int = 1_000_000) -> Timeline:
    """Everything the report plots, from RUN_DIR's history. Raises TimelineError.

    Throughput and latency use every event. Positions (acknowledged sends, polls whose records
    are parsed) are an even sample of about `max_positions` events each way when the history is
    larger: they feed the offset scatters and the lag curve, which need shape, not every point."""
    run_dir = Path(run_dir)
    source, batches, rows = _batches(run_dir)
    stride = max(1, -(-rows // (4 * max_positions)))  # sends and polls are ~1/4 of the rows each
    parts = _Parts()
    try:
        for b in batches:
            _read_batch(b, parts, stride)
    except (pa.ArrowException, OSError) as exc:
        raise TimelineError(f"{source}: unreadable ({exc})") from exc
    ops = _concat(parts.ops, ["t", "process", "type", "f", "sid"])
    writes = _concat(parts.writes, ["key", "offset", "value", "t"])
    reads = _concat(parts.reads, ["key", "offset", "value", "t", "process"])
    events = len(ops) + len(parts.nemesis)
    end_s = max([float(ops["t"].max()) if len(ops) else 0.0] + [e["t"] for e in parts.nemesis])
    bin_s = max(1, int(np.ceil((end_s + 1) / max_bins)))  # per second unless the run is very long

    record = as_record(config)  # harness/history/record.py: the run's record, or config.json's content
    drain_procs = set(record.drain.processes) if record.drain is not None else set()
    drain_start = float(ops.loc[ops["process"].isin(drain_procs), "t"].min()) if drain_procs and len(ops) else None
    if drain_start is not None and np.isnan(drain_start):
        drain_start = None

    nbins = int(end_s // bin_s) + 1
    done = ops[ops["type"] != 0]
    b = (done["t"].to_numpy() // bin_s).astype(np.int64)
    per = pd.DataFrame({"t": np.arange(nbins) * bin_s})
    for code, name in ((1, "ok"), (2, "fail"), (3, "info")):
        per[name] = np.bincount(b[done["type"].to_numpy() == code], minlength=nbins)[:nbins] / bin_s
    lat = _latencies(ops)
    if len(lat):
        g = lat.groupby((lat["t"] // bin_s).astype(np.int64))["ms"]
        q = g.quantile([0.5, 0.99]).unstack()
        per["p50_ms"] = q[0.5].reindex(per.index)
        per["p99_ms"] = q[0.99].reindex(per.index)
        per["max_ms"] = g.max().reindex(per.index)
    lag = _lag(writes, reads, drain_procs)
    if len(lag):
        g = lag.groupby((lag["t"] // bin_s).astype(np.int64))["lag"]
        per["lag_p50"] = g.median().reindex(per.index)
        per["lag_max"] = g.max().reindex(per.index)
    from analysis.explain import timeline_ops
    timeline_ops.add_per_op(per, done, lat, bin_s)
    faults, markers = faults_from(parts.nemesis, end_s)
    notes = []
    if stride > 1:
        notes.append(f"offset plots and consumer lag use every {stride}th acknowledged send and poll (even sample); "
                     "throughput and latency use every event")
    if drain_procs:
        notes.append("consumer lag leaves out the final drain, which re-reads every partition from the beginning")
    return Timeline(per, bin_s, faults, markers, writes, reads, end_s, events, drain_start, source, notes,
                    op_table=timeline_ops.op_table(done, lat, end_s), errors=timeline_ops.error_table(parts.errors),
                    start_gap_s=timeline_ops.start_gap(record, ops[ops["f"] < len(FS)]))


def sample(df: pd.DataFrame, cap: int, seed: int = 0) -> pd.DataFrame:
    """At most `cap` rows, evenly spread over the frame (kept in order)."""
    if len(df) <= cap:
        return df
    idx = np.linspace(0, len(df) - 1, cap).astype(np.int64)
    return df.iloc[idx]
