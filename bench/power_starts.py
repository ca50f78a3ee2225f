"""Did a power run's cuts strike running brokers, or brokers still starting? Per run directory:

    python bench/power_starts.py STORE/RUN_ID [...]

prints the cuts, the seconds from each `power-on` to the next `power-off`, each broker start's
time to "Kafka Server started" (from the start marks the start script writes to
`brokers/N/stdout.log` and the broker's own `server.log`), and how many starts a cut ended before
the broker finished starting. When a cut comes sooner after `power-on` than brokers take to start,
every broker stays unreachable across cuts (issue 18: 6 of 9 target-`all` runs on 2026-11-24).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

STARTED = "Kafka Server started"


def _utc(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def broker_starts(broker_dir: Path) -> list[tuple[dt.datetime, dt.datetime | None]]:
    """(start, started or None when the broker was stopped before it finished starting)."""
    starts = [_utc(line.split()[2]) for line in (broker_dir / "stdout.log").read_text(errors="replace").splitlines()
              if line.startswith("--- start ")]
    started = [dt.datetime.strptime(line[1:24], "%Y-%m-%dT%H:%M:%S,%f").replace(tzinfo=dt.timezone.utc)
               for line in (broker_dir / "server.log").read_text(errors="replace").splitlines() if STARTED in line]
    out = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else None
        done = [t for t in started if t >= start and (end is None or t < end)]
        out.append((start, done[0] if done else None))
    return out


def power_gaps(history: Path) -> tuple[int, list[float]]:
    """The number of cuts, and the seconds from each power-on to the next power-off."""
    events = [json.loads(line) for line in history.read_text().splitlines() if '"power-o' in line]
    ons = [e["time"] / 1e9 for e in events if e["f"] == "power-on"]
    offs = [e["time"] / 1e9 for e in events if e["f"] == "power-off"]
    return len(offs), [round(min(o for o in offs if o > t) - t, 1) for t in ons if any(o > t for o in offs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", type=Path)
    args = parser.parse_args()
    for run_dir in args.run_dirs:
        cuts, gaps = power_gaps(run_dir / "history.jsonl")
        starts = [s for b in sorted((run_dir / "brokers").iterdir()) if (b / "stdout.log").exists()
                  for s in broker_starts(b)]
        took = sorted(round((done - start).total_seconds(), 1) for start, done in starts if done)
        cut_early = sum(1 for _, done in starts if done is None)
        print(f"{run_dir.name}: {cuts} cuts; power-on to next cut {gaps} s; start to started {took} s; "
              f"{cut_early} of {len(starts)} starts cut before '{STARTED}'")


if __name__ == "__main__":
    main()
