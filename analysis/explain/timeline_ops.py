"""The timeline split by operation and outcome, for an SRE who asks "were the sends slow, or the
polls?": per-second throughput and latency of sends and polls (and txns) by ok/fail/info, one
summary row per (operation, outcome), and the client errors the history recorded (name, count,
first and last time). Fed by analysis/explain/timeline.py's columns (f and type as codes)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.history.format import CLIENT_FS as FS, TYPES
from harness.history.record import RecordLike, as_record

OPS = ("send", "poll", "txn")  # the operations plotted; assign/subscribe are bookkeeping, crash is rare
OUTCOMES = ("ok", "fail", "info")


def add_per_op(per: pd.DataFrame, done: pd.DataFrame, lat: pd.DataFrame, bin_s: int) -> list[str]:
    """Add `<op>_<outcome>` (completions per second) and `<op>_p50_ms`/`<op>_p99_ms` columns to
    `per` for each operation present; returns the operations added."""
    nbins = len(per)
    added = []
    for op in OPS:
        code = FS.index(op)
        mine = done[done["f"].to_numpy() == code]
        if mine.empty:
            continue
        added.append(op)
        b = (mine["t"].to_numpy() // bin_s).astype(np.int64)
        for outcome in OUTCOMES:
            sel = mine["type"].to_numpy() == TYPES.index(outcome)
            per[f"{op}_{outcome}"] = np.bincount(b[sel], minlength=nbins)[:nbins] / bin_s
        la = lat[lat["f"].to_numpy() == code] if len(lat) else lat
        if len(la):
            g = la.groupby((la["t"] // bin_s).astype(np.int64))["ms"]
            q = g.quantile([0.5, 0.99]).unstack()
            per[f"{op}_p50_ms"] = q[0.5].reindex(per.index)
            per[f"{op}_p99_ms"] = q[0.99].reindex(per.index)
    return added


def op_table(done: pd.DataFrame, lat: pd.DataFrame, duration_s: float) -> list[dict[str, Any]]:
    """One row per (operation, outcome) that occurred: count, mean rate over the run, latency
    p50/p99/max (ms) from invoke to that completion."""
    rows = []
    for op in FS:
        code = FS.index(op)
        for outcome in OUTCOMES:
            tcode = TYPES.index(outcome)
            n = int(((done["f"].to_numpy() == code) & (done["type"].to_numpy() == tcode)).sum())
            if not n:
                continue
            ms = lat.loc[(lat["f"].to_numpy() == code) & (lat["type"].to_numpy() == tcode), "ms"] if len(lat) else pd.Series([], dtype=float)
            q = ms.quantile([0.5, 0.99]).to_dict() if len(ms) else {}
            rows.append({"op": op, "outcome": outcome, "count": n, "per_s": n / duration_s if duration_s > 0 else None,
                         "p50_ms": q.get(0.5), "p99_ms": q.get(0.99), "max_ms": float(ms.max()) if len(ms) else None})
    return rows


def error_table(frames: list[pd.DataFrame]) -> list[dict[str, Any]]:
    """Client errors by name (the text before the first colon: librdkafka's error name), most
    frequent first: count, first and last time (s), and which operations and outcomes had it."""
    if not frames:
        return []
    e = pd.concat(frames, ignore_index=True)
    e = e[e["name"].notna() & (e["name"] != "")]
    out = []
    for name, g in e.groupby("name", sort=False):
        ops = sorted({f"{FS[f] if 0 <= f < len(FS) else '?'} {TYPES[t] if 0 <= t < len(TYPES) else '?'}"
                      for f, t in zip(g["f"].to_numpy(), g["type"].to_numpy())})
        out.append({"name": str(name), "count": int(len(g)), "first_s": float(g["t"].min()), "last_s": float(g["t"].max()),
                    "ops": ", ".join(ops)})
    return sorted(out, key=lambda r: (-r["count"], r["first_s"]))


def start_gap(config: RecordLike, ops: pd.DataFrame) -> float | None:
    """When the workload began on the history's clock (the record's phases_s.workload, else the
    first client event): before it the cluster was starting and no client op ran."""
    began = as_record(config).phases_s.workload
    if not isinstance(began, (int, float)):
        began = float(ops["t"].min()) if len(ops) else None
    return float(began) if began is not None and began >= 1.0 else None
