"""Report benchmark, before and after side by side in one run.

1. A synthetic N-operation history (default 10M events, Parquet, generated vectorised) with
   faults and one anomaly of each kind in results.json: `render_report` time and page size.
   Targets (issue 6): < 60 s and < 10 MB at 10M operations.
2. Issue 34: a store of `--store-runs` (100) runs of a default-sized run (~60k events, synthetic,
   cloned: tests/reports/synth.py): every report rendered, the store's total of report.html, the
   copies of Plotly in it, and the dashboard opened in headless Chromium (median of 3: the page's
   own load time, navigation start → load event end, and the browser's wall time against a blank
   page's). Targets: a report ≤ 1 MB, Plotly not once per run, the dashboard under 2 s.

"Before" is the code at BEFORE (the last commit whose pages inlined Plotly), loaded from git into
a temporary package; "after" is the working tree; "--inline" is today's interactive option.

    python bench/bench_report.py [--events 10000000] [--store-runs 100] [--dir /tmp/bench-report]
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

NS = 1_000_000_000
ROOT = Path(__file__).resolve().parent.parent
BEFORE = "0d5fbec"  # reports with Plotly inlined into every page


def before_modules(commit: str = BEFORE) -> tuple[object, object] | None:
    """(render_report, render_dashboard) of `commit`, imported from git as `analysis_before`
    (its html, report, report_figures and dashboard; everything else is today's); None without git."""
    pkg = Path(tempfile.mkdtemp(prefix="bench-before-")) / "analysis_before"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name in ("html", "report", "report_figures", "dashboard"):
        try:
            text = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:analysis/{name}.py"], check=True,
                                  capture_output=True, text=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return None
        text = re.sub(r"from analysis( import |\.)(html|report_figures|report)\b", r"from analysis_before\1\2", text)
        (pkg / f"{name}.py").write_text(text)
    sys.path.insert(0, str(pkg.parent))
    old_html = importlib.import_module("analysis_before.html")
    from analysis.report import html
    old_html.SELFCHECK_TAIL = html.SELFCHECK_TAIL  # the same self-check (load time) on both pages
    return (importlib.import_module("analysis_before.report").render_report,
            importlib.import_module("analysis_before.dashboard").render_dashboard)


def write_history(run_dir: Path, events: int, keys: int = 8, rate: float = 5000.0, seed: int = 0) -> dict:
    """Half sends (invoke + completion), half polls of 10 records (invoke + ok): ~events rows."""
    rng = np.random.default_rng(seed)
    sends = events // 4
    polls = events // 4
    duration = sends / rate
    # sends: invoke at t, completion at t + latency; keys round robin, offsets per key consecutive
    t_inv = np.sort(rng.uniform(0, duration, sends))
    lat = rng.lognormal(np.log(0.005), 0.6, sends)
    key = rng.integers(0, keys, sends)
    value = np.arange(sends, dtype=np.int64)
    offset = np.zeros(sends, np.int64)
    for k in range(keys):  # vectorised per key
        m = key == k
        offset[m] = np.arange(m.sum())
    kind = rng.random(sends)
    typ = np.where(kind < 0.97, "ok", np.where(kind < 0.985, "fail", "info"))
    proc = rng.integers(0, 4, sends)
    send_inv = [f'{{"key":{k},"value":{v}}}' for k, v in zip(key.tolist(), value.tolist())]
    send_done = [f'{{"key":{k},"value":{v},"offset":{o if t == "ok" else "null"},"epoch":{0 if t == "ok" else "null"}}}'
                 for k, v, o, t in zip(key.tolist(), value.tolist(), offset.tolist(), typ.tolist())]
    # polls: consumers read 10 consecutive records of one key that were written ~0.2 s earlier
    t_poll = np.sort(rng.uniform(0, duration, polls))
    pk = rng.integers(0, keys, polls)
    start = (np.minimum(np.maximum(t_poll - 0.2, 0) * rate / keys, sends / keys - 10)).astype(np.int64)
    poll_val = ['{"records":[' + ",".join(f'{{"key":{k},"offset":{o},"value":{o * keys + k},"epoch":0}}'
                                          for o in range(s, s + 10)) + "]}" for k, s in zip(pk.tolist(), start.tolist())]
    pproc = 10 + rng.integers(0, 4, polls)
    n = 2 * sends + 2 * polls
    time_ = np.concatenate([t_inv, t_inv + lat, t_poll, t_poll + 0.002])
    order = np.argsort(time_, kind="stable")
    cols = {
        "time": (time_[order] * NS).astype(np.int64),
        "process": np.concatenate([proc, proc, pproc, pproc]).astype(str)[order],
        "type": np.concatenate([np.full(sends, "invoke"), typ, np.full(polls, "invoke"), np.full(polls, "ok")])[order],
        "f": np.concatenate([np.full(sends, "send"), np.full(sends, "send"), np.full(polls, "poll"), np.full(polls, "poll")])[order],
        "value": np.array(send_inv + send_done + ["null"] * polls + poll_val, dtype=object)[order],
    }
    nem = [(duration * 0.2, "kill", {"targets": [2], "roles": {"2": ["leader:queue-0"]}}),
           (duration * 0.3, "restart", {"targets": [2]}),
           (duration * 0.5, "start-partition", {"shape": "one", "targets": [1], "roles": {"1": ["controller"]}}),
           (duration * 0.6, "stop-partition", {"healed": True}), (duration * 0.9, "heal", {})]
    table = pa.table({"index": pa.array(np.arange(n, dtype=np.int64)), "time": pa.array(cols["time"]),
                      "process": pa.array(cols["process"], pa.string()), "type": pa.array(cols["type"], pa.string()),
                      "f": pa.array(cols["f"], pa.string()), "value": pa.array(cols["value"], pa.string()),
                      "error": pa.nulls(n, pa.string())})
    extra = pa.table({"index": pa.array(np.arange(n, n + len(nem), dtype=np.int64)),
                      "time": pa.array([int(t * NS) for t, _, _ in nem], pa.int64()),
                      "process": pa.array(["nemesis"] * len(nem)), "type": pa.array(["info"] * len(nem)),
                      "f": pa.array([f for _, f, _ in nem]), "value": pa.array([json.dumps(v) for _, _, v in nem]),
                      "error": pa.nulls(len(nem), pa.string())})
    pq.write_table(pa.concat_tables([table, extra]), run_dir / "history.parquet")
    return {"events": n + len(nem), "duration": duration, "keys": keys}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/bench-report"))
    ap.add_argument("--store-runs", type=int, default=100, help="runs in the store part (0: skip it)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    run_dir = args.dir / f"bench-{args.events}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    t = time.perf_counter()
    info = write_history(run_dir, args.events)
    gen_s = time.perf_counter() - t
    from analysis.rules.registry import ANOMALIES

    ex_op = {"index": 1, "time": int(info["duration"] * 0.55 * NS), "process": "3", "f": "send", "type": "ok"}
    examples = {a: [{"key": 0, "offset": 1000 + i, "value": 7, "offsets": [1000 + i, 999 + i], "ops": [ex_op, ex_op]}
                    for i in range(20)] for a in ANOMALIES}
    (run_dir / "results.json").write_text(json.dumps({
        "verdict": "invalid", "reasons": ["synthetic"], "forbidden": list(ANOMALIES), "counts": dict.fromkeys(ANOMALIES, 20),
        "headline": {"lost": 40, "duplicated": 20, "reordered": 40, "diverged": 20}, "allowed": [], "allowed_by": [],
        "examples": examples, "history": {"events": info["events"]}}))
    (run_dir / "config.json").write_text(json.dumps({"run_id": run_dir.name, "kafka_version": "4.3.1", "brokers": 3,
                                                     "workload": "queue", "nemesis": ["kill", "partition"], "seed": 0}))
    from analysis.report.page import render_report

    old = before_modules()
    t = time.perf_counter()
    page = render_report(run_dir)
    render_s = time.perf_counter() - t
    size = page.stat().st_size
    print(f"events            {info['events']:,} ({info['duration']:.0f} s of history)")
    print(f"parquet           {(run_dir / 'history.parquet').stat().st_size / 1e6:.0f} MB (generated in {gen_s:.1f} s)")
    print(f"{'':18}{'render (s)':>12}{'report.html':>14}")
    if old:
        t = time.perf_counter()
        before = old[0](run_dir, _fresh(args.dir / "before-big")).stat().st_size
        print(f"{'before (' + BEFORE + ')':18}{time.perf_counter() - t:>12.1f}{before / 1e6:>11.2f} MB")
    print(f"{'after (SVG)':18}{render_s:>12.1f}{size / 1e6:>11.2f} MB   (targets: < 60 s, ≤ 1 MB)")
    t = time.perf_counter()
    inl = render_report(run_dir, _fresh(args.dir / "inline-big"), inline=True).stat().st_size
    print(f"{'after --inline':18}{time.perf_counter() - t:>12.1f}{inl / 1e6:>11.2f} MB")
    if args.store_runs:
        store_bench(args.dir, args.store_runs, old)


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _tree_size(store: Path, name: str) -> tuple[int, int]:
    """(bytes, files) of every `name` under `store`; hard links counted once."""
    seen, total = set(), 0
    files = list(store.rglob(name))
    for f in files:
        st = f.stat()
        if st.st_ino not in seen:
            seen.add(st.st_ino)
            total += st.st_size
    return total, len(files)


def _plotly_copies(store: Path) -> int:
    return sum(1 for f in store.rglob("*.html") if b"plotly.js v" in f.read_bytes()[:5_000_000])


def _open(page: Path, repeat: int = 3) -> tuple[float, float]:
    """(median page load ms from the page's navigation timing, median browser wall s)."""
    from tests.browser import load_page

    loads, walls = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        dom = load_page(page, budget_ms=3000).dom
        walls.append(time.perf_counter() - t)
        m = dom.split('data-loadms="', 1)
        loads.append(float(m[1].split('"', 1)[0]) if len(m) > 1 else float("nan"))
    return statistics.median(loads), statistics.median(walls)


def store_bench(root: Path, runs: int, old: tuple | None) -> None:
    """A `runs`-run store: every report rendered (after; before for one run, times `runs`),
    the store's report bytes and Plotly copies, and the dashboard opened in Chromium."""
    sys.path.insert(0, str(ROOT))
    from analysis.report.dashboard import render_dashboard
    from analysis.report.page import render_report
    from tests.reports.synth import clone_store, make_results, make_run

    t = time.perf_counter()
    tpl_root = _fresh(root / "template")
    template = make_run(tpl_root, "20251231T070000-template", "lost-write", seconds=30, rate=1000)
    make_results(template, "lost-write")
    (template / "history.jsonl").unlink()  # a checked run keeps one durable form (parquet) in this bench
    after = _fresh(root / f"store-{runs}-after")
    clone_store(template, after, runs)
    print(f"\n{runs}-run store of a {json.loads((template / 'results.json').read_text())['history']['events']:,}-event run "
          f"(synthetic, cloned; built in {time.perf_counter() - t:.0f} s)")
    t = time.perf_counter()
    for d in sorted(p for p in after.iterdir() if p.is_dir()):
        (d / "report.html").unlink(missing_ok=True)
        render_report(d)
    per_s = (time.perf_counter() - t) / runs
    a_bytes, a_files = _tree_size(after, "report.html")
    render_dashboard(after)
    rows = [("after (SVG)", a_bytes / a_files, a_bytes, _plotly_copies(after), per_s, *_open(after / "index.html"))]
    if old:
        before = _fresh(root / f"store-{runs}-before")
        clone_store(template, before, runs)
        t = time.perf_counter()
        one = old[0](before / sorted(p.name for p in before.iterdir())[0]).stat().st_size
        b_per_s = time.perf_counter() - t
        old[1](before)
        rows.insert(0, (f"before ({BEFORE})", one, one * runs, runs, b_per_s, *_open(before / "index.html")))
    blank = root / "blank.html"
    blank.write_text("<!DOCTYPE html><title>blank</title><div id=kh-selfcheck></div>")
    base = _open(blank)[1]
    print(f"{'':18}{'report':>10}{'reports in store':>18}{'Plotly copies':>15}{'render/run':>12}"
          f"{'dashboard load':>16}{'browser wall':>14}")
    for name, one, total, copies, rs, load, wall in rows:
        print(f"{name:18}{one / 1e6:>7.3f} MB{total / 1e6:>15.1f} MB{copies:>15}{rs:>10.1f} s{load:>13.0f} ms{wall:>12.2f} s")
    print(f"(before: one report rendered, × {runs}; after: all {runs} rendered. Browser wall: headless Chromium start to DOM "
          f"dump, a blank page takes {base:.2f} s. Targets: report ≤ 1 MB, dashboard load < 2000 ms)")


if __name__ == "__main__":
    main()
