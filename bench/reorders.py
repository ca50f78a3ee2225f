"""What `reassign`'s reorders did in a detect store (issue 38, KIP-279 on 1.1.1): per reorder, the
partition, the old leader's place in the new order, whether Kafka took the move and ran the
preferred election, and which faults struck the new leader within WINDOW seconds of the election
(KIP-279's divergence needs the new leader to fail while the old one, next in line, still holds
its tail).

    python bench/reorders.py STORE [--window 10]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.history.faults import KILL, PARTITION, PAUSE, REASSIGN  # noqa: E402

STRIKES = (KILL.start, PAUSE.start, PARTITION.start)


def reorders(history: Path, window: float) -> list[dict]:
    events = []
    with history.open() as f:
        for line in f:
            if '"nemesis"' in line:
                e = json.loads(line)
                if e.get("process") == "nemesis":
                    events.append(e)
    out = []
    for i, e in enumerate(events):
        v = e.get("value") or {}
        if e["f"] != REASSIGN.start or v.get("move") != "reorder" or not v.get("steps"):
            continue
        part = v["partition"]
        old = next((int(b) for b, roles in (v.get("roles") or {}).items() if f"leader:{part}" in roles), None)
        order = v["steps"][0]
        done = next((x for x in events[i + 1:] if x["f"] == REASSIGN.stop and (x["value"] or {}).get("partition") == part), None)
        steps = (done or {}).get("value", {}).get("steps") or []
        elected = bool(steps) and steps[-1].get("exit") == 0 and "election" in steps[-1]
        struck = []
        if elected:
            at = done["time"] / 1e9
            struck = [f"{x['f']}@{x['time'] / 1e9 - at:+.1f}s" for x in events if x["f"] in STRIKES
                      and at <= x["time"] / 1e9 <= at + window and order[0] in ((x["value"] or {}).get("targets") or [])]
        out.append({"t": round(e["time"] / 1e9, 1), "partition": part, "from": v.get("from"), "order": order,
                    "old_leader": old, "old_place": order.index(old) + 1 if old in order else None,
                    "elected": elected, "struck": struck})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--window", type=float, default=10.0)
    args = ap.parse_args()
    runs = sorted(args.store.glob("*/*/history.jsonl"))
    if not runs:
        print(f"no run with a history.jsonl under {args.store}/<version>/", file=sys.stderr)
        return 2
    total = {"reorders": 0, "elected": 0, "second": 0, "struck": 0, "struck_second": 0}
    for h in runs:
        config = json.loads((h.parent / "config.json").read_text())
        for r in reorders(h, args.window):
            total["reorders"] += 1
            total["elected"] += r["elected"]
            total["second"] += r["elected"] and r["old_place"] == 2
            total["struck"] += bool(r["struck"])
            total["struck_second"] += bool(r["struck"]) and r["old_place"] == 2
            print(f"{h.parent.name} seed {config.get('seed')} {'guided' if 'guided' in (config.get('nemesis_config') or {}) else 'random':7} {r}")
    print(total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
