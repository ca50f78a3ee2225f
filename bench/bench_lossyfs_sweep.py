"""How often a power cut loses acknowledged data, by profile and target: seeded runs, checked.

    python bench/bench_lossyfs_sweep.py --store /tmp/power-sweep [--seeds 10] [--time-limit 60]
        [--profiles safe,fsync,unsafe] [--targets one,all] [--kafka-version 4.3.1]

Each cell runs `--seeds` real runs (queue workload, 3 brokers, `--nemesis power` with that one
target, seeds 0..n-1), checks each (Spark, one session for all) and counts the runs that lost
acknowledged data: a `lost-write`, or an `inconsistent-offsets` (an acknowledged record's offset
later held another record, so the acknowledged one is gone). Worst-case loss model. The figures
are findings, not pass/fail; a line per run shows its verdict, counts and bytes dropped.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.finish import Finisher  # noqa: E402
from harness.run import TOPIC, run  # noqa: E402
from harness.run_config import RunConfig  # noqa: E402
from nemesis.power import PowerNemesis  # noqa: E402
from nemesis.runner import FaultRunner  # noqa: E402

LOSS_KINDS = ("lost-write", "inconsistent-offsets")


def dropped_bytes(run_dir: Path) -> int:
    total = 0
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        if '"power-off"' in line:
            total += json.loads(line)["value"].get("dropped_bytes", 0)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--profiles", default="safe,fsync,unsafe")
    parser.add_argument("--targets", default="one,all")
    parser.add_argument("--kafka-version", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    finisher = Finisher()
    table: dict[tuple[str, str], list[bool]] = {}
    for profile in args.profiles.split(","):
        for target in args.targets.split(","):
            for seed in range(args.seeds):
                config = RunConfig(store=args.store, profile=profile, time_limit_s=args.time_limit, seed=seed,
                                   nemesis="power", kafka_version=args.kafka_version)
                faults = FaultRunner({"power": PowerNemesis((target,))}, args.time_limit, interval_s=args.interval,
                                     seed=seed, topic=TOPIC)
                result = run(config, faults=faults)
                results = finisher.check_and_report(result.run_dir).results
                counts = results.get("counts", {})
                lost = any(counts.get(k, 0) for k in LOSS_KINDS)
                table.setdefault((profile, target), []).append(lost)
                found = {k: v for k, v in counts.items() if v}
                print(f"{profile:<7} {target:<4} seed {seed}: {results['verdict']:<8} lost acked: {'yes' if lost else 'no ':<4} "
                      f"dropped {dropped_bytes(result.run_dir):>10,} B  {found}  {result.run_dir}", flush=True)
    print("\nruns that lost acknowledged data (worst-case model):")
    for (profile, target), lost in table.items():
        print(f"  {profile:<7} target {target:<4}: {sum(lost)} of {len(lost)}")


if __name__ == "__main__":
    main()
