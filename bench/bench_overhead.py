"""Fixed costs from command to verdict (issue 34, item 4), side by side in one run:

- the check of one history by `python -m analysis check` in a fresh process, three ways:
  embedded (a new JVM in the process, as every check was before the local checker), the local
  checker started by this check (cold), and the local checker already up (warm);
- the local checker started ahead of its first check, as `./chaos run` starts it: it warms up on a
  synthetic history (analysis/checking/warmup.py), then checks this one;
- with --run: `./chaos run` from command to verdict, minus its --time-limit, first on a stopped
  checker (a session's first run), then on the warm one (its phases, ok ops and the check's own
  time beside it).

    python bench/bench_overhead.py --run-dir store/RUN          # a real run's history (~60k events: 30 s)
    python bench/bench_overhead.py --events 60000               # a synthetic one (bench_checker's shape)
    python bench/bench_overhead.py --run-dir store/RUN --run 30 --run-repeat 2 --repeat 3

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
NOISE = ("Using incubator modules", "Setting default log level", "setLogLevel", "log4j", "SLF4J")
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
    r.pop("timings", None)
    r.get("history", {}).pop("path", None)
    return json.dumps(r, sort_keys=True)


def chaos_run(seconds: int, store: Path, env: dict[str, str]) -> tuple[float, str]:
    """`./chaos run` (its default: a mixed safe fault schedule, healed) from command to verdict;
    the wall time and where it went (the run's phases, the check's own time)."""
    began = time.perf_counter()
    proc = subprocess.run([str(ROOT / "chaos"), "run", "--time-limit", str(seconds), "--store", str(store)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    wall = time.perf_counter() - began
    if proc.returncode not in (0, 1, 3):
        sys.exit(f"./chaos run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    run = Path(proc.stdout.strip().splitlines()[-1])
    config = json.loads((run / "config.json").read_text())
    phases, sends = config.get("seconds", {}), config.get("counts", {}).get("ok")
    check_s = json.loads((run / "results.json").read_text()).get("timings", {}).get("total_s")
    parts = ", ".join(f"{k} {v:.1f}" for k, v in phases.items()) + f", {sends} ok ops"
    noise = [line for line in proc.stderr.splitlines() if any(n in line for n in NOISE)]
    return wall, f"{parts}, check (its own) {check_s} s; {len(noise)} line(s) of Spark/JVM/log4j on the terminal"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--run-dir", type=Path, help="A run directory whose history to check (copied; results not touched).")
    source.add_argument("--events", type=int, default=60_000, help="Synthetic history of about N events (default 60000).")
    parser.add_argument("--repeat", type=int, default=3, help="Warm checks (and embedded ones) to take the median of.")
    parser.add_argument("--run", type=int, default=0, metavar="SECONDS",
                        help="Also time `./chaos run --time-limit SECONDS` on the warm checker (needs Docker).")
    parser.add_argument("--run-repeat", type=int, default=1, help="With --run: runs on the warm checker after the first.")
    parser.add_argument("--keep", action="store_true", help="Keep the bench's folder (its runs and results) and say where.")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    env = {**os.environ, "KAFKA_CHAOS_CHECKER_DIR": str(folder / "checker")}
    env.pop("SPARK_REMOTE", None)
    embedded = {**env, "KAFKA_CHAOS_CHECKER": "embedded"}
    try:
        run = copy_run(args.run_dir, folder) if args.run_dir else synthetic(folder, args.events)
        print(f"before: {load()}")
        from analysis.checking import spark_server
        reference, results, differ = None, {}, []
        rows: dict[str, list[tuple[float, float]]] = {"embedded": [], "cold": [], "warm": []}
        servers = set()
        # Interleaved, so that a burst of load from the machine's other tenants hits every kind.
        for i in range(args.repeat):
            wall, results = check(run, folder / f"emb{i}", embedded)
            rows["embedded"].append((wall, results["timings"]["total_s"]))
            reference = reference or comparable(results)
            for kind in (["cold"] if i == 0 else []) + ["warm"]:
                wall, r = check(run, folder / f"{kind}{i}", env)
                state = spark_server.read_state(folder / "checker") or {}
                fresh = (state.get("pid"), state.get("started")) not in servers
                servers.add((state.get("pid"), state.get("started")))
                # A warm check that found a new server (analysis/*.py changed under it) was cold.
                rows["cold" if kind == "cold" or fresh else "warm"].append((wall, r["timings"]["total_s"]))
                if comparable(r) != reference:
                    differ.append(f"{kind} #{i + 1}")
        # The checker started ahead of its first check (as `./chaos run` starts it when its workload
        # begins): it warms up on a synthetic history (analysis/checking/warmup.py), then this check.
        spark_server.stop(folder / "checker")
        os.environ["KAFKA_CHAOS_CHECKER_DIR"] = env["KAFKA_CHAOS_CHECKER_DIR"]
        spark_server.ensure()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and (spark_server.warmup_status(folder / "checker") or {}).get("state") in (None, "running"):
            time.sleep(0.5)
        warm_up = spark_server.warmup_status(folder / "checker") or {}
        wall, r = check(run, folder / "ahead", env)
        rows["ahead"] = [(wall, r["timings"]["total_s"])]
        if comparable(r) != reference:
            differ.append("started ahead")
        events = results.get("history", {}).get("events")
        print(f"history: {events} events; verdict {results.get('verdict')}")
        print(f"{'one check, a fresh `python -m analysis check`':<46} {'wall s':>8} {'own s':>8}   samples (wall/own)")
        names = {"embedded": "embedded Spark (a new JVM)", "cold": "local checker, cold (starts it)",
                 "warm": "local checker, warm", "ahead": "started ahead, warmed up, its 1st check"}
        for kind, samples in rows.items():
            if samples:
                walls, owns = [w for w, _ in samples], [o for _, o in samples]
                print(f"{names[kind] + f', median of {len(samples)}':<46} {statistics.median(walls):>8.1f} "
                      f"{statistics.median(owns):>8.1f}   {', '.join(f'{w:.1f}/{o:.1f}' for w, o in samples)}")
        if rows["warm"]:
            med = {k: (statistics.median([w for w, _ in v]), statistics.median([o for _, o in v])) for k, v in rows.items() if v}
            print(f"warm/embedded: wall {med['warm'][0] / med['embedded'][0]:.2f}, own {med['warm'][1] / med['embedded'][1]:.2f}")
        print(f"the warm-up before that check: {warm_up.get('state')}, {warm_up.get('checks')} checks "
              f"({', '.join(f'{x:.1f}' for x in warm_up.get('check_s') or [])} s) in {warm_up.get('seconds')} s")
        print(f"results.json: {'the same' if not differ else 'DIFFERENT in ' + ', '.join(differ)} as embedded "
              "(bar checked_at, timings, history path)")
        if args.run:
            # The first run of a session (the checker stopped: it starts as the workload begins and
            # warms up meanwhile), then runs on the warm checker, side by side.
            spark_server.stop(folder / "checker")
            for name in ["a stopped checker (a session's first run)"] + ["the warm checker"] * args.run_repeat:
                wall, where = chaos_run(args.run, folder / "store", env)
                print(f"`./chaos run --time-limit {args.run}` on {name}: {wall:.1f} s from command to verdict, "
                      f"overhead {wall - args.run:.1f} s ({where})")
        print(f"after: {load()}")
    finally:
        from analysis.checking.spark_server import stop

        stop(folder / "checker")
        if args.keep:
            print(f"kept: {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
