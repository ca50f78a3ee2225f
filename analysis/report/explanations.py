"""The report's rendering of explained examples (analysis/explain/explanations.py's facts): the sentence, a
table of the context with UTC beside every run-relative time, and the broker log lines quoted
whole — a long line is cut at a word, the rest one click away in a <details>."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from markupsafe import Markup

from analysis.report import html
from analysis.explain.text import clip
from harness.history.record import RecordLike, as_record

CLIP = 220  # characters of a log line shown before "…" (the rest in a <details>)
# Characters of a line's rest shown in its <details>; beyond that the file and line number say where
# the whole of it is. The 4.4.0 campaign's seed 5 quoted a 3,809-character fetcher line ~200 times,
# whole, twice each: 1.17 MB of report, over issue 34's 1 MB.
REST_MAX = 1_000

EXPLAINED = """
{% for x in items %}
<div class="card explain" id="explain-{{ name }}-{{ loop.index }}">
  <div class="sentence"><b>{{ loop.index }}.</b> {{ x.sentence }}</div>
  <table class="facts">
  {% for k, v in x.rows %}<tr><td>{{ k }}</td><td>{{ v }}</td></tr>{% endfor %}
  </table>
  {% if x.logs %}
  <details{% if loop.first %} open{% endif %}><summary>broker log lines about {{ x.partition }} within ±2 s ({{ x.logs|length }}{% if x.more %} of {{ x.logs|length + x.more }}{% endif %})</summary>
  <div class="logs">
  {% for l in x.logs %}<div class="logline"><span class="muted">broker {{ l.broker }} · {{ l.file }}:{{ l.line }}</span><br><code>{{ l.head }}</code>{% if l.rest %}<span class="muted">…</span>
    <details class="more"><summary>rest of the line ({{ l.rest|length }} characters)</summary><code>{{ l.shown }}</code>{% if l.cut %}<span class="muted"> … {{ l.cut }} more characters in {{ l.file }} line {{ l.line }}</span>{% endif %}</details>{% endif %}</div>
  {% endfor %}
  </div>
  {% if x.more %}<div class="muted">{{ x.more }} more line(s) in the same window: see the broker logs below.</div>{% endif %}
  </details>
  {% elif x.logs_note %}<div class="muted">{{ x.logs_note }}</div>{% endif %}
</div>
{% endfor %}
"""

CSS = """
.explain .sentence{font-size:14px;margin:2px 0 8px;line-height:1.45}
.explain td:first-child{color:#5b6472;width:190px;white-space:nowrap}
.logs{max-height:420px;overflow:auto;background:#f7f8fa;border-radius:6px;padding:6px 8px}
.logline{margin:4px 0;word-break:break-word}.logline code{white-space:pre-wrap}
details.more summary{font-size:12px;color:#1f5fbf;cursor:pointer}
"""


def _t(x: dict[str, Any] | None, key_s: str = "t_s", key_utc: str = "utc") -> str:
    if not x or x.get(key_s) is None:
        return "—"
    return f"t={x[key_s]:.3f} s · {x.get(key_utc) or 'UTC unknown'}"


def _faults(fs: list[dict[str, Any]]) -> str:
    if not fs:
        return "none"
    return "; ".join(f"{f['label']}, from {_t(f, 'from_s', 'from_utc')} to {_t(f, 'to_s', 'to_utc')} (ended by {f['ended_by']})"
                     for f in fs)


def _reads(rs: list[dict[str, Any]]) -> str:
    return "; ".join(f"value {r['value']} (epoch {r['epoch'] if r.get('epoch') is not None else '?'}, process "
                     f"{r['process']}, {_t(r)})" for r in rs) or "nothing"


def rows(x: dict[str, Any]) -> list[tuple[str, str]]:
    out = [("partition · offset · value", " · ".join(html.fmt(x.get(k)) if k != "partition" else str(x.get(k)) for k in ("partition", "offset", "value")))]
    inv, done = x.get("invoke"), x.get("completion")
    if inv:
        out.append(("invoked", f"{_t(inv)} · process {inv.get('process')}"))
    if done:
        out.append(("completed", f"{done.get('type')} {_t(done)}" + (f" · error {done['error']}" if done.get("error") else "")))
    if not inv and not done:
        at = x.get("at") or {}
        out.append(("when", f"{_t(at, 'from_s', 'from_utc')} to {_t(at, 'to_s', 'to_utc')}"))
    out.append(("faults at invoke", _faults(x.get("faults_at_invoke") or [])))
    out.append(("faults at completion", _faults(x.get("faults_at_completion") or [])))
    ld = x.get("leader")
    if ld:
        who = (f"broker {ld['broker']} as of {ld.get('as_of_utc') or '?'} (from {ld.get('broker_source')})"
               if ld.get("broker") is not None else "broker unknown")
        ep = ("leader epoch unknown (no acknowledged write read back with its epoch)" if ld.get("epoch") is None else
              f"leader epoch {ld['epoch']}" + (f" (the write acknowledged just before, offset {ld['epoch_before']['offset']}, "
                                              f"{_t(ld['epoch_before'])}, was read back in that epoch)" if ld.get("epoch_before") else ""))
        after = ld.get("epoch_after")
        out.append(("leader", f"{who}; {ep}" + (f"; next known: epoch {after['epoch']} at {_t(after)}" if after else "")))
    if "read_at_offset" in x:
        out.append((f"read at offset {x.get('offset')}", _reads(x.get("read_at_offset") or [])))
    near = x.get("nearest_reads") or {}
    if near:
        out.append(("nearest reads", "; ".join(f"{side}: offset {r['offset']}, value {r['value']} (epoch {r.get('epoch')})"
                                               for side, r in near.items() if r) or "none"))
    if x.get("max_read"):
        out.append(("highest offset read", f"{x['max_read']['offset']}, first at {_t(x['max_read'])}"))
    return out


def render(name: str, explained: list[dict[str, Any]], clock: dict[str, Any] | None) -> Markup:
    """The explained examples of one anomaly as HTML."""
    items = []
    for x in explained:
        logs = []
        for line in x.get("log_lines") or []:
            head, rest = clip(line["text"], CLIP)
            shown, more = clip(rest, REST_MAX) if rest else ("", "")
            logs.append({**line, "head": head, "rest": rest, "shown": shown, "cut": len(more)})
        note = ("no broker log line names this partition within ±2 s" if clock and clock.get("start_utc")
                else "no broker log lines: the run's wall-clock start is unknown")
        items.append({"sentence": x.get("sentence", ""), "rows": rows(x), "logs": logs, "more": x.get("log_lines_more") or 0,
                      "partition": x.get("partition"), "logs_note": note})
    return Markup(html.env().from_string(EXPLAINED).render(name=name, items=items))


def explanations(run_dir: Path, results: dict[str, Any] | None, config: RecordLike
                 ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any] | None, str | None]:
    """The explained examples by anomaly, the clock, and a problem to show (or None): from
    results.json's "explanations" when the check wrote them, else worked out now from the
    examples (results of an older check, or of another checker)."""
    from analysis.explain import explanations as explain
    if not results:
        return {}, None, None
    got = results.get("explanations")
    if not isinstance(got, dict) or "examples" not in got:
        try:
            got = explain.explain(run_dir, results.get("examples") or {}, config, drain=results.get("drain"))
        except Exception as exc:  # context only: the page (and its verdict) renders without it
            return {}, None, f"the anomaly examples could not be explained: {type(exc).__name__}: {exc}"
    problem = f"the anomaly examples could not be explained: {got['error']}" if got.get("error") else None
    return got.get("examples") or {}, got.get("clock"), problem


def no_faults(config: RecordLike, tl: Any) -> bool:
    """True when the run is known to be fault-free: config.json names no nemesis and the history
    holds no nemesis event."""
    if config is None or as_record(config).nemesis:
        return False
    return tl is None or (not tl.faults and not [m for m in tl.markers if m["f"] != "heal"])


TABLES = """
{% if ops %}
<h3 id="sec-ops">Operations by outcome</h3>
<table class="card"><tr><th>operation</th><th>outcome</th><th class="n">count</th><th class="n">per second</th>
<th class="n">latency p50 (ms)</th><th class="n">p99 (ms)</th><th class="n">max (ms)</th></tr>
{% for r in ops %}<tr><td>{{ r.op }}</td><td>{{ r.outcome }}</td><td class="n">{{ r.count|fmt }}</td><td class="n">{{ r.per_s|fmt }}</td>
<td class="n">{{ r.p50_ms|fmt }}</td><td class="n">{{ r.p99_ms|fmt }}</td><td class="n">{{ r.max_ms|fmt }}</td></tr>{% endfor %}
</table>
{% endif %}
<h3 id="sec-errors">Client errors</h3>
{% if errors %}
<table class="card"><tr><th>error</th><th class="n">count</th><th>first</th><th>last</th><th>on</th></tr>
{% for e in errors %}<tr><td><code>{{ e.name }}</code></td><td class="n">{{ e.count|fmt }}</td><td>{{ e.first }}</td><td>{{ e.last }}</td><td class="muted">{{ e.ops }}</td></tr>{% endfor %}
</table>
{% else %}<div class="card muted">No operation recorded a client error.</div>{% endif %}
"""


def timeline_tables(tl: Any, run_dir: Path, config: RecordLike) -> Markup:
    """Operations by (operation, outcome) and the client errors table, times with UTC beside."""
    from analysis.explain import explanations as explain
    if tl is None:
        return Markup("")
    clk = explain.clock(run_dir, config, tl.duration_s)

    def at(t: float) -> str:
        return f"t={t:.3f} s · {clk.utc(t) or 'UTC unknown'}"

    errors = [{**e, "first": at(e["first_s"]), "last": at(e["last_s"])} for e in tl.errors]
    return Markup(html.env().from_string(TABLES).render(ops=tl.op_table, errors=errors))
