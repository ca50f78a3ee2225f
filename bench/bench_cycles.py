"""Dependency-cycle benchmark: N transactions as a Parquet history, checked on Spark (the cycle
search alone, the int- anomalies alone, and the whole check), with the heap and cores asked for.

    python bench/bench_cycles.py                                  # 1M transactions, local[2], 2 GB
    python bench/bench_cycles.py --txns 250k,1M --repeat 1

Shape, as a consume-transform-produce pipeline would make it: 4 producer processes, 8 keys; each
transaction sends 3 values to 3 distinct keys and, as its process's consumer, reads the next record
of its own key (process p reads key p in order, from earlier transactions). The 4 transactions of
a round run concurrently: their sends land interleaved in a random order (so ww edges go both ways
between them: G0 components, which Kafka permits) and they complete in a random order. Every
INJECT_EVERY rounds two transactions of a round read each other's first send: a G1c of wr edges
alone (forbidden), so the search has something to find. No polls: readers that write nothing are
on no cycle and are not searched.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_checker import SCHEMA, VALUE, parse_size  # noqa: E402

KEYS, PRODUCERS, SENDS, INJECT_EVERY = 8, 4, 3, 25_000


def generate(path: Path, txns: int, seed: int = 1) -> dict:
    """Write the history; return its shape (events, transactions, injected G1c)."""
    rnd = random.Random(seed)
    writer = pq.ParquetWriter(path, SCHEMA, compression="snappy")
    next_offset = [0] * KEYS
    log: list[list[int]] = [[] for _ in range(KEYS)]  # values per key, in offset order (committed rounds)
    read_upto = [0] * PRODUCERS  # process p's next offset on key p
    value = index = injected = 0
    rows: list[tuple] = []

    def flush() -> None:
        if rows:
            cols = list(zip(*rows))
            writer.write_table(pa.table([pa.array(cols[0], pa.int64()), pa.array(cols[1], pa.int64()),
                                         pa.array(cols[2]), pa.array(cols[3]), pa.array(["txn"] * len(rows)),
                                         pa.array(cols[4], VALUE), pa.nulls(len(rows), pa.string())], schema=SCHEMA))
            rows.clear()

    for r in range(txns // PRODUCERS):
        round_ = []
        for p in range(PRODUCERS):
            keys = rnd.sample(range(KEYS), SENDS)
            sends = [{"key": k, "value": value + i} for i, k in enumerate(keys)]
            value += SENDS
            records = []
            if read_upto[p] < len(log[p]):
                records.append({"key": p, "offset": read_upto[p], "value": log[p][read_upto[p]], "epoch": 0})
                read_upto[p] += 1
            round_.append((p, sends, records))
        slots = [(t, j) for t in range(PRODUCERS) for j in range(SENDS)]
        rnd.shuffle(slots)
        for t, j in slots:  # the round's sends land interleaved
            s = round_[t][1][j]
            s["offset"] = next_offset[s["key"]]
            next_offset[s["key"]] += 1
        if r % INJECT_EVERY == INJECT_EVERY - 1:  # t0 and t1 read each other's first send
            a, b = round_[0][1][0], round_[1][1][0]
            round_[0][2].append({"key": b["key"], "offset": b["offset"], "value": b["value"], "epoch": 0})
            round_[1][2].append({"key": a["key"], "offset": a["offset"], "value": a["value"], "epoch": 0})
            injected += 1
        for p, sends, _ in round_:
            rows.append((index, index * 1000, str(p), "invoke",
                         {"sends": [{"key": s["key"], "value": s["value"]} for s in sends], "records": []}))
            index += 1
        for t in rnd.sample(range(PRODUCERS), PRODUCERS):
            p, sends, records = round_[t]
            rows.append((index, index * 1000, str(p), "ok",
                         {"sends": [{**s, "epoch": None} for s in sends], "records": records}))
            index += 1
        for p, sends, _ in round_:
            for s in sends:
                while len(log[s["key"]]) <= s["offset"]:
                    log[s["key"]].append(-1)
                log[s["key"]][s["offset"]] = s["value"]
        if len(rows) >= 200_000:
            flush()
    flush()
    writer.close()
    return {"events": index, "txns": index // 2, "injected_g1c": injected}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--txns", default="1M", help="comma-separated sizes, e.g. 250k,1M")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--driver-memory", default="2g")
    args = ap.parse_args()

    from analysis.checking import anomalies as A
    from analysis.checking import cycles
    from analysis.checking import txn_anomalies
    from analysis.checking.checker import check_history
    from analysis.checking.history_load import load_history
    from analysis.checking.spark import get_session

    spark = get_session(f"local[{args.cores}]", driver_memory=args.driver_memory)
    print(f"Spark local[{args.cores}], driver memory {args.driver_memory}")
    for size in [parse_size(s) for s in args.txns.split(",")]:
        tmp = Path(tempfile.mkdtemp(prefix="bench-cycles-"))
        try:
            t = time.perf_counter()
            shape = generate(tmp / "history.parquet", size)
            print(f"{shape['txns']:,} txns, {shape['events']:,} events, {shape['injected_g1c']} G1c injected; "
                  f"generated in {time.perf_counter() - t:.1f} s")
            for _ in range(args.repeat):
                history = load_history(spark, tmp)
                d = A.derive(history.events)
                d.op_stats = history.op_stats
                t = time.perf_counter()
                comps = cycles.components(d)
                kinds = {r["kind"]: r["count"] for r in comps.groupBy("kind").count().collect()}
                cyc = time.perf_counter() - t
                t = time.perf_counter()
                ints = {name: getattr(txn_anomalies, fn)(d).count() for name, fn in (
                    ("int-nonmonotonic-send", "int_nonmonotonic_send"), ("int-send-skip", "int_send_skip"),
                    ("int-nonmonotonic-poll", "int_nonmonotonic_poll"), ("int-poll-skip", "int_poll_skip"),
                    ("precommitted-read", "precommitted_read"))}
                internal = time.perf_counter() - t
                d.unpersist()
                history.release()
                t = time.perf_counter()
                results = check_history(spark, tmp, None)
                whole = time.perf_counter() - t
                print(f"  cycles: {cyc:.1f} s ({cyc / shape['txns'] * 1e6:.1f} µs/txn) -> {kinds}; "
                      f"int- and precommitted-read: {internal:.1f} s -> {ints}; whole check: {whole:.1f} s "
                      f"(G0 {results['counts']['G0']}, G1c {results['counts']['G1c']}, verdict {results['verdict']})")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
