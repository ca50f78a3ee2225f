"""Report benchmark: a synthetic N-operation history (default 10M events, Parquet, generated
vectorised) with faults and one anomaly of each kind in results.json; time `render_report` and
print the page size. Targets (issue 6): < 60 s and < 10 MB at 10M operations.

    python bench/bench_report.py [--events 10000000] [--dir /tmp/bench-report]
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

NS = 1_000_000_000


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
    args = ap.parse_args()
    run_dir = args.dir / f"bench-{args.events}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    t = time.perf_counter()
    info = write_history(run_dir, args.events)
    gen_s = time.perf_counter() - t
    from analysis.registry import ANOMALIES

    ex_op = {"index": 1, "time": int(info["duration"] * 0.55 * NS), "process": "3", "f": "send", "type": "ok"}
    examples = {a: [{"key": 0, "offset": 1000 + i, "value": 7, "offsets": [1000 + i, 999 + i], "ops": [ex_op, ex_op]}
                    for i in range(20)] for a in ANOMALIES}
    (run_dir / "results.json").write_text(json.dumps({
        "verdict": "invalid", "reasons": ["synthetic"], "forbidden": list(ANOMALIES), "counts": dict.fromkeys(ANOMALIES, 20),
        "headline": {"lost": 40, "duplicated": 20, "reordered": 40, "diverged": 20}, "allowed": [], "allowed_by": [],
        "examples": examples, "history": {"events": info["events"]}}))
    (run_dir / "config.json").write_text(json.dumps({"run_id": run_dir.name, "kafka_version": "4.3.1", "brokers": 3,
                                                     "workload": "queue", "nemesis": ["kill", "partition"], "seed": 0}))
    from analysis.report import render_report

    t = time.perf_counter()
    page = render_report(run_dir)
    render_s = time.perf_counter() - t
    size = page.stat().st_size
    print(f"events            {info['events']:,} ({info['duration']:.0f} s of history)")
    print(f"parquet           {(run_dir / 'history.parquet').stat().st_size / 1e6:.0f} MB (generated in {gen_s:.1f} s)")
    print(f"render_report     {render_s:.1f} s   (target < 60 s)")
    print(f"report.html       {size / 1e6:.2f} MB (target < 10 MB)")
    print(f"page              {page}")


if __name__ == "__main__":
    main()
