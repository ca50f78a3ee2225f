"""The report's interactive Plotly figures, drawn only by `report --inline` (one file with Plotly
inlined, for mailing; the default page draws static SVG, analysis/report/charts.py, whose data
helpers these figures share). Built from a `timeline.Timeline` and results.json examples. Every figure carries bounded data (per-second bins; scatter points capped) so the page stays
small whatever the history's size."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.report.charts import FAULT_COLOURS, LATENCY, MARK, MAX_BACKGROUND, TYPE_COLOURS, near, zoom
from analysis.explain.timeline import Timeline


def _bands(fig: go.Figure, tl: Timeline, rows: int, label_row: int = 1) -> None:
    """Each fault as a shaded band over every row; its label at the top of `label_row`."""
    for i, f in enumerate(tl.faults):
        colour = FAULT_COLOURS.get(f.f, "#888888")
        for r in range(1, rows + 1):
            fig.add_vrect(x0=f.start_s, x1=max(f.end_s, f.start_s + 0.05), fillcolor=colour, opacity=0.16,
                          line_width=0, layer="below", row=r, col=1)
        fig.add_annotation(x=f.start_s, y=1.0 - 0.07 * (i % 3), xref="x", yref="y domain", text=f.label,
                           showarrow=False, xanchor="left", yanchor="top", font=dict(size=11, color=colour),
                           bgcolor="rgba(255,255,255,0.8)", row=label_row, col=1,
                           hovertext=f"{f.f} {f.start_s:.1f}–{f.end_s:.1f} s, ended by {f.ended_by}")
    if tl.drain_start_s is not None:
        for r in range(1, rows + 1):
            fig.add_vrect(x0=tl.drain_start_s, x1=tl.duration_s, fillcolor="#9aa0a6", opacity=0.15, line_width=0,
                          layer="below", row=r, col=1)
        fig.add_annotation(x=tl.drain_start_s, y=0.02, xref="x", yref="y domain", text="final drain",
                           showarrow=False, xanchor="left", yanchor="bottom", font=dict(size=11, color="#555"),
                           row=label_row, col=1)
    if tl.start_gap_s is not None:  # the history's clock starts before the cluster is up
        for r in range(1, rows + 1):
            fig.add_vrect(x0=0, x1=tl.start_gap_s, fillcolor="#c9ccd1", opacity=0.25, line_width=0, layer="below", row=r, col=1)
        fig.add_annotation(x=tl.start_gap_s / 2, y=0.5, xref="x", yref="y domain",
                           text=f"cluster starting<br>(no client ops, {tl.start_gap_s:.1f} s)", showarrow=False,
                           font=dict(size=11, color="#555"), row=label_row, col=1)
    for m in tl.markers:
        colour = "#c62828" if m["f"] == "nemesis-error" else "#2e7d32"
        for r in range(1, rows + 1):
            fig.add_vline(x=m["t"], line=dict(color=colour, width=1, dash="dot"), row=r, col=1)
        fig.add_annotation(x=m["t"], y=0.80, xref="x", yref="y domain", text=m["label"], showarrow=False,
                           textangle=-90, xanchor="right", font=dict(size=10, color=colour), row=label_row, col=1)


def timeline_figure(tl: Timeline) -> go.Figure:
    """Throughput of each operation by outcome (one row per operation: sends, polls, txns),
    latency of each operation (p50, p99), consumer lag; faults as bands over every row."""
    s = tl.seconds
    unit = "s" if tl.bin_s == 1 else f"{tl.bin_s} s bin"
    ops = [op for op in ("send", "poll", "txn") if f"{op}_ok" in s] or [None]
    rows = len(ops) + 2
    titles = [f"{op + 's' if op else 'operations'} completed per second, by outcome (per {unit})" for op in ops]
    titles += ["latency, invoke → completion, by operation (ms, log scale)",
               "consumer lag: highest acknowledged offset − offset read (records)"]
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.05, subplot_titles=titles,
                        row_heights=[0.22] * len(ops) + [0.3, 0.2])
    x = s["t"].to_numpy()
    for r, op in enumerate(ops, 1):
        for name in ("ok", "fail", "info"):
            col = f"{op}_{name}" if op else name
            fig.add_trace(go.Bar(x=x, y=s[col].to_numpy(), name=f"{op or 'op'} {name}", marker_color=TYPE_COLOURS[name],
                                 marker_line_width=0, legendgroup=f"tp-{op}", legendgrouptitle_text=f"{op or 'all'} throughput"), r, 1)
        fig.update_yaxes(title_text=f"{op or 'op'}s/s", row=r, col=1)
    lat_row = len(ops) + 1
    for op in ops:
        for q, colour, dash in (("p50", LATENCY.get(op or "send")[0], "solid"), ("p99", LATENCY.get(op or "send")[1], "dot")):
            col = f"{op}_{q}_ms" if op else f"{q}_ms"
            if col in s:
                fig.add_trace(go.Scatter(x=x, y=s[col].to_numpy(), name=f"{op or 'all'} {q}", mode="lines",
                                         line=dict(color=colour, width=1.5, dash=dash), connectgaps=False,
                                         legendgroup="lat", legendgrouptitle_text="latency"), lat_row, 1)
    for name, colour in (("lag_p50", "#17becf"), ("lag_max", "#8c564b")):
        if name in s:
            fig.add_trace(go.Scatter(x=x, y=s[name].to_numpy(), name=name.replace("lag_", "lag "), mode="lines",
                                     line=dict(color=colour, width=1.5), legendgroup="lag",
                                     legendgrouptitle_text="consumer lag"), rows, 1)
    _bands(fig, tl, rows)
    fig.update_layout(barmode="stack", bargap=0, height=260 + 170 * rows, margin=dict(l=60, r=20, t=40, b=40),
                      legend=dict(orientation="v", x=1.01, y=1), hovermode="x unified",
                      plot_bgcolor="#fff", paper_bgcolor="#fff")
    fig.update_yaxes(title_text="ms", type="log", dtick=1, row=lat_row, col=1)
    fig.update_yaxes(title_text="records", rangemode="tozero", row=rows, col=1)
    fig.update_xaxes(title_text="seconds since run start", row=rows, col=1)
    fig.update_xaxes(showgrid=True, gridcolor="#eee")
    fig.update_yaxes(showgrid=True, gridcolor="#eee")
    return fig


def _zoom(fig: go.Figure, points: dict[str, pd.DataFrame], key: int, span: float) -> None:
    """Zoom on the anomalies of partition `key` (report_charts.zoom); double-clicking the plot
    (Plotly's autorange) shows the whole run again."""
    xr, yr = zoom(points, key, span)
    if xr:
        fig.update_xaxes(range=list(xr))
    if yr:
        fig.update_yaxes(range=list(yr))


def offset_figure(tl: Timeline, key: int, points: dict[str, pd.DataFrame]) -> go.Figure:
    """Where values of partition `key` were written (acknowledged), read, and where the anomalies are."""
    times = np.concatenate([p.loc[p["key"] == key, "t"].dropna().to_numpy() for p in points.values()] or [np.array([])])
    span = max(5.0, tl.duration_s * 0.02)
    w = tl.writes[tl.writes["key"] == key]
    r = tl.reads[tl.reads["key"] == key]
    w, r = near(w, times, MAX_BACKGROUND, span), near(r, times, MAX_BACKGROUND, span)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=w["t"].to_numpy(), y=w["offset"].to_numpy(), mode="markers", name="written (acked)",
                             marker=dict(size=4, color="#9ccc65"), hovertemplate="write %{y} at %{x:.3f}s<extra></extra>"))
    fig.add_trace(go.Scatter(x=r["t"].to_numpy(), y=r["offset"].to_numpy(), mode="markers", name="read",
                             marker=dict(size=3, color="#64b5f6"), hovertemplate="read %{y} at %{x:.3f}s<extra></extra>"))
    for name, p in points.items():
        p = p[p["key"] == key]
        if p.empty:
            continue
        symbol, colour, label = MARK.get(name, ("circle", "#000", name))
        fig.add_trace(go.Scatter(x=p["t"].to_numpy(), y=p["offset"].to_numpy(), mode="markers", name=label,
                                 text=[t.replace("\n", "<br>") for t in p["text"]], hovertemplate="%{text}<br>%{x:.3f}s<extra></extra>",
                                 marker=dict(size=13, symbol=symbol, color=colour, line=dict(width=1.5, color=colour))))
    for f in tl.faults:
        fig.add_vrect(x0=f.start_s, x1=max(f.end_s, f.start_s + 0.05), fillcolor=FAULT_COLOURS.get(f.f, "#888"),
                      opacity=0.12, line_width=0, layer="below")
    _zoom(fig, points, key, span)
    fig.update_layout(title=dict(text=f"partition {key}: offset over time (zoomed on the anomaly; double-click for the whole run)"
                                 if fig.layout.xaxis.range or fig.layout.yaxis.range else f"partition {key}: offset over time", font=dict(size=14)), height=380,
                      margin=dict(l=60, r=20, t=40, b=40), plot_bgcolor="#fff", paper_bgcolor="#fff",
                      legend=dict(orientation="h", y=-0.2), xaxis_title="seconds since run start",
                      yaxis_title="offset")
    fig.update_xaxes(showgrid=True, gridcolor="#eee")
    fig.update_yaxes(showgrid=True, gridcolor="#eee")
    return fig
