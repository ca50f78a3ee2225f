"""Checker benchmark: synthetic histories of N events as Parquet, checked by the Spark checker
and by the same checks written as SQL in DuckDB (the single-machine reference), in one run.

    python bench/bench_checker.py                       # 1M and 10M events, 3 times each
    python bench/bench_checker.py --sizes 50M --repeat 1 --driver-memory 2g

An "event" is one history line (an invoke or a completion). Shape: 4 producers, 2 consumers,
8 keys; every ok send is read by both consumers in polls of 100 records; consumer 0 misses one
record in a million (one poll-skip each, nothing lost since consumer 1 reads it). One event a
millisecond, so the consumers' realtime lag is whole milliseconds, measured by both engines and
compared. `value` is stored as a struct (the checker also reads the recorder's JSON-text column,
which is slower).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

KEYS, PRODUCERS, CONSUMERS, BATCH, SKIP_EVERY = 8, 4, 2, 100, 1_000_003
REC = pa.struct([(n, pa.int64()) for n in ("key", "offset", "value", "epoch")])
SEND = pa.struct([(n, pa.int64()) for n in ("key", "value", "offset", "epoch")])
VALUE = pa.struct([("key", pa.int64()), ("value", pa.int64()), ("offset", pa.int64()), ("epoch", pa.int64()),
                   ("records", pa.list_(REC)), ("sends", pa.list_(SEND)), ("keys", pa.list_(pa.int64())),
                   ("seek", pa.string())])
SCHEMA = pa.schema([("index", pa.int64()), ("time", pa.int64()), ("process", pa.string()), ("type", pa.string()),
                    ("f", pa.string()), ("value", VALUE), ("error", pa.string())])


def _nulls(n: int, t: pa.DataType) -> pa.Array:
    return pa.nulls(n, t)


def _table(index0: int, process: np.ndarray, type_: list | np.ndarray, f: str, key, value, offset, records) -> pa.Table:
    n = len(process)
    idx = np.arange(index0, index0 + n, dtype=np.int64)
    val = pa.StructArray.from_arrays(
        [key, value, _nulls(n, pa.int64()) if offset is None else offset, _nulls(n, pa.int64()),
         records, _nulls(n, pa.list_(SEND)), _nulls(n, pa.list_(pa.int64())), _nulls(n, pa.string())],
        fields=list(VALUE))
    return pa.table([idx, idx * 1_000_000, pa.array(process.astype(str)), pa.array(type_), pa.array([f] * n), val,
                     _nulls(n, pa.string())], schema=SCHEMA)


def generate(path: Path, events: int, chunk_sends: int = 1_000_000) -> dict:
    """Write `events` (approximately, whole polls) history events to `path`; return its shape."""
    sends_total = int(events / (2 + 2 * CONSUMERS / BATCH))
    writer = pq.ParquetWriter(path, SCHEMA, compression="snappy")
    index, skips, n_events = 0, 0, 0
    head = pa.table([pa.array([0, 1]), pa.array([0, 1000]), pa.array(["100", "100"]), pa.array(["invoke", "ok"]),
                     pa.array(["assign", "assign"]),
                     pa.array([{"keys": list(range(KEYS)), "seek": "beginning"}] * 2, VALUE), _nulls(2, pa.string())],
                    schema=SCHEMA)
    tables = [head]
    for c in range(1, CONSUMERS):
        t = head.set_column(0, "index", pa.array([2 * c, 2 * c + 1])).set_column(2, "process", pa.array([str(100 + c)] * 2))
        tables.append(t)
    for t in tables:
        writer.write_table(t)
    index = 2 * CONSUMERS
    for start in range(0, sends_total, chunk_sends):
        vals = np.arange(start, min(start + chunk_sends, sends_total), dtype=np.int64)
        n = len(vals)
        keys, offs, procs = vals % KEYS, vals // KEYS, vals % PRODUCERS
        # Sends: invoke, ok pairs, interleaved.
        proc2 = np.repeat(procs, 2)
        types = np.tile(np.array(["invoke", "ok"]), n)
        v2, k2, o2 = np.repeat(vals, 2), np.repeat(keys, 2), np.repeat(offs, 2)
        o2 = np.where(types == "ok", o2, -1)
        sends = _table(index, proc2, types, "send", pa.array(k2), pa.array(v2),
                       pa.array(o2, mask=o2 < 0), _nulls(2 * n, pa.list_(REC)))
        writer.write_table(sends)
        index += 2 * n
        # Polls: each consumer reads the chunk in batches of BATCH records.
        recs = pa.StructArray.from_arrays([pa.array(keys), pa.array(offs), pa.array(vals), pa.array(np.zeros(n, np.int64))],
                                          fields=list(REC))
        for c in range(CONSUMERS):
            keep = np.ones(n, bool) if c else (vals % SKIP_EVERY != 0) | (vals == 0)
            skips += int((~keep).sum())
            kept = recs.filter(pa.array(keep))
            m = len(kept)
            bounds = np.arange(0, m + BATCH - 1, BATCH, dtype=np.int32)
            bounds[-1] = m
            npolls = len(bounds) - 1
            # Each poll is an invoke (records null) then an ok (records kept[b_i:b_i+1]): list
            # offsets [b0, b0, b1, b1, ..., b_n-1, b_n-1, b_n], invoke rows masked to null.
            list_offsets = pa.array(np.concatenate([np.repeat(bounds[:-1], 2), [m]]).astype(np.int32))
            is_inv = np.tile(np.array([True, False]), npolls)
            lists = pa.ListArray.from_arrays(list_offsets, kept, mask=pa.array(is_inv))
            proc = np.full(2 * npolls, 100 + c)
            polls = _table(index, proc, np.where(is_inv, "invoke", "ok"), "poll", _nulls(2 * npolls, pa.int64()),
                           _nulls(2 * npolls, pa.int64()), None, lists)
            writer.write_table(polls)
            index += 2 * npolls
    writer.close()
    return {"events": index, "sends": sends_total, "expected_poll_skip": skips}


# ------------------------------------------------------------------------------------ DuckDB
DUCK_SQL = """
CREATE TEMP TABLE ev AS SELECT index, time, process, type, f, value FROM read_parquet('{path}');
CREATE TEMP TABLE reads AS
  SELECT process, index, time, pos, r.key AS key, r.offset AS "offset", r.value AS value FROM (
    SELECT process, index, time, unnest(value.records) AS r, generate_subscripts(value.records, 1) AS pos
    FROM ev WHERE type = 'ok' AND f IN ('poll', 'txn'));
CREATE TEMP TABLE writes AS
  SELECT process, index, time, type, f, value.key AS key, CASE WHEN value.offset >= 0 THEN value.offset END AS "offset",
         value.value AS value FROM ev WHERE f = 'send' AND type IN ('ok', 'fail')
  UNION ALL
  SELECT process, index, time, type, f, s.key, CASE WHEN s.offset >= 0 THEN s.offset END, s.value FROM (
    SELECT process, index, time, type, f, unnest(value.sends) AS s FROM ev WHERE f = 'txn' AND type IN ('ok', 'fail'));
CREATE TEMP TABLE positions AS
  SELECT key, "offset", value FROM reads
  UNION ALL SELECT key, "offset", value FROM writes WHERE type = 'ok' AND "offset" IS NOT NULL;
CREATE TEMP TABLE offs AS
  SELECT key, "offset", min(value) AS lo, max(value) AS hi,
         lead("offset") OVER (PARTITION BY key ORDER BY "offset") AS next_offset
  FROM positions GROUP BY key, "offset";
CREATE TEMP TABLE unread AS
  SELECT w.*, m.max_read FROM writes w
  LEFT JOIN (SELECT key, max("offset") AS max_read FROM reads GROUP BY key) m USING (key)
  WHERE w.type = 'ok' AND NOT EXISTS (SELECT 1 FROM reads r WHERE r.value = w.value);
CREATE TEMP TABLE seq AS
  SELECT * FROM (
    SELECT *, sum(reset) OVER (PARTITION BY process ORDER BY index, pos ROWS UNBOUNDED PRECEDING) AS epoch FROM (
      SELECT process, index, pos, key, "offset", 0 AS reset FROM reads
      UNION ALL SELECT process, index, NULL, NULL, NULL, 1 FROM ev
      WHERE f IN ('assign', 'subscribe') AND type IN ('ok', 'info'))) WHERE reset = 0;
CREATE TEMP TABLE pairs AS
  SELECT * FROM (SELECT key, "offset",
     lag("offset") OVER (PARTITION BY key, process, epoch ORDER BY index, pos) AS prev FROM seq)
  WHERE prev IS NOT NULL AND "offset" <> prev + 1;
SELECT
  (SELECT count(*) FROM offs WHERE lo <> hi) AS "inconsistent-offsets",
  (SELECT count(*) FROM (SELECT value FROM positions GROUP BY value
     HAVING min(key) <> max(key) OR min("offset") <> max("offset"))) AS "duplicate",
  (SELECT count(*) FROM unread WHERE "offset" < max_read) AS "lost-write",
  (SELECT count(*) FROM unread WHERE NOT coalesce("offset" < max_read, false)) AS "unseen",
  (SELECT count(*) FROM (
     SELECT "offset", lag("offset") OVER (PARTITION BY key, w.process ORDER BY coalesce(i.index, w.index)) AS prev
     FROM writes w LEFT JOIN (SELECT process, value.value AS value, index FROM ev WHERE f = 'send' AND type = 'invoke') i
       ON i.process = w.process AND i.value = w.value
     WHERE w.type = 'ok' AND w.f = 'send' AND w."offset" IS NOT NULL) WHERE "offset" <= prev) AS "nonmonotonic-send",
  (SELECT count(*) FROM pairs WHERE "offset" <= prev) AS "nonmonotonic-poll",
  (SELECT count(*) FROM pairs p JOIN offs o ON o.key = p.key AND o."offset" = p.prev
     WHERE p."offset" > p.prev + 1 AND o.next_offset < p."offset") AS "poll-skip",
  (SELECT count(DISTINCT r.value) FROM reads r JOIN writes w ON w.value = r.value AND w.type = 'fail') AS "aborted-read";
"""


# The consumers' realtime lag (analysis/checking/lag.py; definition in docs/checker.md): the Spark
# checker measures it in every check, so DuckDB does too, or the times would not compare like with
# like. The time each offset was known is the earliest completion of an op that observed it or a
# higher one (ok sends and txn sends with an offset, the records of ok polls and txns); each ok
# poll or txn, for every key its process holds a position on, lags from then to its invoke. As the
# counts above, for plain histories: no fail/info txn's records, no info write a read proved.
DUCK_LAG_SQL = """
CREATE TEMP TABLE known AS
  SELECT key, "offset", min(min(time)) OVER (PARTITION BY key ORDER BY "offset" DESC ROWS UNBOUNDED PRECEDING) AS expired
  FROM (SELECT key, "offset", time FROM reads
        UNION ALL SELECT key, "offset", time FROM writes WHERE type = 'ok' AND "offset" IS NOT NULL)
  GROUP BY key, "offset";
CREATE TEMP TABLE moves AS
  SELECT process, index, time, f, type, value.keys AS keys, value.seek AS seek FROM ev
  WHERE (f IN ('poll', 'txn') AND type IN ('invoke', 'ok')) OR (f IN ('assign', 'subscribe') AND type = 'ok');
CREATE TEMP TABLE highest AS SELECT process, index, key, max("offset") AS "offset" FROM reads GROUP BY ALL;
CREATE TEMP TABLE held AS
  SELECT DISTINCT process, key FROM (
    SELECT process, key FROM highest
    UNION ALL SELECT process, unnest(keys) FROM moves WHERE f = 'assign' AND seek = 'beginning');
CREATE TEMP TABLE lag_entries AS
  WITH resets AS (
    SELECT m.process, h.key, m.index,
           CASE WHEN m.f = 'assign' AND m.seek = 'beginning' AND list_contains(m.keys, h.key) THEN -1 END AS "offset",
           0 AS ord, 1 AS reset, NULL::BIGINT AS time
    FROM moves m JOIN held h USING (process)
    WHERE m.f IN ('assign', 'subscribe')
      AND NOT (m.f = 'assign' AND m.seek IS NULL AND list_contains(coalesce(m.keys, []), h.key))),
  polls AS (
    SELECT process, index, coalesce(invoked, time) AS time FROM (
      SELECT *, last(CASE WHEN type = 'invoke' THEN time END IGNORE NULLS)
                  OVER (PARTITION BY process ORDER BY index ROWS UNBOUNDED PRECEDING) AS invoked
      FROM moves WHERE f IN ('poll', 'txn')) WHERE type = 'ok'),
  walk AS (
    SELECT process, key, index, "offset", ord, reset, time FROM resets
    UNION ALL SELECT process, key, index, "offset", 1, 0, NULL FROM highest
    UNION ALL SELECT p.process, h.key, p.index, NULL, 2, 0, p.time FROM polls p JOIN held h USING (process)),
  segmented AS (
    SELECT *, sum(reset) OVER (PARTITION BY process, key ORDER BY index, ord ROWS UNBOUNDED PRECEDING) AS segment FROM walk),
  positioned AS (
    SELECT *, max("offset") OVER (PARTITION BY process, key, segment ORDER BY index, ord ROWS UNBOUNDED PRECEDING) AS position
    FROM segmented)
  SELECT q.process, q.key, q.index, q.time, q.position,
         coalesce(greatest(q.time - k.expired, 0), 0) // 1000000 AS ms
  FROM (SELECT * FROM positioned WHERE ord = 2 AND position IS NOT NULL) q
  ASOF LEFT JOIN known k ON q.key = k.key AND k."offset" >= q.position + 1;
SELECT count(*) AS entries, max(ms) AS max_ms, round(quantile_cont(ms, 0.5), 3) AS p50_ms,
       round(quantile_cont(ms, 0.99), 3) AS p99_ms FROM lag_entries
"""


def _statements(sql: str) -> list[str]:
    return [s for s in sql.split(";") if s.strip()]


def duckdb_connect(path: Path, threads: int):
    """A DuckDB connection with every table of DUCK_SQL and DUCK_LAG_SQL built over the history."""
    import duckdb

    con = duckdb.connect(config={"threads": threads})
    con.execute("SET enable_progress_bar = false")  # a session option; it would clutter the table
    for s in _statements(DUCK_SQL.format(path=path))[:-1] + _statements(DUCK_LAG_SQL)[:-1]:
        con.execute(s)
    return con


def duckdb_check(path: Path, threads: int) -> tuple[dict, dict]:
    """DuckDB's counts and its overall lag (entries, max, p50, p99 in ms)."""
    con = duckdb_connect(path, threads)
    out = []
    for final in (_statements(DUCK_SQL.format(path=path))[-1], _statements(DUCK_LAG_SQL)[-1]):
        cur = con.execute(final)
        out.append(dict(zip([d[0] for d in cur.description], cur.fetchone())))
    con.close()
    return out[0], out[1]


def lag_agrees(duck: dict, spark: dict | None) -> bool:
    """Whether both engines measured the same overall lag: entries, max, p50 and p99 in ms."""
    return spark is not None and all(float(spark[k]) == float(duck[k]) for k in ("entries", "max_ms", "p50_ms", "p99_ms"))


def counts_agree(duck: dict, spark: dict) -> bool:
    """Whether the counts both engines compute are equal. DuckDB's SQL has the 8 anomalies
    of the plain histories; the Spark checker counts 18 (the transactional, cycle and eos ones
    too), so comparing the dicts whole said NO at every size. Every DuckDB count must be one
    Spark has, and equal to it: a count DuckDB has and Spark lacks is a disagreement too."""
    return bool(duck) and all(name in spark and spark[name] == n for name, n in duck.items())


def parse_size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 10**3, "M": 10**6, "G": 10**9}.get(s[-1], 1)
    return int(float(s[:-1] if s[-1] in "KMG" else s) * mult)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1M,10M", help="comma-separated event counts (default 1M,10M)")
    ap.add_argument("--driver-memory", default="2g")
    ap.add_argument("--workdir", default=None, help="where to write the Parquet (default: a temp folder, removed)")
    ap.add_argument("--keep", action="store_true", help="keep the generated histories")
    ap.add_argument("--repeat", type=int, default=3,
                    help="check each size this many times with each engine, alternating, and report the "
                         "medians (default 3: on a noisy machine one pair of samples can be off by a third)")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from analysis.checking.checker import check_history
    from analysis.checking.spark import get_session

    cores = os.cpu_count() or 2
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-checker-"))
    t = time.perf_counter()
    spark = get_session(driver_memory=args.driver_memory)
    startup = time.perf_counter() - t
    import duckdb
    import pyspark

    # Versions are printed so that figures from different days can be told apart.
    print(f"Spark start-up: {startup:.1f} s (local[*], {cores} cores, driver {args.driver_memory}; "
          f"pyspark {pyspark.__version__}, duckdb {duckdb.__version__})", flush=True)
    rows = []
    try:
        for size in [parse_size(s) for s in args.sizes.split(",")]:
            run = work / f"run-{size}"
            run.mkdir(parents=True, exist_ok=True)
            t = time.perf_counter()
            shape = generate(run / "history.parquet", size)
            gen = time.perf_counter() - t
            duck_times, spark_times, agreed = [], [], []
            for _ in range(args.repeat):
                # DuckDB first: run straight after a Spark check it was up to a third slower (the
                # JVM still collecting garbage and deleting shuffle files), which flattered the ratio.
                t = time.perf_counter()
                duck, duck_lag = duckdb_check(run / "history.parquet", cores)
                duck_times.append(time.perf_counter() - t)
                t = time.perf_counter()
                res = check_history(spark, run, None)
                spark_times.append(time.perf_counter() - t)
                # Every sample, not only the last; the lag too, since both engines time it.
                agreed.append(counts_agree(duck, res["counts"]) and lag_agrees(duck_lag, res.get("realtime_lag")))
                if args.repeat > 1:
                    print(f"   sample {len(spark_times)}: spark {spark_times[-1]:.1f} s  duckdb {duck_times[-1]:.1f} s  "
                          f"ratio {spark_times[-1] / duck_times[-1]:.1f}x", flush=True)
            duck_s, spark_s = statistics.median(duck_times), statistics.median(spark_times)
            agree = all(agreed)
            rows.append((shape["events"], gen, spark_s, duck_s, agree, res["counts"]["poll-skip"], shape["expected_poll_skip"]))
            median = f" (median of {args.repeat})" if args.repeat > 1 else ""
            print(f"{shape['events']:>12,} events{median}: generate {gen:6.1f} s  spark {spark_s:7.1f} s  duckdb {duck_s:6.1f} s  "
                  f"ratio {spark_s / duck_s:5.1f}x  shared counts and lag agree: {agree}  poll-skip {res['counts']['poll-skip']}"
                  f"/{shape['expected_poll_skip']}", flush=True)
            last = " (last sample)" if args.repeat > 1 else ""
            print(f"   spark phases{last}: {res['timings']}", flush=True)
            if not agree:
                differ = {k: (res["counts"].get(k), v) for k, v in duck.items() if res["counts"].get(k) != v}
                print(f"   counts differ (spark, duckdb): {differ}\n   spark {res['counts']}\n   duckdb {duck}", flush=True)
                lag = res.get("realtime_lag") or {}
                print(f"   lag (spark, duckdb): {({k: lag.get(k) for k in duck_lag})}, {duck_lag}", flush=True)
            if not args.keep:
                shutil.rmtree(run)
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"| events | Spark check (s) | + start-up (s) | DuckDB SQL (s) | Spark/DuckDB | Spark s per M events | shared counts and lag agree |")
    print("|---:|---:|---:|---:|---:|---:|:---:|")
    for events, gen, s, d, agree, *_ in rows:
        print(f"| {events:,} | {s:.1f} | {s + startup:.1f} | {d:.1f} | {s / d:.1f}x | {s / events * 1e6:.2f} | {'yes' if agree else 'NO'} |")
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
