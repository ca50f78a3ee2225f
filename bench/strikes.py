"""What guided design 12's strikes did, per run of a detect store, beside the random runs' cuts.

Design 12 (nemesis/guided/scheduler.py) strikes a partition's leader with kill or pause the moment
the watch reads a cut made by a partition alone: a follower truncated below an acknowledged offset
and kept from its live leader. For each run of `STORE/<version>/` this prints the schedule and
seed, the cuts the watch counted (every watched run counts them, random's too), the strikes and how
many hit a broker (a strike whose partition had no leader in the metadata is skipped), the writes
at risk (an election of a cut follower, nemesis/guided/risk.py), the truncations a broker refused
(a leader elected with a shorter log than an in-sync follower's: KIP-101's precondition), and
whether the run found a forbidden loss or divergence (detect's rule). Then totals per schedule.

    .venv/bin/python bench/strikes.py STORE [--version 0.10.2.2]

Exit 2 when the store holds no run of that version.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.experiments.detection import results_find_loss  # noqa: E402


def one_run(run: Path) -> dict | None:
    try:
        config = json.loads((run / "config.json").read_text())
        results = json.loads((run / "results.json").read_text())
    except (OSError, ValueError):
        return None  # not checked (a FAILED run): nothing to say
    nemesis = config.get("nemesis_config") or {}
    guided = nemesis.get("guided") or {}
    observed = nemesis.get("observed") or {}
    starts = [e for e in nemesis.get("schedule") or [] if e["action"] == "start"]
    strikes = [d for d in guided.get("decisions") or [] if d.get("on") == "cut"]

    def executed(d: dict) -> dict:
        """The executed start of a strike: its package's first start at or after the decision (the
        schedule records when the fault struck, a look at the metadata later)."""
        return next((e for e in starts if e["package"] == d["package"] and e["at_s"] >= d["at_s"] - 0.001), {})
    hit = sum(1 for d in strikes if executed(d).get("params", {}).get("targets"))
    return {"run": run.name, "schedule": nemesis.get("scheduler") or ("guided" if guided else "random"),
            "design": guided.get("design", ""), "seed": config.get("seed"), "cuts": observed.get("cuts_count", 0),
            "strikes": len(strikes), "hit": hit, "risks": observed.get("writes_at_risk_count", 0),
            "refused": (results.get("truncation_refused") or {}).get("count", 0), "find": results_find_loss(results)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--version", default="0.10.2.2")
    args = ap.parse_args(argv)
    folder = args.store / args.version
    runs = [r for r in (one_run(d) for d in sorted(folder.iterdir()) if d.is_dir()) if r] if folder.is_dir() else []
    if not runs:
        print(f"no checked run of {args.version} in {args.store}: pass a detect store (its runs are in "
              f"STORE/{args.version}/)", file=sys.stderr)
        return 2
    cols = ("run", "schedule", "seed", "cuts", "strikes", "hit", "risks", "refused", "find")
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    total: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in runs:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
        t = total[r["schedule"]]
        t["runs"] += 1
        for c in ("cuts", "strikes", "hit", "risks", "refused", "find"):
            t[c] += int(r[c])
        t["runs with a risk"] += r["risks"] > 0
        t["runs with a refusal"] += r["refused"] > 0
    for schedule, t in sorted(total.items()):
        print(f"{schedule}: " + ", ".join(f"{k} {v}" for k, v in t.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
