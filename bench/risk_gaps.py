"""How soon after its own truncation was each new leader elected, in runs that diverged and runs
that did not? The evidence behind design 6's risk window (nemesis/guided/risk.py has design 7's):

    python bench/risk_gaps.py LEDGER.jsonl [...]      # detect's ledger (STORE/detection.jsonl)

Reads each run's broker logs with the watch's own line rules (nemesis/guided/loglines.py), by log
timestamp: for every election of a workload partition, the time since the new leader last
truncated that partition (within 30 s) and the offset it truncated to. Per run it prints the
verdict, the watch's own count of writes at risk (`at_risk` in the ledger, when recorded), the
shortest gaps, and, for a run with offsets acknowledged twice, whether an election came from a
truncation to one of those very offsets (`to a diverged offset`) and after how long.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nemesis.guided.loglines import classify, elected, partition_pattern, truncated_to  # noqa: E402
from nemesis.guided.risk import TRUNCATIONS  # noqa: E402

LOOK_BACK_S = 30.0


def _when(line: str) -> float | None:
    try:
        return dt.datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    except ValueError:
        return None


def gaps(run: Path, topic: str = "queue") -> list[tuple[float, int, int, int]]:
    """(seconds from the new leader's own truncation to its election, partition, leader, truncated to)."""
    names = partition_pattern(topic)
    truncations: dict[tuple[int, int], tuple[float, int]] = {}
    events = []
    for log in sorted(run.glob("brokers/*/server.log")):
        broker = int(log.parent.name)
        for line in log.read_text(errors="replace").splitlines():
            when = _when(line)
            fact = classify(line, topic, broker, names) if when is not None else None
            if fact is not None and fact.partition is not None:
                events.append((when, line, fact))
    out = []
    for when, line, fact in sorted(events, key=lambda e: e[0]):
        if fact.kind in TRUNCATIONS and fact.broker is not None:
            to = truncated_to(line)
            truncations[(fact.partition, fact.broker)] = (when, -1 if to is None else to)
        elif fact.kind == "leader":
            leader = elected(line, fact)
            before = truncations.get((fact.partition, leader)) if leader is not None else None
            if before is not None and when - before[0] <= LOOK_BACK_S:
                out.append((round(when - before[0], 1), fact.partition, leader, before[1]))
    return out


def diverged(run: Path) -> set[tuple[int, int]]:
    """(partition, offset) of every offset acknowledged for two values (results.json's examples)."""
    try:
        results = json.loads((run / "results.json").read_text())
    except (OSError, ValueError):
        return set()
    return {(int(e["key"]), int(e["offset"])) for e in (results.get("examples") or {}).get("inconsistent-offsets", [])}


def runs(ledgers: list[Path]) -> Iterator[tuple[dict, Path]]:
    """(ledger row, its run directory) of every run still on disk; a line for each one gone."""
    for ledger in ledgers:
        for row in map(json.loads, ledger.read_text().splitlines()):
            run = Path(row["run_dir"])
            if run.exists():
                yield row, run
            else:
                print(f"{row['seed']:>3} {row['settings'].get('schedule', '-'):<7} {run.name}: run directory gone")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ledgers", nargs="+", type=Path)
    args = parser.parse_args()
    for row, run in runs(args.ledgers):
        found = gaps(run)
        cut = diverged(run)
        hits = [f"{g} s (queue-{p} to {o})" for g, p, _, o in found if (p, o) in cut]
        print(f"{row['seed']:>3} {row['settings'].get('schedule', '-'):<7} {row['verdict']:<8} "
              f"forbidden={','.join(row['forbidden']) or '-':<40} at_risk={row.get('at_risk', '-')!s:<4} "
              f"shortest={sorted(g for g, *_ in found)[:4]} to a diverged offset={hits or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
