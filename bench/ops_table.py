"""The operations table (issue 36): per Kafka version and nemesis set of a store's runs, the seeds, the
verdicts, the runs that FAILED for the harness's own reasons, the longest stretch with no ok write
during an operation's band, and the anomalies found.

    python bench/ops_table.py STORE [--markdown | --ledger]

--ledger prints one JSON line per run (the ledger kept in bench/results: the store is not in git).

It reads each run's record (harness/history/record.py) and results.json; a run without results.json
is counted as FAILED (with its FAILED file's first line) or unchecked.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.report.dashboard import worst_band  # noqa: E402
from harness.history.record import read_record  # noqa: E402


def rows(store: Path) -> list[dict]:
    groups: dict[tuple[str, str, str], dict] = defaultdict(lambda: {"seeds": [], "valid": 0, "invalid": 0, "unknown": 0,
                                                                      "failed": [], "no_write": [], "findings": {}, "runs": []})
    for run in sorted(p for p in store.iterdir() if (p / "config.json").exists()):
        record = read_record(run)
        if record is None:
            continue
        key = (record.kafka_version or "?", "+".join(sorted(record.nemesis or [])) or "none", record.workload or "?")
        g = groups[key]
        g["seeds"].append(record.seed)
        g["runs"].append(run.name)
        if (run / "FAILED").exists():
            g["failed"].append(f"{run.name}: {(run / 'FAILED').read_text().splitlines()[0][:160]}")
            continue
        if not (run / "results.json").exists():
            g["failed"].append(f"{run.name}: not checked")
            continue
        results = json.loads((run / "results.json").read_text())
        g[results["verdict"]] = g.get(results["verdict"], 0) + 1
        worst = worst_band(results)  # the dashboard's choice of band, so the two never disagree
        if worst is not None:
            g["no_write"].append((worst.get("no_write_s") or 0.0, run.name))
        for name, n in (results.get("counts") or {}).items():
            if n:
                allowed = name in (results.get("allowed") or [])
                g["findings"][name + (" (allowed)" if allowed else "")] = g["findings"].get(name + (" (allowed)" if allowed else ""), 0) + n
        if results["verdict"] != "valid":
            g["findings"][f"{results['verdict']}: {'; '.join(results.get('reasons') or [])[:160]}"] = 1
    out = []
    for (version, nemesis, workload), g in sorted(groups.items()):
        worst = max(g["no_write"], default=None)
        out.append({"version": version, "nemesis": nemesis, "workload": workload, "seeds": len(g["seeds"]),
                    "valid": g["valid"], "invalid": g["invalid"], "unknown": g["unknown"], "failed": len(g["failed"]),
                    "failed_why": g["failed"], "longest_no_write_s": worst[0] if worst else None,
                    "longest_in": worst[1] if worst else None,
                    "findings": ", ".join(f"{k} {v}" for k, v in g["findings"].items()) or "none"})
    return out


def ledger(store: Path) -> list[dict]:
    """One line per run: what ran (version, upgrade, packages, seed, replay) and what the check said."""
    lines = []
    for run in sorted(p for p in store.iterdir() if (p / "config.json").exists()):
        config = json.loads((run / "config.json").read_text())
        results = json.loads((run / "results.json").read_text()) if (run / "results.json").exists() else None
        worst = worst_band(results)
        lines.append({"run": run.name, "kafka_version": config.get("kafka_version"), "upgrade_to": config.get("upgrade_to"),
                      "nemesis": config.get("nemesis"), "workload": config.get("workload"), "seed": config.get("seed"),
                      "time_limit_s": config.get("time_limit_s"), "replay_of": bool(config.get("replay_of")),
                      "failed": (run / "FAILED").exists(), "verdict": (results or {}).get("verdict"),
                      "counts": {k: v for k, v in ((results or {}).get("counts") or {}).items() if v},
                      "worst_band": None if worst is None else {"label": worst.get("label"), "no_write_s": worst.get("no_write_s")},
                      "upgrade": (config.get("upgrade") or {}).get("features")})
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--markdown", action="store_true", help="print the README table's rows")
    parser.add_argument("--ledger", action="store_true", help="print one JSON line per run (for bench/results)")
    args = parser.parse_args()
    if not args.store.is_dir():
        print(f"{args.store}: not a directory; pass the store the runs wrote to", file=sys.stderr)
        raise SystemExit(2)
    if args.ledger:
        for line in ledger(args.store):
            print(json.dumps(line, sort_keys=True))
        return
    found = rows(args.store)
    if args.markdown:
        print("| Kafka | package | workload | seeds | valid / invalid / unknown | FAILED (harness) | longest no ok write in a fault band | findings |")
        print("|---|---|---|---|---|---|---|---|")
        for r in found:
            worst = f"{r['longest_no_write_s']:.1f} s" if r["longest_no_write_s"] is not None else "–"
            print(f"| {r['version']} | `{r['nemesis']}` | {r['workload']} | {r['seeds']} | {r['valid']} / {r['invalid']} / {r['unknown']}"
                  f" | {r['failed']} | {worst} | {r['findings']} |")
    else:
        print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
