"""Peak memory of turning a history's JSON Lines into history.parquet (harness/history/files.py),
the whole-list way it was written until 2026-11-25 against the streamed way, side by side on one file.

    python bench/bench_parquet_memory.py RUN_DIR --events 1000000

The JSON Lines file is RUN_DIR's history (JSONL, or its Parquet twin) repeated with fresh indexes
until it holds --events events. Each way runs in a fresh process; its peak RSS (ru_maxrss) and its
seconds are printed, with the ratio, and the two Parquet files must hold the same rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OLD = '''
import sys, json, pyarrow as pa, pyarrow.parquet as pq
from harness.history.files import read_history, dumps
events = read_history(sys.argv[1])
table = pa.table({"index": pa.array([e["index"] for e in events], pa.int64()), "time": pa.array([e["time"] for e in events], pa.int64()),
    "process": pa.array([str(e["process"]) for e in events], pa.string()), "type": pa.array([e["type"] for e in events], pa.string()),
    "f": pa.array([e["f"] for e in events], pa.string()), "value": pa.array([dumps(e.get("value")) for e in events], pa.string()),
    "error": pa.array([e.get("error") for e in events], pa.string())})
pq.write_table(table, sys.argv[2], compression="zstd", compression_level=9)
'''
NEW = '''
import sys
from pathlib import Path
from harness.history.files import write_parquet
write_parquet(Path(sys.argv[1]), Path(sys.argv[2]))
'''


def make_jsonl(run_dir: Path, target: Path, events: int) -> int:
    from harness.history.files import read_history

    source = read_history(run_dir / "history.jsonl")
    written = 0
    with open(target, "w") as out:
        while written < events:
            for e in source:
                out.write(json.dumps({**e, "index": written}) + "\n")
                written += 1
                if written >= events:
                    break
    return written


def run_way(code: str, jsonl: Path, parquet: Path) -> tuple[float, float]:
    script = ("import resource, sys, time\nbegan = time.perf_counter()\n" + code +
              "\nprint(time.perf_counter() - began, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", script, str(jsonl), str(parquet)], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    return float(out[-2]), int(out[-1]) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = Path(tmp) / "history.jsonl"
        n = make_jsonl(args.run_dir, jsonl, args.events)
        print(f"{n} events, {jsonl.stat().st_size / 1e6:.0f} MB of JSON Lines; load {os.getloadavg()[0]:.1f}")
        import pyarrow.parquet as pq

        files, peaks = [], []
        for name, code in (("whole list (before)", OLD), ("streamed (after)", NEW)):
            parquet = Path(tmp) / f"{name[:5]}.parquet"
            seconds, peak = run_way(code, jsonl, parquet)
            files.append(parquet)
            peaks.append(peak)
            print(f"{name:<20} peak RSS {peak:8.0f} MiB  {seconds:6.1f} s  {parquet.stat().st_size / 1e6:.1f} MB")
        a, b = (pq.read_table(f).replace_schema_metadata(None) for f in files)
        print(f"peak ratio before/after {peaks[0] / peaks[1]:.1f}x; same rows: {'yes' if a.equals(b) else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
