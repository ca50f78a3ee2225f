"""How often a power cut loses acknowledged data, by profile and target: seeded runs, checked.

    python bench/bench_lossyfs_sweep.py --store /tmp/power-sweep [--seeds 10 | --seeds 3..9]
        [--time-limit 60] [--profiles safe,fsync,unsafe] [--targets one,all] [--kafka-version 4.3.1]

Each cell runs one real run per seed (queue workload, 3 brokers, `--nemesis power` with that one
target), checks each (Spark, one session for all) and counts the runs that lost acknowledged
data: a `lost-write`, or an `inconsistent-offsets` (an acknowledged record's offset later held
another record, so the acknowledged one is gone). Worst-case loss model. The figures are
findings, not pass/fail; a line per run shows its verdict, counts and bytes dropped.

Seeds are the outer loop, so a sweep stopped early leaves every cell with about as many seeds.
Every checked run is appended to STORE/power-sweep.jsonl, and a run already there (same
version, profile, target, seed, time limit and interval) is not repeated: a stopped sweep
resumes, and the table at the end counts the whole ledger.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.errors import HarnessError  # noqa: E402
from harness.run.finish import Finisher  # noqa: E402
from harness.provision.settings import kafka_version as resolve_version  # noqa: E402
from harness.run.steps import TOPIC, run  # noqa: E402
from harness.run.config import RunConfig  # noqa: E402
from nemesis.power import PowerNemesis  # noqa: E402
from nemesis.runner import FaultRunner  # noqa: E402

LOSS_KINDS = ("lost-write", "inconsistent-offsets")


def dropped_bytes(run_dir: Path) -> int:
    total = 0
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        if '"power-off"' in line:
            total += json.loads(line)["value"].get("dropped_bytes", 0)
    return total


def parse_seeds(text: str) -> list[int]:
    """'10' is seeds 0..9 (as the first sweep numbered them); '3..9' is that range, both ends in."""
    if ".." in text:
        first, last = (int(part) for part in text.split("..", 1))
        return list(range(first, last + 1))
    return list(range(int(text)))


def key(row: dict) -> tuple:
    return (row["version"], row["profile"], row["target"], row["seed"], row["time_limit_s"], row["interval_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--seeds", default="10", help="a count N (seeds 0..N-1) or a range A..B")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--profiles", default="safe,fsync,unsafe")
    parser.add_argument("--targets", default="one,all")
    parser.add_argument("--kafka-version", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    ledger = args.store / "power-sweep.jsonl"
    args.store.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()] if ledger.exists() else []
    done = {key(r) for r in rows}
    version = resolve_version(args.kafka_version)
    finisher = Finisher()
    for seed in parse_seeds(args.seeds):
        for profile in args.profiles.split(","):
            for target in args.targets.split(","):
                row = {"version": version, "profile": profile, "target": target, "seed": seed,
                       "time_limit_s": args.time_limit, "interval_s": args.interval}
                if key(row) in done:
                    continue
                config = RunConfig(store=args.store, profile=profile, time_limit_s=args.time_limit, seed=seed,
                                   nemesis="power", kafka_version=version)
                faults = FaultRunner({"power": PowerNemesis((target,))}, args.time_limit, interval_s=args.interval,
                                     seed=seed, topic=TOPIC)
                try:
                    result = run(config, faults=faults)
                except HarnessError as exc:  # a run that could not complete has no verdict: run it again later
                    print(f"{profile:<7} {target:<4} seed {seed}: FAILED {exc.message}", flush=True)
                    continue
                results = finisher.check_and_report(result.run_dir).results
                counts = {k: v for k, v in results.get("counts", {}).items() if v}
                row.update(verdict=results["verdict"], lost=any(counts.get(k, 0) for k in LOSS_KINDS),
                           dropped_bytes=dropped_bytes(result.run_dir), counts=counts, run_dir=str(result.run_dir))
                with ledger.open("a") as out:
                    out.write(json.dumps(row) + "\n")
                rows.append(row)
                print(f"{profile:<7} {target:<4} seed {seed}: {row['verdict']:<8} lost acked: {'yes' if row['lost'] else 'no ':<4} "
                      f"dropped {row['dropped_bytes']:>10,} B  {counts}  {result.run_dir}", flush=True)
    print("\nruns that lost acknowledged data (worst-case model), whole ledger:")
    table: dict[tuple[str, str], list[bool]] = {}
    for r in rows:
        if r["version"] == version and r["time_limit_s"] == args.time_limit and r["interval_s"] == args.interval:
            table.setdefault((r["profile"], r["target"]), []).append(r["lost"])
    for (profile, target), lost in sorted(table.items()):
        print(f"  {profile:<7} target {target:<4}: {sum(lost)} of {len(lost)}")


if __name__ == "__main__":
    main()
