"""How many brokers the faults held down, over the fault phases of a detect store's runs, per schedule.

For each run of `STORE/<version>/` it walks the history's nemesis events up to the heal and counts,
time-weighted, the share of the fault phase with 0, 1, 2 or 3 brokers killed or paused (a broker
both killed and paused counts once), the share with a network partition in force, the
acknowledged sends, the writes at risk the watch counted, and whether the run found a forbidden
loss or divergence (detect's rule, harness/experiments/detection.py finds_loss). One row per (store, schedule, guided
design), means over its runs. Why: guided designs 3-8 let kill and pause hold two starts each, and
this is how design 9 (one start at a time) was chosen (nemesis/guided/scheduler.py).

It also counts when the faults struck, from config.json's executed schedule: the share of them
within GRID_S of a multiple of the nemesis interval (by chance 2 × GRID_S / interval: 6 % at 10 s),
and, after each stop of `kill` (the restart that makes a follower truncate), how soon another
package's next start came: within 3-8 s is KIP-101's window, after the truncation and before the
follower fetched back. Why: designs 4-9 decided in lockstep on the interval's grid (design 10).

    .venv/bin/python bench/guided_holds.py STORE [STORE ...] [--version 0.10.2.2]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.experiments.detection import results_find_loss  # noqa: E402

DOWN = {"kill": "kill", "pause": "pause"}
UP = {"restart": "kill", "resume": "pause"}
GRID_S = 0.3
WINDOW = (3.0, 8.0)  # seconds after a kill's stop


def moments(nemesis: dict) -> tuple[int, int, int, int]:
    """(faults on the interval's grid, faults, kill stops followed by another package's start within
    WINDOW, kill stops followed by another package's start at all)."""
    interval = nemesis.get("interval_s") or 10.0
    events = nemesis.get("schedule") or []
    on = sum(1 for e in events if abs(e["at_s"] - round(e["at_s"] / interval) * interval) < GRID_S)
    others = [e["at_s"] for e in events if e["package"] != "kill" and e["action"] == "start"]
    gaps = [min(t - e["at_s"] for t in later) for e in events if e["package"] == "kill" and e["action"] == "stop"
            and (later := [t for t in others if t > e["at_s"]])]
    return on, len(events), sum(1 for g in gaps if WINDOW[0] <= g < WINDOW[1]), len(gaps)


def one_run(run: Path) -> dict:
    config = json.loads((run / "config.json").read_text())
    nemesis = config.get("nemesis_config") or {}
    results = json.loads((run / "results.json").read_text()) if (run / "results.json").exists() else {}
    down: dict[int, set[str]] = collections.defaultdict(set)
    share = [0.0] * 4  # seconds with 0, 1, 2, 3 brokers down
    cut, cut_s, last, t0, oks = False, 0.0, None, None, 0
    with (run / "history.jsonl").open() as history:
        for line in history:
            e = json.loads(line)
            t0 = e["time"] if t0 is None else t0
            if e["process"] != "nemesis":
                oks += e["type"] == "ok" and e["f"] == "send"
                continue
            if e["f"] == "observed":
                continue
            t = (e["time"] - t0) / 1e9
            if last is not None:
                share[sum(1 for reasons in down.values() if reasons)] += t - last
                cut_s += (t - last) if cut else 0.0
            last = t
            value = e.get("value") or {}
            if e["f"] in DOWN:
                for b in value.get("targets", []):
                    down[b].add(DOWN[e["f"]])
            elif e["f"] in UP:
                for b in value.get("targets", []):
                    down[b].discard(UP[e["f"]])
            elif e["f"] in ("start-partition", "stop-partition"):
                cut = e["f"] == "start-partition"
            elif e["f"] == "heal":
                break
    total = sum(share) or 1.0
    guided = nemesis.get("guided") or {}
    return {"schedule": nemesis.get("scheduler") or "random", "design": guided.get("design", ""),
            # detect's own rule (a forbidden loss or divergence: an unseen write on a drained log too), so
            # that this table's finds are the ledger's; it counted lost-write and inconsistent-offsets only.
            "find": results_find_loss(results), "oks": oks,
            "down": [x / total for x in share], "cut": cut_s / total,
            "risk": (nemesis.get("observed") or {}).get("writes_at_risk_count") or 0,
            "cuts": (nemesis.get("observed") or {}).get("cuts_count"), "moments": moments(nemesis)}


def _share(runs: list[dict], part: int, whole: int) -> str:
    a, b = sum(r["moments"][part] for r in runs), sum(r["moments"][whole] for r in runs)
    return f"{a / b:.0%} ({a} of {b})" if b else "-"


def _cuts(runs: list[dict]) -> str:
    """Cuts the watch counted (nemesis/guided/risk.py), over the runs that count them (design 11 on)."""
    counted = [r["cuts"] for r in runs if r["cuts"] is not None]
    return f"{sum(counted)} in {len(counted)} runs" if counted else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stores", nargs="+", type=Path, help="detect stores (each holds <version>/<run>/)")
    ap.add_argument("--version", default="0.10.2.2", help="the Kafka version's folder in each store (default 0.10.2.2)")
    args = ap.parse_args()
    rows: dict[tuple, list[dict]] = collections.defaultdict(list)
    for store in args.stores:
        folder = store / args.version
        if not folder.is_dir():
            print(f"error: {folder} is not a folder; pass a detect store and the --version it ran", file=sys.stderr)
            return 2
        for run in sorted(p for p in folder.iterdir() if (p / "config.json").exists()):
            if not (run / "history.jsonl").exists():
                continue  # a run whose history was compacted away, or a replay's
            r = one_run(run)
            rows[(store.name, r["schedule"], r["design"])].append(r)
    print("| store | schedule | runs | finds | acked sends per run | share of the fault phase with 0 / 1 / 2 / 3 "
          f"brokers down | with a partition | writes at risk | cuts (design 11 on) | faults on the interval's grid | kill stops with "
          f"another start {WINDOW[0]:g}-{WINDOW[1]:g} s later |")
    print("|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for (store, schedule, design), runs in rows.items():
        n = len(runs)
        shares = " / ".join(f"{sum(r['down'][i] for r in runs) / n:.2f}" for i in range(4))
        print(f"| {store} | {schedule} {design} | {n} | {sum(r['find'] for r in runs)} | "
              f"{sum(r['oks'] for r in runs) / n:,.0f} | {shares} | {sum(r['cut'] for r in runs) / n:.2f} | "
              f"{sum(r['risk'] for r in runs)} | {_cuts(runs)} | {_share(runs, 0, 1)} | {_share(runs, 2, 3)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
