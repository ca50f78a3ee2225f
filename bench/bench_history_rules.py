"""What the Spark loader's int-type rule costs (analysis/checking/history_load.py WRONG_INT): a JSONL
history of N events loaded and validated with the rule and without it, alternating, in one run.

    python bench/bench_history_rules.py                 # 2M events, 3 pairs
    python bench/bench_history_rules.py --events 500000 --repeat 5

The rule is one regex over each client event's value text; without it, `"offset": "7"` is
nulled by from_json and passes (the plain validator refuses it). Only JSON text pays: a Parquet
history with a typed value column has no text to scan.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def write_history(path: Path, events: int) -> None:
    """Sends (invoke, ok) on 8 keys and polls of 50 records, in the recorder's own JSON."""
    lines, offsets, index, n = [], [0] * 8, 0, 0
    while index < events:
        for _ in range(50):
            key = n % 8
            lines.append('{"index":%d,"time":%d,"process":%d,"type":"invoke","f":"send","value":{"key":%d,"value":%d}}'
                         % (index, index * 1000, n % 4, key, n))
            lines.append('{"index":%d,"time":%d,"process":%d,"type":"ok","f":"send","value":{"key":%d,"value":%d,"offset":%d,"epoch":1}}'
                         % (index + 1, index * 1000 + 500, n % 4, key, n, offsets[key]))
            offsets[key] += 1
            index, n = index + 2, n + 1
        records = ",".join('{"key":%d,"offset":%d,"value":%d,"epoch":1}' % (v % 8, 0, v) for v in range(n - 50, n))
        lines.append('{"index":%d,"time":%d,"process":9,"type":"invoke","f":"poll","value":null}' % (index, index * 1000))
        lines.append('{"index":%d,"time":%d,"process":9,"type":"ok","f":"poll","value":{"records":[%s]}}'
                     % (index + 1, index * 1000 + 1, records))
        index += 2
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from analysis.checking import history_load
    from analysis.checking.spark import get_session

    spark = get_session("local[2]", driver_memory="2g")
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        began = time.monotonic()
        write_history(run_dir / "history.jsonl", args.events)
        size = (run_dir / "history.jsonl").stat().st_size
        print(f"history: {args.events:,} events, {size / 1e6:.0f} MB, written in {time.monotonic() - began:.1f} s")
        history_load.load_history(spark, run_dir).release()  # warm-up: JIT, file cache
        samples: dict[bool, list[float]] = {True: [], False: []}
        for i in range(args.repeat):
            for rule in ((True, False) if i % 2 == 0 else (False, True)):
                history_load.TYPE_RULE = rule
                began = time.monotonic()
                history_load.load_history(spark, run_dir).release()
                samples[rule].append(time.monotonic() - began)
        history_load.TYPE_RULE = True
    on, off = statistics.median(samples[True]), statistics.median(samples[False])
    print(f"load + validate, with the type rule:    median {on:.2f} s  samples {[round(s, 2) for s in samples[True]]}")
    print(f"load + validate, without the type rule: median {off:.2f} s  samples {[round(s, 2) for s in samples[False]]}")
    print(f"ratio with/without: {on / off:.2f}x")


if __name__ == "__main__":
    main()
