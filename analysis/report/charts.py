"""The report's charts as static SVG (analysis/report/svg.py): the timeline (throughput per
operation by outcome, latency, consumer lag, faults as bands over every row), the offset plot of
an affected partition (zoomed on the anomaly; the whole run one click away), and the anomaly
points both the SVG and the Plotly figures (`report --inline`, analysis/report/figures.py) mark.
Data is bounded: timeline columns re-binned to `MAX_COLUMNS`, scatter points capped."""

from __future__ import annotations

import math
import textwrap
from typing import Any

import numpy as np
import pandas as pd
from markupsafe import Markup, escape

from analysis.report.svg import MAX_COLUMNS, Panel, chart
from analysis.explain.timeline import Timeline, sample

FAULT_COLOURS = {"kill": "#e4572e", "pause": "#f3a712", "start-partition": "#7b5ea7", "start-loss": "#29a3a3",
                 "bump-clock": "#4b7bec", "strobe-clock": "#4b7bec"}
TYPE_COLOURS = {"ok": "#2e9e4f", "fail": "#d64545", "info": "#e8a33d"}
LATENCY = {"send": ("#1f77b4", "#ff7f0e"), "poll": ("#17a589", "#8e44ad"), "txn": ("#5d6d7e", "#c0392b")}
MARK = {  # how each anomaly is drawn on the offset scatter
    "lost-write": ("x", "#c62828", "lost"), "unseen": ("x-open", "#c62828", "unseen (lost if drain complete)"),
    "duplicate": ("diamond", "#f57c00", "duplicated"), "inconsistent-offsets": ("square", "#6a1b9a", "diverged"),
    "nonmonotonic-send": ("triangle-down", "#1565c0", "reordered send"),
    "nonmonotonic-poll": ("triangle-down", "#00838f", "reordered read"),
    "poll-skip": ("triangle-right", "#5d4037", "skipped read"), "aborted-read": ("star", "#ad1457", "aborted read"),
}
MAX_BACKGROUND = 2500  # written/read points per scatter (Plotly)
SVG_POINTS = 1200  # written/read points per SVG scatter view (the zoomed one)
SVG_POINTS_WHOLE = 600  # … and per whole-run view (a 1200 px wide overview needs no more)
W, LEFT, RIGHT = 1200, 64, 16
HOVER_BANDS = 40  # a fault kind with more bands than this is drawn as one path with one hover text


def anomaly_points(name: str, examples: list[dict[str, Any]], explained: list[dict[str, Any]] | None = None) -> pd.DataFrame:
    """(key, offset, t, text) of every op involved in the examples of one anomaly, and of each
    explained example (analysis/explain/explanations.py) at its acknowledgement, with its sentence as text."""
    rows = []
    for x in explained or []:
        t = (x.get("completion") or {}).get("t_s", (x.get("at") or {}).get("from_s"))
        if x.get("key") is not None and x.get("offset") is not None and t is not None:
            rows.append({"key": int(x["key"]), "offset": int(x["offset"]), "t": float(t),
                         "text": f"{name}: " + "\n".join(textwrap.wrap(x.get("sentence", ""), 90))})
    for ex in examples:
        ops = [o for o in ex.get("ops") or [] if isinstance(o, dict)]
        offsets = ex.get("offsets") if isinstance(ex.get("offsets"), list) else None
        for i, op in enumerate(ops):
            key = op.get("key", ex.get("key"))
            off = op.get("offset")
            if off is None:
                off = offsets[i] if offsets and i < len(offsets) else ex.get("offset")
            if key is None or off is None or op.get("time") is None:
                continue
            rows.append({"key": int(key), "offset": int(off), "t": op["time"] / 1e9,
                         "text": f"{name}: #{op.get('index')} p{op.get('process')} {op.get('f')} {op.get('type')} "
                                 f"value {op.get('value', ex.get('value'))} @ {key}/{off}"})
        if not ops and ex.get("key") is not None and ex.get("offset") is not None:
            rows.append({"key": int(ex["key"]), "offset": int(ex["offset"]), "t": np.nan, "text": name})
    return pd.DataFrame(rows, columns=["key", "offset", "t", "text"])


def near(df: pd.DataFrame, times: np.ndarray, cap: int, span: float) -> pd.DataFrame:
    """Half the points evenly over the run, half within `span` seconds of the anomalies."""
    if len(df) <= cap:
        return df
    base = sample(df, cap // 2)
    if len(times) == 0:
        return sample(df, cap)
    t = df["t"].to_numpy()
    mask = np.zeros(len(df), bool)
    for x in times[:50]:
        mask |= (t >= x - span) & (t <= x + span)
    return pd.concat([base, sample(df[mask], cap - len(base))]).sort_values("t")


def zoom(points: dict[str, pd.DataFrame], key: int, span: float) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """The (t, offset) ranges a few seconds and some tens of offsets around partition `key`'s
    anomalies, so that a few lost records are not one blob in a whole run's scatter."""
    p = pd.concat([q[q["key"] == key] for q in points.values()] or [pd.DataFrame(columns=["t", "offset"])])
    t, o = p["t"].dropna().to_numpy(dtype=float), p["offset"].dropna().to_numpy(dtype=float)
    tr = orr = None
    if len(t):
        pad = max(2.0, min(span, (t.max() - t.min()) * 0.5 + 2.0))
        tr = (t.min() - pad, t.max() + pad)
    if len(o):
        pad = max(20.0, (o.max() - o.min()) * 0.5)
        orr = (o.min() - pad, o.max() + pad)
    return tr, orr


def rebin(s: pd.DataFrame, bin_s: int) -> tuple[pd.DataFrame, float]:
    """At most MAX_COLUMNS rows: rates averaged, p50/lag medians, p99/max the worst of a group."""
    if len(s) <= MAX_COLUMNS:
        return s, float(bin_s)
    k = math.ceil(len(s) / MAX_COLUMNS)
    g = s.groupby(np.arange(len(s)) // k)
    agg = {c: ("max" if c.endswith(("p99_ms", "max_ms")) or c == "lag_max" else "median" if c.endswith(("p50_ms", "p50")) else "mean")
           for c in s.columns if c != "t"}
    out = g.agg(agg)
    out.insert(0, "t", g["t"].min())
    return out.reset_index(drop=True), float(bin_s * k)


def fault_bands(panel: Panel, faults: list[Any], opacity: float, hover: bool = True) -> None:
    """Each fault as a shaded band on `panel`. A kind with at most HOVER_BANDS faults gets a band
    each with its own hover text; a kind with more is drawn as one path, whose hover counts them
    (the table above the chart lists each): the 2-hour soak's 917 faults were 3,676 rects with a
    title each, 926 KB of its 1.73 MB report, and no reader hovers a band a pixel wide."""
    for kind in dict.fromkeys(f.f for f in faults):
        mine = [f for f in faults if f.f == kind]
        colour = FAULT_COLOURS.get(kind, "#888888")
        spans = [(f.start_s, max(f.end_s, f.start_s + 0.05)) for f in mine]
        if len(mine) > HOVER_BANDS:
            panel.bands(spans, colour, opacity, f"{kind}: {len(mine)} faults (the fault table lists each)" if hover else "")
            continue
        for f, (a, b) in zip(mine, spans):
            panel.band(a, b, colour, opacity, f"{f.label}: {f.start_s:.1f}–{f.end_s:.1f} s, ended by {f.ended_by}" if hover else "")


def fault_labels(faults: list[Any], panel: Panel, rows: int = 3, size: int = 11) -> list[tuple[Any, int]]:
    """(fault, row) for the labels that fit: each fault in the first of `rows` rows where its text
    does not overlap the label before it; a fault with no room keeps its band's hover. Every fault
    used to be labelled, so a long run's labels were one black smear."""
    ends = [-math.inf] * rows
    placed = []
    for f in sorted(faults, key=lambda f: f.start_s):
        if not panel.inside_x(f.start_s):
            continue
        width = len(f.label) * size * 0.62  # measured in Chromium: DejaVu Sans at 11 px with its arrows
        x = min(panel.x(f.start_s) + 2, panel.left + panel.w - 2 - width)  # a label past the right edge ends there
        row = next((r for r in range(rows) if x > ends[r] + 8), None)
        if row is not None:
            ends[row] = x + width
            placed.append((f, row))
    return placed


def _bands(panels: list[Panel], tl: Timeline) -> None:
    """Faults, the final drain and the cluster start as shaded bands over every panel; hover text
    and labels on the first (the same title on every panel only weighed the page)."""
    top = panels[0]
    for i, p in enumerate(panels):
        if tl.start_gap_s is not None:
            p.band(0, tl.start_gap_s, "#c9ccd1", 0.35, f"cluster starting (no client ops, {tl.start_gap_s:.1f} s)" if i == 0 else "")
        if tl.drain_start_s is not None:
            p.band(tl.drain_start_s, tl.duration_s, "#9aa0a6", 0.18, "final drain" if i == 0 else "")
        fault_bands(p, tl.faults, 0.16, hover=i == 0)
    if tl.start_gap_s is not None:
        top.label(tl.start_gap_s / 2, 0.5, f"cluster starting ({tl.start_gap_s:.1f} s)", anchor="middle", box=True)
    if tl.drain_start_s is not None:
        top.label(tl.drain_start_s, 0.95, "final drain", box=True)
    for f, row in fault_labels(tl.faults, top):
        top.label(f.start_s, 0.12 + 0.1 * row, f.label, FAULT_COLOURS.get(f.f, "#888888"), box=True,
                  hover=f"{f.f} {f.start_s:.1f}–{f.end_s:.1f} s, ended by {f.ended_by}")


def _markers(panels: list[Panel], tl: Timeline) -> None:
    last = -math.inf  # the x of the last labelled marker: vertical labels closer than 12 px overlap
    for m in sorted(tl.markers, key=lambda m: m["t"]):
        colour = "#c62828" if m["f"] == "nemesis-error" else "#2e7d32"
        for i, p in enumerate(panels):
            p.vline(m["t"], colour, f"{m['label']} at {m['t']:.1f} s" if i == 0 else "")
        x = panels[0].x(m["t"])
        if x - last >= 12:
            panels[0].label(m["t"] - 0.002 * tl.duration_s, 0.5, m["label"], colour, anchor="middle", vertical=True, size=10)
            last = x


def timeline_chart(tl: Timeline) -> Markup:
    """Throughput of each operation by outcome (one row per operation), latency p50/p99 per
    operation (log scale), consumer lag; faults as bands over every row."""
    s, width = rebin(tl.seconds, tl.bin_s)
    unit = "s" if tl.bin_s == 1 else f"{tl.bin_s} s bin"
    shown = "" if width == tl.bin_s else f"; drawn in {width:g} s columns"
    ops = [op for op in ("send", "poll", "txn") if f"{op}_ok" in s] or [None]
    x = s["t"].to_numpy(dtype=float)
    mid = x + width / 2
    xdom = (0.0, max(tl.duration_s, float(x[-1] + width) if len(x) else 1.0))
    pw = W - LEFT - RIGHT
    panels, legend, top = [], [], 26
    for op in ops:
        cols = [f"{op}_{n}" if op else n for n in ("ok", "fail", "info")]
        total = s[cols].fillna(0).sum(axis=1)
        p = Panel(LEFT, top, pw, 130, xdom, (0, max(float(total.max()) if len(total) else 1, 1) * 1.05))
        p.frame(f"{op + 's' if op else 'operations'} completed per second, by outcome (per {unit}{shown})",
                ylabel=f"{op or 'op'}s/s", xticks=False)
        p.bars(x, width, [(TYPE_COLOURS[n], s[c].fillna(0).to_numpy()) for n, c in zip(("ok", "fail", "info"), cols)])
        panels.append(p)
        top += 130 + 34
    legend += [(TYPE_COLOURS[n], "box", n) for n in ("ok", "fail", "info")]
    lat_cols = [c for c in s.columns if c.endswith(("p50_ms", "p99_ms")) and (c.split("_")[0] in ops or None in ops)]
    lat_vals = s[lat_cols].to_numpy(dtype=float) if lat_cols else np.array([[1.0]])
    pos = lat_vals[np.isfinite(lat_vals) & (lat_vals > 0)]
    lo, hi = (float(pos.min()), float(pos.max())) if len(pos) else (1.0, 10.0)
    lat = Panel(LEFT, top, pw, 170, xdom, (10 ** math.floor(math.log10(lo)), 10 ** math.ceil(math.log10(hi) + 1e-9)), ylog=True)
    lat.frame("latency, invoke → completion, by operation (ms, log scale)", ylabel="ms", xticks=False)
    for op in ops:
        for q, colour, dash in (("p50", LATENCY.get(op or "send")[0], ""), ("p99", LATENCY.get(op or "send")[1], "3 3")):
            col = f"{op}_{q}_ms" if op else f"{q}_ms"
            if col in s:
                lat.line(mid, s[col].to_numpy(dtype=float), colour, dash)
                legend.append((colour, "line", f"{op or 'all'} {q}"))
    panels.append(lat)
    top += 170 + 34
    lag_hi = max([float(s[c].max()) for c in ("lag_p50", "lag_max") if c in s and s[c].notna().any()] or [1.0])
    lag = Panel(LEFT, top, pw, 110, xdom, (0, max(lag_hi, 1) * 1.05))
    lag.frame("consumer lag: highest acknowledged offset − offset read (records)", "seconds since run start", "records")
    for name, colour in (("lag_p50", "#17becf"), ("lag_max", "#8c564b")):
        if name in s:
            lag.line(mid, s[name].to_numpy(dtype=float), colour)
            legend.append((colour, "line", name.replace("lag_", "lag ")))
    panels.append(lag)
    _bands(panels, tl)
    _markers(panels, tl)
    legend += [(FAULT_COLOURS.get(f, "#888"), "box", f"fault: {f}") for f in dict.fromkeys(f.f for f in tl.faults)]
    return chart("plot-timeline", W, top + 110 + 40, panels, legend,
                 "timeline: throughput, latency and consumer lag, faults as bands")


def _offset_view(tl: Timeline, key: int, points: dict[str, pd.DataFrame], w: pd.DataFrame, r: pd.DataFrame,
                 xr: tuple[float, float] | None, yr: tuple[float, float] | None, title: str, div_id: str,
                 cap: int = SVG_POINTS) -> Markup:
    xdom = xr or (0.0, max(tl.duration_s, 1.0))
    if xr:
        w, r = w[w["t"].between(*xr)], r[r["t"].between(*xr)]
    if yr:
        w, r = w[w["offset"].between(*yr)], r[r["offset"].between(*yr)]
    w, r = sample(w, cap), sample(r, cap)
    mine = [(n, p[p["key"] == key]) for n, p in points.items()]
    offs = pd.concat([w["offset"], r["offset"], *[p["offset"] for _, p in mine]]).dropna()
    ydom = yr or ((float(offs.min()), float(offs.max())) if len(offs) else (0.0, 1.0))
    pad = (ydom[1] - ydom[0]) * 0.04 + 0.5
    p = Panel(LEFT, 26, W - LEFT - RIGHT, 270, xdom, (ydom[0] - pad, ydom[1] + pad))
    p.frame(title, "seconds since run start", "offset")
    fault_bands(p, tl.faults, 0.12)
    p.dots(w["t"].to_numpy(), w["offset"].to_numpy(), "#9ccc65", 4)
    p.dots(r["t"].to_numpy(), r["offset"].to_numpy(), "#64b5f6", 3)
    legend = [("#9ccc65", "dot", "written (acked)"), ("#64b5f6", "dot", "read")]
    for name, pts in mine:
        if pts.empty:
            continue
        symbol, colour, label = MARK.get(name, ("circle", "#000", name))
        p.marks(pts["t"].to_numpy(dtype=float), pts["offset"].to_numpy(dtype=float), symbol, colour,
                [f"{t}\n{x:.3f} s" for t, x in zip(pts["text"], pts["t"])])
        legend.append((colour, "box", label))
    return chart(div_id, W, 340, [p], legend, title)


def offset_chart(tl: Timeline, key: int, points: dict[str, pd.DataFrame], div_id: str) -> Markup:
    """Where values of partition `key` were written (acknowledged), read, and where the anomalies
    are (hover a mark for the operation or the explained example's sentence): zoomed on the
    anomaly, with the whole run in a <details> below."""
    w = tl.writes[tl.writes["key"] == key]
    r = tl.reads[tl.reads["key"] == key]
    span = max(5.0, tl.duration_s * 0.02)
    xr, yr = zoom(points, key, span)
    if xr is None and yr is None:
        return _offset_view(tl, key, points, w, r, None, None, f"partition {key}: offset over time", div_id)
    zoomed = _offset_view(tl, key, points, w, r, xr, yr,
                          f"partition {key}: offset over time (zoomed on the anomaly; the whole run below)", div_id)
    whole = _offset_view(tl, key, points, w, r, None, None, f"partition {key}: offset over the whole run", div_id + "-all",
                         SVG_POINTS_WHOLE)
    return Markup(f'{zoomed}<details><summary class="muted">partition {escape(key)}: the whole run</summary>{whole}</details>')
