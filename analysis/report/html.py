"""The page shell shared by the run report and the dashboard: one Jinja2 environment (templates
kept as Python strings so they ship with the package without package-data), the inline CSS, and a
small self-check script whose findings (JavaScript errors, charts drawn, network resources
requested, load time) are written into the DOM for headless tests.

Charts are static SVG inside the page (analysis/report/svg.py): a page is one small file that
draws with no script and no other file. Plotly's JavaScript (~4.7 MB) is inlined only into an
interactive page (`report --inline`), and then once."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from analysis.report.svg import CSS as CHART_CSS

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;background:#f5f6f8;font-size:14px}
main{max-width:1360px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:20px;margin:4px 0 12px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d5d9e0;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.card{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:12px 16px;margin:10px 0}
.verdict{display:flex;gap:24px;align-items:center;flex-wrap:wrap}
.badge{font-size:26px;font-weight:700;padding:8px 18px;border-radius:8px;color:#fff;text-transform:uppercase;letter-spacing:.04em}
.valid{background:#1b8a3a}.invalid{background:#c62828}.unknown{background:#d98c00}.stale{background:#7c3aed}.unchecked{background:#6b7280}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;font-weight:600}
.num{font-size:28px;font-weight:700;line-height:1}.numlabel{font-size:12px;color:#5b6472;text-transform:uppercase}
.num.bad{color:#c62828}.num.ok{color:#1b8a3a}.num.allowed{color:#d98c00}
.hl{display:flex;gap:28px}.hl div{text-align:center}
table{border-collapse:collapse;width:100%;font-size:13px;background:#fff}
th,td{border-bottom:1px solid #e4e7ec;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef0f4;position:sticky;top:0}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.facts td:first-child{color:#5b6472;width:190px;white-space:nowrap}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px}
pre{background:#f0f2f5;padding:8px;border-radius:6px;white-space:pre-wrap;word-break:break-all;margin:4px 0}
.muted{color:#6b7280}.warn{background:#fff7e0;border-color:#f0c36d}.err{background:#fdecec;border-color:#f2a5a5}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:12px}
a{color:#1f5fbf}
"""

# Runs first in <head>: records errors before any other script can throw.
SELFCHECK_HEAD = """
window.__khErrors=[];
window.addEventListener('error',function(e){window.__khErrors.push(String(e.message||e));});
window.addEventListener('unhandledrejection',function(e){window.__khErrors.push('unhandled rejection: '+String(e.reason));});
"""
# Runs at the end of <body>: writes the findings into #kh-selfcheck (read by tests via --dump-dom).
SELFCHECK_TAIL = """
(function(){
  function report(){
    var el=document.getElementById('kh-selfcheck'); if(!el) return;
    var res=(performance.getEntriesByType?performance.getEntriesByType('resource'):[]).map(function(r){return r.name;});
    el.setAttribute('data-errors',JSON.stringify(window.__khErrors));
    var charts=document.querySelectorAll('.kh-chart,.js-plotly-plot');
    el.setAttribute('data-plots',String(charts.length));
    el.setAttribute('data-drawn',String(Array.prototype.filter.call(charts,function(p){return p.querySelector('svg');}).length));
    el.setAttribute('data-resources',JSON.stringify(res));
    var nav=performance.getEntriesByType?performance.getEntriesByType('navigation')[0]:null;
    if(nav) el.setAttribute('data-loadms',String(Math.round(nav.loadEventEnd||nav.domComplete)));
    el.setAttribute('data-done','1');
  }
  window.addEventListener('load',function(){setTimeout(report,300);});
})();
"""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<script>{{ selfcheck_head }}</script>
<style>{{ css }}</style>
{% if plotlyjs %}<script>{{ plotlyjs }}</script>
{% endif %}</head><body><main>
{{ body }}
</main>
<div id="kh-selfcheck" hidden></div>
<script>{{ selfcheck_tail }}</script>
</body></html>
"""

PLOT_CONFIG = {"displaylogo": False, "responsive": True, "showTips": False, "showSendToCloud": False,
               "modeBarButtonsToRemove": ["sendDataToCloud", "lasso2d", "select2d", "editInChartStudio"]}


@functools.lru_cache(maxsize=1)
def env() -> jinja2.Environment:
    e = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    e.filters["fmt"] = fmt
    return e


@functools.lru_cache(maxsize=1)
def _plotlyjs() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def fmt(x: Any) -> str:
    """Numbers as an SRE reads them: thousands separated, short floats."""
    if isinstance(x, bool) or x is None:
        return "—" if x is None else ("yes" if x else "no")
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"
    return str(x)


def figure_html(fig: Any, div_id: str) -> Markup:
    """A Plotly figure as a <div> + <script> (no Plotly bundle: an interactive page carries it once)."""
    return Markup(fig.to_html(include_plotlyjs=False, full_html=False, config=PLOT_CONFIG,
                                     div_id=div_id, include_mathjax=False))


def page(title: str, body: str, plotly: bool = False) -> str:
    """The whole page; with `plotly`, Plotly's JavaScript inlined once (for figure_html's figures)."""
    t = env().from_string(PAGE)
    return t.render(title=title, body=Markup(body), css=Markup(CSS + CHART_CSS),
                    plotlyjs=Markup(_plotlyjs()) if plotly else "", selfcheck_head=Markup(SELFCHECK_HEAD),
                    selfcheck_tail=Markup(SELFCHECK_TAIL))


def write_atomic(path: Path, text: str) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
