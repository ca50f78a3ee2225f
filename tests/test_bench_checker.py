"""bench/bench_checker.py's DuckDB side measures the consumers' realtime lag as the Spark checker
does, so that the bench times the same work on both engines: its lag entries must equal the plain
Python reference's (analysis/reference/lag.py), on the bench's own history and on one whose
consumers re-assign, subscribe and seek."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.reference import lag as reference_lag

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_checker", ROOT / "bench" / "bench_checker.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_checker"] = module
    spec.loader.exec_module(module)
    return module


def _duck_entries(bench, path: Path) -> Counter:
    con = bench.duckdb_connect(path, 2)
    rows = con.execute("SELECT process, key, index, position, ms FROM lag_entries").fetchall()
    con.close()
    return Counter((str(p), k, i, pos, ms) for p, k, i, pos, ms in rows)


def _reference(path: Path) -> tuple[Counter, dict]:
    events = pq.read_table(path).to_pylist()
    es = reference_lag.entries(events)
    return (Counter((str(e["process"]), e["key"], e["index"], e["position"], e["lag_ns"] // 1_000_000) for e in es),
            reference_lag.summary(es))


def test_the_bench_history_s_lag_is_the_reference_s(bench, tmp_path):
    path = tmp_path / "history.parquet"
    bench.generate(path, 20_000)
    want, summary = _reference(path)
    assert _duck_entries(bench, path) == want
    assert summary["max_ms"] > 0  # a lag to measure, not all zeros
    _, lag = bench.duckdb_check(path, 2)
    assert bench.lag_agrees(lag, summary) and not bench.lag_agrees({**lag, "max_ms": lag["max_ms"] + 1}, summary)


def test_resets_and_seeks_walk_as_the_reference_does(bench, tmp_path):
    """Process 100 reads key 0 and 1, re-assigns key 0 only without seek (keeps 0, drops 1), then
    seeks to the beginning, then subscribes (no position until a read); process 101 lags behind."""
    ev: list[dict] = []

    def o(p, type_, f, value=None):
        ev.append({"index": len(ev), "time": len(ev) * 7_000_000, "process": str(p), "type": type_, "f": f,
                   "value": value, "error": None})

    def recs(*r):
        return {"records": [{"key": k, "offset": off, "value": v, "epoch": 0} for k, off, v in r]}

    def send(k, v, off):
        o(1, "invoke", "send", {"key": k, "value": v})
        o(1, "ok", "send", {"key": k, "value": v, "offset": off, "epoch": 0})

    def poll(p, *r):
        o(p, "invoke", "poll")
        o(p, "ok", "poll", recs(*r))

    for p in (100, 101):
        o(p, "invoke", "assign", {"keys": [0, 1], "seek": "beginning"})
        o(p, "ok", "assign", {"keys": [0, 1], "seek": "beginning"})
    send(0, 10, 0); send(1, 11, 0); send(0, 12, 1); send(1, 13, 1)
    poll(100, (0, 0, 10), (1, 0, 11))
    poll(101)
    send(0, 14, 2)
    o(100, "invoke", "assign", {"keys": [0]}); o(100, "ok", "assign", {"keys": [0]})
    poll(100, (0, 1, 12))
    poll(101, (0, 0, 10))
    o(100, "invoke", "assign", {"keys": [0], "seek": "beginning"}); o(100, "ok", "assign", {"keys": [0], "seek": "beginning"})
    poll(100)
    o(100, "invoke", "subscribe", {"keys": [0, 1]}); o(100, "ok", "subscribe", {"keys": [0, 1]})
    poll(100)
    poll(100, (1, 1, 13))
    poll(101, (0, 1, 12), (0, 2, 14), (1, 0, 11), (1, 1, 13))
    path = tmp_path / "history.parquet"
    table = pa.Table.from_pylist(ev, schema=bench.SCHEMA)
    pq.write_table(table, path)
    want, _ = _reference(path)
    assert len(want) == 11 and any(ms > 0 for *_, ms in want)  # 2+2+1+2+1+0+1+2 (subscribe: no position)
    assert _duck_entries(bench, path) == want
