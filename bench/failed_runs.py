"""How many runs with faults ended FAILED, not with a verdict (issue 34, item 6): the sweeps' ledgers
in bench/results, counted together, each FAILED run with its cause.

    python bench/failed_runs.py [--since 20261125T002719] [--ledgers 'bench/results/*.jsonl']

Issue 34 asks for at most 1 harness-made FAILED run in 100 runs with faults, and lets the other
issues' sweeps count. Every sweep here keeps a ledger with one row per finished run, FAILED ones
included (detect and compare-clients write `"verdict": "failed"` with the one-line cause;
bench/ops_table.py writes `"failed": true`, its cause being the run's FAILED file in the store).
A resumed sweep appends a re-run of a seed as a new row, so counting lines counts every run.

Not runs, so left out: the soak's RSS samples (soak-*.jsonl) and the re-check of stored histories
under stricter rules (stricter-rules-*.jsonl). --since keeps the runs whose id (a UTC timestamp)
is later, to count only what ran after a fix.
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_RUNS = ("soak-", "stricter-rules-")


def runs(pattern: str) -> list[dict]:
    """One dict per run: ledger, run id, failed cause (None when the run got a verdict)."""
    out = []
    for path in sorted(glob.glob(pattern)):
        name = Path(path).name
        if name.startswith(NOT_RUNS):
            continue
        for n, line in enumerate(open(path), 1):
            if not line.strip():
                continue
            row = json.loads(line)
            where = row.get("run_dir") or row.get("run") or ""
            stamp = re.search(r"\d{8}T\d{6}", where)
            if stamp is None:
                sys.exit(f"{name}:{n}: no run id in the row; is this a ledger of runs? (pass --ledgers)")
            failed = row.get("failed")
            verdict = row.get("verdict")
            if failed is True:  # ops_table's ledgers keep a flag; the cause is in the store's FAILED file
                failed = "FAILED (cause in the run's FAILED file)"
            elif not failed and verdict in (None, "failed", "FAILED"):
                failed = f"no verdict (verdict={verdict!r})"
            out.append({"ledger": name, "run": Path(where).name, "stamp": stamp.group(0),
                        "failed": failed or None, "verdict": verdict})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ledgers", default=str(ROOT / "bench/results/*.jsonl"), help="glob of the ledgers")
    ap.add_argument("--since", default="", help="count only runs whose id is later than this UTC stamp")
    args = ap.parse_args()
    if args.since and not re.fullmatch(r"\d{8}T\d{6}", args.since):
        print(f"--since {args.since!r}: give a run id's stamp, e.g. 20261125T002719", file=sys.stderr)
        return 2
    every = runs(args.ledgers)
    if not every:
        print(f"no ledger matches {args.ledgers!r}", file=sys.stderr)
        return 2
    chosen = [r for r in every if r["stamp"] > args.since]
    per = Counter(r["ledger"] for r in chosen)
    bad = Counter(r["ledger"] for r in chosen if r["failed"])
    print("| ledger | runs | FAILED |\n|---|---:|---:|")
    for ledger in sorted(per):
        print(f"| {ledger} | {per[ledger]} | {bad[ledger]} |")
    total, failed = len(chosen), sum(bad.values())
    first = min((r["stamp"] for r in chosen), default="-")
    print(f"| **all** (runs from {first}) | **{total}** | **{failed}** |")
    rate = f"{100 * failed / total:.1f} per 100" if total else "-"
    print(f"\nFAILED: {failed} of {total} runs with faults ({rate}).")
    for r in chosen:
        if r["failed"]:
            print(f"- {r['run']} ({r['ledger']}): {str(r['failed'])[:200]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
