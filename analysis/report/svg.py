"""A tiny SVG plotter for the reports: panels with linear or log axes, stacked bars, lines,
point clouds, shaded bands and labelled markers, written as static SVG text in Python.

Why static SVG rather than a JavaScript chart library: a report must open and draw anywhere,
copied on its own, offline, with scripts blocked (a mail client, a CI artifact viewer). SVG drawn
here needs nothing else: no script, no shared asset. Hover text is SVG's own `<title>` (the
browser's tooltip). Sizes stay bounded: point clouds are one `<path>` per series (a dot is
`M x y h0` with a round cap, ~12 bytes), bars are re-binned to at most `MAX_COLUMNS` columns.
Interactive Plotly pages remain available as `report --inline` (analysis/report/figures.py).
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from markupsafe import Markup, escape

MAX_COLUMNS = 480  # bars/lines drawn per panel at most (a 1200 px chart shows no more)
FONT = 'font-family="system-ui,-apple-system,Segoe UI,Roboto,sans-serif"'


def _n(v: float) -> str:
    """A coordinate with one decimal at most (the file's size is mostly coordinates)."""
    r = round(v, 1)
    return str(int(r)) if r == int(r) else f"{r:.1f}"


def nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    """About `n` round tick values covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else [0.0]
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def tick_text(v: float, pct: bool = False) -> str:
    if pct:
        return f"{v * 100:.0f}%"
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


class Panel:
    """One plot area at (left, top) of `width` × `height` pixels inside a chart, mapping data
    coordinates (x domain, y domain; y optionally log10) to pixels. Parts accumulate in `parts`."""

    def __init__(self, left: float, top: float, width: float, height: float,
                 xdom: tuple[float, float], ydom: tuple[float, float], ylog: bool = False) -> None:
        self.left, self.top, self.w, self.h = left, top, width, height
        self.ylog = ylog
        x0, x1 = xdom
        self.xdom = (x0, x1 if x1 > x0 else x0 + 1)
        y0, y1 = ydom
        if ylog:
            y0, y1 = math.log10(max(y0, 1e-9)), math.log10(max(y1, 1e-9))
        self.ydom = (y0, y1 if y1 > y0 else y0 + 1)
        self._framed = 0
        self.parts: list[str] = []  # the frame, then the data
        self.under: list[str] = []  # bands: drawn after the frame, below the data
        self.over: list[str] = []  # labels: drawn last, above everything

    def svg(self) -> str:
        return "".join(self.parts[:self._framed] + self.under + self.parts[self._framed:] + self.over)

    def x(self, v: float) -> float:
        return self.left + (v - self.xdom[0]) / (self.xdom[1] - self.xdom[0]) * self.w

    def y(self, v: float) -> float:
        if self.ylog:
            v = math.log10(max(v, 1e-9))
        return self.top + self.h - (v - self.ydom[0]) / (self.ydom[1] - self.ydom[0]) * self.h

    def inside_x(self, v: float) -> bool:
        return self.xdom[0] <= v <= self.xdom[1]

    def inside(self, x: float, y: float) -> bool:
        yy = math.log10(max(y, 1e-9)) if self.ylog else y
        return self.inside_x(x) and self.ydom[0] <= yy <= self.ydom[1]

    # ------------------------------------------------------------------ furniture
    def frame(self, title: str = "", xlabel: str = "", ylabel: str = "", xticks: bool = True,
              pct: bool = False, xcats: Sequence[str] | None = None) -> None:
        """Grid, tick labels, axis titles and the panel's title."""
        p = self.parts
        self._framed = 0
        p.append(f'<rect x="{_n(self.left)}" y="{_n(self.top)}" width="{_n(self.w)}" height="{_n(self.h)}" fill="#fff" stroke="#d5d9e0"/>')
        if self.ylog:
            yt = [10.0 ** e for e in range(math.floor(self.ydom[0]), math.ceil(self.ydom[1]) + 1)
                  if self.ydom[0] - 1e-9 <= e <= self.ydom[1] + 1e-9]
        else:
            yt = nice_ticks(*self.ydom, n=4)
        for v in yt:
            yy = self.y(v)
            p.append(f'<line x1="{_n(self.left)}" x2="{_n(self.left + self.w)}" y1="{_n(yy)}" y2="{_n(yy)}" stroke="#eee"/>'
                     f'<text x="{_n(self.left - 4)}" y="{_n(yy + 4)}" text-anchor="end" font-size="11" fill="#555">{tick_text(v, pct)}</text>')
        if xcats is not None:
            xs = [(i, c) for i, c in enumerate(xcats)]
            longest = max((len(c) for c in xcats), default=1)
            step = max(1, math.ceil(len(xs) / max(1, self.w // (longest * 6.5 + 14))))  # labels never overlap
            xs = xs[::step]
        else:
            xs = [(v, tick_text(v)) for v in nice_ticks(*self.xdom, n=10)]
        for v, label in xs:
            xx = self.x(v)
            p.append(f'<line x1="{_n(xx)}" x2="{_n(xx)}" y1="{_n(self.top)}" y2="{_n(self.top + self.h)}" stroke="#eee"/>')
            if xticks:
                p.append(f'<text x="{_n(xx)}" y="{_n(self.top + self.h + 14)}" text-anchor="middle" font-size="11" fill="#555">{escape(label)}</text>')
        if title:
            p.append(f'<text x="{_n(self.left)}" y="{_n(self.top - 6)}" font-size="13" fill="#1d2330">{escape(title)}</text>')
        if xlabel:
            p.append(f'<text x="{_n(self.left + self.w / 2)}" y="{_n(self.top + self.h + 30)}" text-anchor="middle" font-size="12" fill="#333">{escape(xlabel)}</text>')
        if ylabel:
            cy = self.top + self.h / 2
            p.append(f'<text x="{_n(self.left - 46)}" y="{_n(cy)}" transform="rotate(-90 {_n(self.left - 46)} {_n(cy)})" '
                     f'text-anchor="middle" font-size="12" fill="#333">{escape(ylabel)}</text>')
        self._framed = len(p)

    def band(self, x0: float, x1: float, colour: str, opacity: float, hover: str = "") -> None:
        """A shaded vertical band from x0 to x1 (clipped to the panel)."""
        a, b = max(x0, self.xdom[0]), min(x1, self.xdom[1])
        if b <= a:
            return
        tip = f"<title>{escape(hover)}</title>" if hover else ""
        self.under.append(f'<rect x="{_n(self.x(a))}" y="{_n(self.top)}" width="{_n(max(self.x(b) - self.x(a), 1))}" '
                          f'height="{_n(self.h)}" fill="{colour}" fill-opacity="{opacity}">{tip}</rect>')

    def bands(self, spans: Sequence[tuple[float, float]], colour: str, opacity: float, hover: str = "") -> None:
        """Many shaded vertical bands as one path with one hover text: ~25 bytes a band, where a
        rect with its own title is ~200 (a long run draws hundreds per panel)."""
        d = []
        for x0, x1 in spans:
            a, b = max(x0, self.xdom[0]), min(x1, self.xdom[1])
            if b > a:
                d.append(f"M{_n(self.x(a))} {_n(self.top)}h{_n(max(self.x(b) - self.x(a), 1))}v{_n(self.h)}H{_n(self.x(a))}z")
        if d:
            tip = f"<title>{escape(hover)}</title>" if hover else ""
            self.under.append(f'<path d="{"".join(d)}" fill="{colour}" fill-opacity="{opacity}">{tip}</path>')

    def vline(self, x: float, colour: str, hover: str = "") -> None:
        if not self.inside_x(x):
            return
        tip = f"<title>{escape(hover)}</title>" if hover else ""
        self.over.append(f'<line x1="{_n(self.x(x))}" x2="{_n(self.x(x))}" y1="{_n(self.top)}" y2="{_n(self.top + self.h)}" '
                         f'stroke="{colour}" stroke-dasharray="2 3">{tip}</line>')

    def label(self, x: float, y_frac: float, text: str, colour: str = "#555", anchor: str = "start",
              vertical: bool = False, hover: str = "", size: int = 11, box: bool = False) -> None:
        """Text at data x and a fraction of the panel's height from its top (0 = top)."""
        if not self.inside_x(x):
            return
        xx, yy = self.x(x) + (0 if vertical else 2 if anchor == "start" else 0), self.top + y_frac * self.h
        if anchor == "start" and not vertical and xx + len(text) * size * 0.56 > self.left + self.w:
            anchor, xx = "end", self.left + self.w - 2  # would run past the right edge: end it there
        rot = f' transform="rotate(-90 {_n(xx)} {_n(yy)})"' if vertical else ""
        tip = f"<title>{escape(hover)}</title>" if hover else ""
        halo = ' paint-order="stroke" stroke="#fff" stroke-width="3"' if box else ""
        self.over.append(f'<text x="{_n(xx)}" y="{_n(yy)}" text-anchor="{anchor}" font-size="{size}" fill="{colour}"{halo}{rot}>'
                         f'{tip}{escape(text)}</text>')

    # ------------------------------------------------------------------ data
    def bars(self, xs: Sequence[float], width: float, stacks: Sequence[tuple[str, Sequence[float]]]) -> None:
        """Stacked bars at `xs` (left edges), `width` data units wide: one path per series."""
        base = [0.0] * len(xs)
        wpx = max(self.x(self.xdom[0] + width) - self.x(self.xdom[0]), 0.5)
        for colour, ys in stacks:
            d = []
            for i, (x, v) in enumerate(zip(xs, ys)):
                if not v or v != v or not self.inside_x(x):
                    continue
                y0, y1 = self.y(base[i]), self.y(base[i] + v)
                d.append(f"M{_n(self.x(x))} {_n(y0)}h{_n(wpx)}V{_n(y1)}h-{_n(wpx)}z")
                base[i] += v
            if d:
                self.parts.append(f'<path fill="{colour}" d="{"".join(d)}"/>')

    def line(self, xs: Sequence[float], ys: Sequence[float], colour: str, dash: str = "", width: float = 1.5) -> None:
        """A polyline, broken where y is missing (NaN/None) or out of a log axis's range."""
        d, pen = [], False
        for x, v in zip(xs, ys):
            if v is None or v != v or (self.ylog and v <= 0) or not self.inside_x(x):
                pen = False
                continue
            d.append(f"{'L' if pen else 'M'}{_n(self.x(x))} {_n(self.y(v))}")
            pen = True
        if d:
            da = f' stroke-dasharray="{dash}"' if dash else ""
            self.parts.append(f'<path fill="none" stroke="{colour}" stroke-width="{width}"{da} d="{"".join(d)}"/>')

    def dots(self, xs: Iterable[float], ys: Iterable[float], colour: str, size: float = 3.5) -> None:
        """Many small dots as one path (hover text would cost a node per dot: none here), at
        whole-pixel positions, one per pixel."""
        px = dict.fromkeys((round(self.x(x)), round(self.y(y))) for x, y in zip(xs, ys) if self.inside(x, y))
        d = [f"M{a} {b}h0" for a, b in px]  # whole pixels, each drawn once: a dense run costs no more
        if d:
            self.parts.append(f'<path fill="none" stroke="{colour}" stroke-width="{size}" stroke-linecap="round" d="{"".join(d)}"/>')

    def marks(self, xs: Sequence[float], ys: Sequence[float], symbol: str, colour: str,
              hovers: Sequence[str], size: float = 6.0) -> None:
        """Few large marks, each with its own hover text."""
        for x, y, tip in zip(xs, ys, hovers):
            if x != x or y != y or not self.inside(x, y):
                continue
            self.parts.append(f'<g>{"<title>" + escape(tip) + "</title>" if tip else ""}'
                              f'{symbol_path(symbol, self.x(x), self.y(y), size, colour)}</g>')


def symbol_path(symbol: str, cx: float, cy: float, r: float, colour: str) -> str:
    """One marker: x, diamond, square, triangle-down/right, star, circle; `-open` = not filled."""
    shape = symbol.removesuffix("-open")
    fill = "none" if symbol.endswith("-open") or shape == "x" else colour
    c = f'fill="{fill}" stroke="{colour}" stroke-width="2"'
    if shape == "x":
        return f'<path {c} d="M{_n(cx - r)} {_n(cy - r)}L{_n(cx + r)} {_n(cy + r)}M{_n(cx - r)} {_n(cy + r)}L{_n(cx + r)} {_n(cy - r)}"/>'
    pts = {"diamond": [(0, -1), (1, 0), (0, 1), (-1, 0)], "square": [(-.8, -.8), (.8, -.8), (.8, .8), (-.8, .8)],
           "triangle-down": [(-1, -.8), (1, -.8), (0, .9)], "triangle-right": [(-.8, -1), (.9, 0), (-.8, 1)],
           "star": [(math.cos(a) * (1 if i % 2 == 0 else .45), math.sin(a) * (1 if i % 2 == 0 else .45))
                    for i, a in enumerate(-math.pi / 2 + k * math.pi / 5 for k in range(10))]}.get(shape)
    if pts is None:
        return f'<circle {c} cx="{_n(cx)}" cy="{_n(cy)}" r="{_n(r * .8)}"/>'
    return f'<path {c} d="M' + "L".join(f"{_n(cx + px * r)} {_n(cy + py * r)}" for px, py in pts) + 'z"/>'


def chart(div_id: str, width: int, height: int, panels: Sequence[Panel], legend: Sequence[tuple[str, str, str]] = (),
          caption: str = "", extra: str = "") -> Markup:
    """The chart as a <figure class="kh-chart"> holding one <svg> and an HTML legend
    (colour, marker style 'box'/'line'/'dot', label)."""
    body = "".join(p.svg() for p in panels)
    items = "".join(f'<span><i class="{style}" style="background:{colour};border-color:{colour}"></i>{escape(label)}</span>'
                    for colour, style, label in legend)
    return Markup(f'<figure class="kh-chart" id="{escape(div_id)}">'
                  f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" {FONT} role="img">'
                  f'{f"<title>{escape(caption)}</title>" if caption else ""}{body}</svg>'
                  f'{f"<div class=kh-legend>{items}</div>" if items else ""}{extra}</figure>')


CSS = """
.kh-chart{margin:0}.kh-chart svg{display:block;max-width:100%;height:auto}
.kh-legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;color:#333;margin:4px 0 0 64px}
.kh-legend i{display:inline-block;width:12px;height:10px;margin-right:5px;vertical-align:middle;border:1px solid}
.kh-legend i.line{height:0;border-width:1.5px 0 0 0;width:16px;background:none!important}
.kh-legend i.dot{width:8px;height:8px;border-radius:50%}
"""
