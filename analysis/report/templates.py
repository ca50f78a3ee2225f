"""Jinja2 templates of the report and the dashboard bodies (strings, so they ship inside the
package; the page shell is in analysis/report/html.py)."""

REPORT = """
<style>{{ extra_css }}</style>
<h1>Kafka chaos run <code>{{ run_id }}</code></h1>
<section class="card verdict" id="sec-verdict">
  <span class="badge {{ verdict }}">{{ 'not checked yet' if verdict == 'unchecked' else verdict }}</span>
  {% if no_faults %}<span class="pill" id="no-faults" style="background:#2e7d32;font-size:14px">no faults were injected</span>{% endif %}
  {% if results %}
  <div class="hl">
  {% for k in ['lost', 'duplicated', 'reordered', 'diverged', 'other'] %}
    <div><div class="num {{ 'bad' if headline.get(k) else 'ok' }}">{{ headline.get(k, 0)|fmt }}</div><div class="numlabel">{{ k }}</div></div>
  {% endfor %}
  </div>
  <div style="flex:1;min-width:280px">
    {% if forbidden %}<div><b>Forbidden by this configuration:</b> {{ forbidden|join(', ') }}</div>{% endif %}
    {% for r in reasons %}<div>• {{ r }}</div>{% endfor %}
    {% if verdict == 'valid' %}<div>Nothing this configuration forbids was found.</div>{% endif %}
    <div class="muted">{{ results.get('history', {}).get('events', 0)|fmt }} events checked{% if results.get('checked_at') %} at {{ results.checked_at }}{% endif %}.</div>
  </div>
  {% else %}
  <div>This run has no <code>results.json</code>. Check it with <pre>{{ check_cmd }}</pre> then render this page again.</div>
  {% endif %}
</section>
<section class="card">
  <b>What the configuration permitted:</b>
  {% if allowed %}{{ allowed|join(', ') }} <span class="muted">(because: {{ rules|join('; ') }})</span>
  {% else %}nothing — every anomaly below counts against Kafka.{% endif %}
  <table style="margin-top:8px"><tr><th>anomaly</th><th class="n">count</th><th>permitted?</th><th>meaning</th></tr>
  {% for c in counts %}
    <tr><td><code>{{ c.name }}</code></td>
      <td class="n">{% if c.count is none %}<span class="muted">—</span>{% elif c.count and not c.allowed %}<b style="color:#c62828">{{ c.count|fmt }}</b>{% else %}{{ c.count|fmt }}{% endif %}</td>
      <td>{{ 'permitted' if c.allowed else 'forbidden' }}</td><td class="muted">{{ c.definition }}</td></tr>
  {% endfor %}
  </table>
</section>
{% for p in problems %}<div class="card warn">⚠ {{ p }}</div>{% endfor %}

<h2 id="sec-facts">Run facts</h2>
<table class="facts card">
{% for k, v in facts %}<tr><td>{{ k }}</td><td>{{ v|fmt }}</td></tr>{% endfor %}
{% if reproduce %}<tr><td>reproduce</td><td><pre>{{ reproduce }}</pre>{% if command %}<span class="muted">as invoked:</span><pre>{{ command }}</pre>{% endif %}</td></tr>{% endif %}
<tr><td>run directory</td><td><code>{{ run_dir }}</code></td></tr>
</table>

<h2 id="sec-timeline">Timeline</h2>
{% if timeline %}
<div class="muted">{{ tl.events|fmt }} events over {{ '%.1f'|format(tl.duration_s) }} s, read from <code>{{ tl.source.split('/')[-1] }}</code>.
Shaded bands are faults, labelled with the fault and its target broker(s) and their roles at the time; grey is the final drain.
{% for n in tl.notes %} Note: {{ n }}.{% endfor %}</div>
{% if tl.faults %}
<table class="card" id="fault-bands"><tr><th>fault</th><th class="n">from (s)</th><th class="n">to (s)</th><th>from, to (UTC)</th><th>ended by</th>
<th class="n" title="the longest stretch of the band with no ok send (or txn with sends)">no ok write (s)</th><th class="n" title="the longest stretch of the band with no ok poll (the final drain left out)">no ok read (s)</th></tr>
{% for f in fault_rows %}{% set g = gap(f) %}<tr><td>{{ f.label }}</td><td class="n">{{ '%.2f'|format(f.start_s) }}</td><td class="n">{{ '%.2f'|format(f.end_s) }}</td><td class="muted">{{ utc(f.start_s) }} – {{ utc(f.end_s) }}</td><td>{{ f.ended_by }}</td>
<td class="n">{{ '%.1f'|format(g.no_write_s) if g and g.no_write_s is not none else '–' }}</td><td class="n">{{ '%.1f'|format(g.no_read_s) if g and g.no_read_s is not none else '–' }}</td></tr>{% endfor %}
</table>
<div class="muted">"No ok write/read": the longest stretch of each band in which no client write (or read) succeeded: did clients notice? (to 0.1 s; docs/checker.md, "Unavailability")</div>
{% if fault_rows|length < tl.faults|length %}<div class="muted">The table shows {{ fault_rows|length }} of {{ tl.faults|length|fmt }} faults: those clients felt most (longest no ok write, then read), in time order.</div>
<details id="all-faults"><summary class="muted">all {{ tl.faults|length|fmt }} faults, one per line (seconds since run start, {{ utc(0) or 'UTC unknown' }}; no ok write / read in s)</summary>
<pre>{% for f in tl.faults %}{% set g = gap(f) %}{{ '%9.2f'|format(f.start_s) }} {{ '%9.2f'|format(f.end_s) }}  {{ f.label }} · {{ f.ended_by }} · {{ '%.1f'|format(g.no_write_s) if g and g.no_write_s is not none else '–' }} / {{ '%.1f'|format(g.no_read_s) if g and g.no_read_s is not none else '–' }}
{% endfor %}</pre></details>{% endif %}
{% else %}<div class="muted">No faults were injected in this run.</div>{% endif %}
<div class="card">{{ timeline }}</div>
{{ timeline_tables }}
{% else %}<div class="card muted">No timeline: the history is missing or unreadable.</div>{% endif %}

<h2 id="sec-anomalies">Anomalies</h2>
{% if not results %}<div class="card muted">Not checked yet: run <code>{{ check_cmd }}</code>.</div>
{% elif not kinds %}<div class="card">No anomaly of any kind was found.</div>{% endif %}
{% for k in kinds %}
<section class="card" id="anomaly-{{ k.name }}">
  <h3><code>{{ k.name }}</code>: {{ k.count|fmt }}
    <span class="pill" style="background:{{ '#d98c00' if k.allowed else '#c62828' }}">{{ 'permitted by this configuration' if k.allowed else 'forbidden' }}</span></h3>
  <div class="muted">{{ k.definition }}. {% if k.shown < k.count %}Showing {{ k.shown }} of {{ k.count|fmt }} examples.{% endif %}</div>
  {% if k.rows %}
  <table><tr><th>partition</th><th>offset(s)</th><th>value(s)</th><th>details</th><th>operations (history index, time, process)</th></tr>
  {% for r in k.rows %}<tr><td>{{ r.key }}</td><td>{{ r.where }}</td><td>{{ r.vals }}</td><td class="muted">{{ r.extra }}</td><td><code>{{ r.ops }}</code></td></tr>{% endfor %}
  </table>
  {% endif %}
  {{ k.explained }}
  {% for p in k.plots %}<div>{{ p }}</div>{% endfor %}
</section>
{% endfor %}

{% if replicas %}
<h2 id="sec-replicas">Replica evidence</h2>
<div class="card">
  <div class="muted">Each replica's log dumped with Kafka's own {{ replicas.tool or 'DumpLogSegments' }} after healing, compared offset by offset
  (topic <code>{{ replicas.topic }}</code>). A replica that is only shorter is lagging, not diverged.</div>
  {% if replicas.diverged %}<div><b style="color:#c62828">Replicas diverged</b>: {{ replicas.diverged_offsets }} offset(s), the first at offset {{ replicas.first_offset }}.</div>
  {% for p, info in replicas.partitions.items() if info.get('explanation') %}<div>{{ info.explanation }}</div>{% endfor %}
  {% else %}<div>Every replica holds the same value at every offset they share.</div>{% endif %}
  <table><tr><th>partition</th><th>diverged</th><th>first offset</th><th>log end offsets (broker: offset)</th><th>first differences (offset: broker → value)</th></tr>
  {% for p, info in replicas.partitions.items() %}<tr><td>{{ p }}</td><td>{{ 'yes' if info.diverged else 'no' }}</td><td class="n">{{ info.first_offset if info.first_offset is not none else '—' }}</td>
  <td>{% for b, o in (info.log_end_offsets or {}).items() %}{{ b }}: {{ o }}{% if not loop.last %}, {% endif %}{% endfor %}</td>
  <td><code>{% for d in info.differences[:5] %}{{ d.offset }}: {{ d['values'] }}{% if not loop.last %}; {% endif %}{% endfor %}</code></td></tr>{% endfor %}
  </table>
</div>
{% endif %}

<h2 id="sec-logs">Broker logs and run files</h2>
{% if files %}
<table class="card"><tr><th>where</th><th>file</th><th class="n">size</th></tr>
{% for f in files %}<tr><td>{{ f.group }}</td><td><a href="{{ f.href }}">{{ f.href }}</a></td><td class="n">{{ f.size }}</td></tr>{% endfor %}
</table>
{% else %}<div class="card muted">No broker logs were collected in this run directory.</div>{% endif %}
<div class="muted" style="margin-top:24px">Generated {{ generated }} by <code>python -m analysis report</code>. The verdict comes from results.json; this page never changes it.</div>
"""

DASHBOARD = """
<h1>Kafka chaos runs <span class="muted" style="font-weight:normal">— {{ store }}</span></h1>
<section class="card verdict">
  {% for v in ['invalid', 'unknown', 'valid', 'stale', 'unchecked'] %}
  <div style="text-align:center"><div class="num" style="color:{{ colours[v] }}">{{ tally.get(v, 0) }}</div><div class="numlabel">{{ 'not checked' if v == 'unchecked' else v }}</div></div>
  {% endfor %}
  <div class="muted" style="flex:1">{{ rows|length }} runs. Click a column header to sort; type to filter (matches any column).</div>
</section>
<div class="card" style="display:flex;gap:12px;align-items:center">
  <input id="filter" type="search" placeholder="filter: version, nemesis, profile, run id…" style="flex:1;padding:6px;font-size:14px">
  <select id="verdict-filter" style="padding:6px"><option value="">any verdict</option>
  {% for v in ['invalid', 'unknown', 'valid', 'stale', 'unchecked'] %}<option value="{{ v }}">{{ v }}</option>{% endfor %}</select>
  <span id="shown" class="muted"></span>
</div>
<table id="runs" class="card">
<thead><tr>
{% for c in columns %}<th class="{{ 'n' if c.num else '' }}" data-col="{{ loop.index0 }}" data-num="{{ 1 if c.num else 0 }}" style="cursor:pointer">{{ c.label }} <span class="arrow"></span></th>{% endfor %}
</tr></thead>
<tbody>
{% for r in rows %}
<tr data-verdict="{{ r.verdict }}">
  <td data-sort="{{ r.date_sort }}">{{ r.date }}</td>
  <td>{% if r.report %}<a href="{{ r.report }}">{{ r.run_id }}</a>{% else %}{{ r.run_id }} <span class="muted">(no report)</span>{% endif %}</td>
  <td>{{ r.version }}</td><td>{{ r.nemesis }}</td><td>{{ r.workload }}</td><td>{{ r.profile }}</td><td>{{ r.client }}</td>
  <td data-sort="{{ r.verdict }}"><span class="pill {{ r.verdict }}"{% if r.stale %} title="{{ r.stale }}"{% endif %}>{{ 'not checked' if r.verdict == 'unchecked' else r.verdict }}</span></td>
  {% for k in ['lost', 'duplicated', 'reordered', 'diverged', 'other'] %}<td class="n" data-sort="{{ r[k] if r[k] is not none else -1 }}">{{ r[k]|fmt }}</td>{% endfor %}
  <td class="n" data-sort="{{ r.events or 0 }}">{{ r.events|fmt }}</td>
  <td class="n" data-sort="{{ r.duration or 0 }}">{{ r.duration|fmt }}</td>
  <td class="n" data-sort="{{ r.no_write if r.no_write is not none else -1 }}" title="{{ r.no_write_during or '' }}">{{ '%.1f'|format(r.no_write) if r.no_write is not none else '–' }}</td>
</tr>
{% endfor %}
</tbody></table>

<h2 id="sec-trends">Trends</h2>
<div class="muted">{{ trends_source }}</div>
{% if trend_plots %}{% for p in trend_plots %}<div class="card">{{ p }}</div>{% endfor %}
{% else %}<div class="card muted">No checked runs yet: nothing to plot.</div>{% endif %}
<div class="muted" style="margin-top:24px">Generated {{ generated }} by <code>python -m analysis dashboard</code>.</div>
<script>
(function(){
  var table=document.getElementById('runs'), body=table.tBodies[0], rows=Array.prototype.slice.call(body.rows);
  var input=document.getElementById('filter'), vsel=document.getElementById('verdict-filter'), shown=document.getElementById('shown');
  function key(row,col,num){var c=row.cells[col]; var v=c.getAttribute('data-sort'); if(v===null) v=c.textContent.trim(); return num?parseFloat(v)||0:v.toLowerCase();}
  var state={col:0,dir:-1};
  function sort(col,num){
    state.dir=(state.col===col)?-state.dir:(num?-1:1); state.col=col;
    rows.sort(function(a,b){var x=key(a,col,num),y=key(b,col,num); return x<y?-state.dir:x>y?state.dir:0;});
    rows.forEach(function(r){body.appendChild(r);});
    Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th){th.querySelector('.arrow').textContent='';});
    table.tHead.rows[0].cells[col].querySelector('.arrow').textContent=state.dir>0?'▲':'▼';
  }
  function filter(){
    var q=input.value.toLowerCase().trim(), v=vsel.value, n=0;
    rows.forEach(function(r){var ok=(!q||r.textContent.toLowerCase().indexOf(q)>=0)&&(!v||r.getAttribute('data-verdict')===v); r.style.display=ok?'':'none'; if(ok)n++;});
    shown.textContent=n+' of '+rows.length+' runs shown';
  }
  Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th){th.addEventListener('click',function(){sort(+th.getAttribute('data-col'),th.getAttribute('data-num')==='1');});});
  input.addEventListener('input',filter); vsel.addEventListener('change',filter); filter();
})();
</script>
"""
