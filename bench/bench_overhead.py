"""Fixed costs from command to verdict (issue 34, item 4), side by side in one run:

- the check of one history by `python -m analysis check` in a fresh process, three ways:
  embedded (a new JVM in the process, as every check was before the local checker), the local
  checker started by this check (cold), and the local checker already up (warm);
- with --run: `python -m harness run` from command to verdict, minus its --time-limit, on a warm
  local checker.

    python bench/bench_overhead.py --run-dir store/RUN          # a real run's history (~60k events: 30 s)
    python bench/bench_overhead.py --events 60000               # a synthetic one (bench_checker's shape)
    python bench/bench_overhead.py --run-dir store/RUN --run 30 --repeat 3

The local checker here is the bench's own (a private KAFKA_CHAOS_CHECKER_DIR), stopped at the end;
a user's running checker is not touched. Every check must write the same results.json as the
embedded one (bar checked_at and the history's path, absolute on the server): the bench says so.
The machine's load average is printed before and after: on a shared machine, compare the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def synthetic(folder: Path, events: int) -> Path:
    from bench.bench_checker import generate

    run = folder / "synthetic"
    run.mkdir(parents=True)
    shape = generate(run / "history.parquet", events)
    (run / "config.json").write_text(json.dumps({"drain": {"complete": True, "high_watermarks": {}}}))
    print(f"synthetic history: {shape['events']} events")
    return run


def copy_run(src: Path, folder: Path) -> Path:
    run = folder / src.name
    shutil.copytree(src, run, ignore=shutil.ignore_patterns("results*.json", "report*.html", "brokers"))
    return run


def check(run: Path, out: Path, env: dict[str, str], *args: str) -> tuple[float, dict]:
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "analysis", "check", "--json", "--output", str(out), *args, str(run)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    seconds = time.perf_counter() - began
    if proc.returncode not in (0, 1, 3):
        log = Path(env["KAFKA_CHAOS_CHECKER_DIR"]) / "server.log"
        lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
        first = next((i for i, line in enumerate(lines) if "Traceback" in line or "Exception" in line), len(lines))
        sys.exit(f"check failed ({proc.returncode}):\n{proc.stderr[-3000:]}\n" + "\n".join(lines[first:first + 80]))
    noise = [line for line in proc.stderr.splitlines() if line.strip()]
    if noise:
        print(f"  stderr had {len(noise)} line(s), first: {noise[0][:120]}")
    return seconds, json.loads((out / "results.json").read_text())


def comparable(results: dict) -> str:
    r = json.loads(json.dumps(results))
    r.pop("checked_at", None)
    r.get("history", {}).pop("path", None)
    return json.dumps(r, sort_keys=True)


def chaos_run(seconds: int, store: Path, env: dict[str, str]) -> float:
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "harness", "run", "--time-limit", str(seconds), "--store", str(store)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    wall = time.perf_counter() - began
    if proc.returncode not in (0, 1, 3):
        sys.exit(f"harness run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--run-dir", type=Path, help="A run directory whose history to check (copied; results not touched).")
    source.add_argument("--events", type=int, default=60_000, help="Synthetic history of about N events (default 60000).")
    parser.add_argument("--repeat", type=int, default=3, help="Warm checks (and embedded ones) to take the median of.")
    parser.add_argument("--run", type=int, default=0, metavar="SECONDS",
                        help="Also time `harness run --time-limit SECONDS` on the warm checker (needs Docker).")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    env = {**os.environ, "KAFKA_CHAOS_CHECKER_DIR": str(folder / "checker")}
    env.pop("SPARK_REMOTE", None)
    embedded = {**env, "KAFKA_CHAOS_CHECKER": "embedded"}
    try:
        run = copy_run(args.run_dir, folder) if args.run_dir else synthetic(folder, args.events)
        print(f"before: {load()}")
        rows: list[tuple[str, float, str]] = []
        reference = None
        results: dict = {}
        # Interleaved, so that a burst of load from the machine's other tenants hits both sides.
        cold, _ = None, None
        emb, warm = [], []
        for i in range(args.repeat):
            s, results = check(run, folder / f"emb{i}", embedded)
            emb.append(s)
            reference = reference or comparable(results)
            if cold is None:
                cold, r = check(run, folder / "cold", env)
                rows.append(("local checker, cold (starts the server)", cold, "same" if comparable(r) == reference else "DIFFERENT"))
            s, r = check(run, folder / f"warm{i}", env)
            warm.append(s)
            if comparable(r) != reference:
                rows.append((f"local checker, warm #{i + 1}", s, "DIFFERENT"))
        same = all(row[2] == "same" for row in rows)
        events = results.get("history", {}).get("events")
        print(f"history: {events} events; verdict {results.get('verdict')}")
        print(f"{'check (fresh `python -m analysis check` process)':<52} {'seconds':>8}")
        print(f"{'embedded Spark (a new JVM), median of ' + str(len(emb)):<52} {statistics.median(emb):>8.1f}   {emb}")
        print(f"{'local checker, cold (starts the server)':<52} {cold:>8.1f}")
        print(f"{'local checker, warm, median of ' + str(len(warm)):<52} {statistics.median(warm):>8.1f}   "
              f"{[round(s, 1) for s in warm]}")
        print(f"warm/embedded: {statistics.median(warm) / statistics.median(emb):.2f}; results.json "
              f"{'the same' if same else 'DIFFERENT'} as embedded (bar checked_at, history path)")
        if args.run:
            wall = chaos_run(args.run, folder / "store", env)
            print(f"`harness run --time-limit {args.run}` on the warm checker: {wall:.1f} s from command to verdict, "
                  f"overhead {wall - args.run:.1f} s")
        print(f"after: {load()}")
    finally:
        from analysis.spark_server import stop

        stop(folder / "checker")
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
