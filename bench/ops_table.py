"""The operations table (issue 36): per Kafka version, nemesis set and variant of the runs, the seeds,
the verdicts, the runs that FAILED for the harness's own reasons, the longest stretch with no ok
write during an operation's band, and the anomalies found.

    python bench/ops_table.py SOURCE [SOURCE ...] [--markdown | --ledger]

A SOURCE is a store (each run's record, harness/history/record.py, and results.json) or a ledger
file that --ledger wrote (bench/results/*.jsonl: the store is not in git, so a table that spans
sessions is made from their ledgers). A run with a FAILED file is counted as FAILED (with that file's
first line); one with neither results.json nor FAILED (still running, or never checked) is listed
as unchecked and is no seed of its row. Replays are left out of the seeds (they repeat a seed).

--ledger prints one JSON line per run of the stores given.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.report.dashboard import worst_band  # noqa: E402


def variant(config: dict[str, Any]) -> str:
    """What sets apart runs of one package: dedicated controllers, and membership's operations when
    a run chose among fewer than all of them (its disk-swap-only runs against its add/decommission ones)."""
    parts = []
    ops = (((config.get("nemesis_config") or {}).get("options") or {}).get("membership") or {}).get("ops")
    if ops and "membership" in (config.get("nemesis") or []):
        from nemesis.membership import OPS

        if sorted(ops) != sorted(OPS):
            parts.append(",".join(ops))
    if config.get("controllers"):
        parts.append(f"{config['controllers']} dedicated controllers")
    return "; ".join(parts)


def ledger_line(run: Path) -> dict[str, Any]:
    """One run as a ledger line: what ran (version, upgrade, packages, variant, seed, replay) and what
    the check said (verdict, counts, reasons, the worst band) or why it has no verdict."""
    config = json.loads((run / "config.json").read_text())
    results = json.loads((run / "results.json").read_text()) if (run / "results.json").exists() else None
    worst = worst_band(results)
    failed = (run / "FAILED").exists()
    return {"run": run.name, "kafka_version": config.get("kafka_version"), "upgrade_to": config.get("upgrade_to"),
            "nemesis": config.get("nemesis"), "workload": config.get("workload"), "seed": config.get("seed"),
            "variant": variant(config), "time_limit_s": config.get("time_limit_s"), "replay_of": bool(config.get("replay_of")),
            "failed": failed, "failed_why": (run / "FAILED").read_text().splitlines()[0][:160] if failed else
            (None if results else "not checked"),
            "verdict": (results or {}).get("verdict"),
            "counts": {k: v for k, v in ((results or {}).get("counts") or {}).items() if v},
            "allowed": (results or {}).get("allowed") or [],
            "reasons": (results or {}).get("reasons") or [],
            "worst_band": None if worst is None else {"label": worst.get("label"), "no_write_s": worst.get("no_write_s")},
            "upgrade": (config.get("upgrade") or {}).get("features")}


def lines_of(source: Path) -> list[dict[str, Any]]:
    """A store's runs as ledger lines, or a ledger file's lines."""
    if source.is_dir():
        return [ledger_line(run) for run in sorted(p for p in source.iterdir() if (p / "config.json").exists())]
    return [json.loads(line) for line in source.read_text().splitlines() if line.strip()]


def rows(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table's rows: one per (version, packages, variant, workload), replays left out."""
    groups: dict[tuple[str, str, str, str], dict] = defaultdict(lambda: {"seeds": [], "valid": 0, "invalid": 0, "unknown": 0,
                                                                        "failed": [], "no_write": [], "findings": {},
                                                                        "unchecked": []})
    for line in lines:
        if line.get("replay_of"):
            continue
        version = line.get("kafka_version") or "?"
        if line.get("upgrade_to"):
            version = f"{version}→{line['upgrade_to']}"
        key = (version, "+".join(sorted(line.get("nemesis") or [])) or "none", line.get("variant") or "", line.get("workload") or "?")
        g = groups[key]
        if not line.get("failed") and not line.get("verdict"):
            g["unchecked"].append(line["run"])  # still running, or never checked: no seed of the row yet
            continue
        g["seeds"].append(line.get("seed"))
        if line.get("failed"):
            g["failed"].append(f"{line['run']}: {line.get('failed_why') or ('FAILED' if line.get('failed') else 'not checked')}")
            continue
        g[line["verdict"]] = g.get(line["verdict"], 0) + 1
        worst = line.get("worst_band")
        if worst is not None:
            g["no_write"].append((worst.get("no_write_s") or 0.0, line["run"]))
        # Ledgers before 2026-11-27 kept no "allowed": a valid verdict says that all it counted was.
        allowed = set(line["allowed"]) if "allowed" in line else set(line.get("counts") or {}) if line["verdict"] == "valid" else set()
        for name, n in (line.get("counts") or {}).items():
            label = name + (" (allowed)" if name in allowed else "")
            g["findings"][label] = g["findings"].get(label, 0) + n
        if line["verdict"] != "valid":
            g["findings"][f"{line['run']} {line['verdict']}: {'; '.join(line.get('reasons') or [])[:160]}"] = 1
    out = []
    for (version, nemesis, var, workload), g in sorted(groups.items()):
        worst = max(g["no_write"], default=None)
        out.append({"version": version, "nemesis": nemesis, "variant": var, "workload": workload, "seeds": len(g["seeds"]),
                    "valid": g["valid"], "invalid": g["invalid"], "unknown": g["unknown"], "failed": len(g["failed"]),
                    "failed_why": g["failed"], "longest_no_write_s": worst[0] if worst else None,
                    "longest_in": worst[1] if worst else None,
                    "findings": ", ".join(f"{k} {v}" for k, v in g["findings"].items()) or "none",
                    "unchecked": g["unchecked"]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", type=Path, nargs="+", metavar="SOURCE", help="a store, or a ledger file --ledger wrote")
    parser.add_argument("--markdown", action="store_true", help="print the README table's rows")
    parser.add_argument("--ledger", action="store_true", help="print one JSON line per run of the stores (for bench/results)")
    args = parser.parse_args()
    for source in args.sources:
        if not source.exists():
            print(f"{source}: no such store or ledger; pass the store the runs wrote to, or a bench/results ledger",
                  file=sys.stderr)
            raise SystemExit(2)
        if args.ledger and not source.is_dir():
            print(f"{source}: --ledger reads stores, not ledgers", file=sys.stderr)
            raise SystemExit(2)
    lines = [line for source in args.sources for line in lines_of(source)]
    if args.ledger:
        for line in lines:
            print(json.dumps(line, sort_keys=True))
        return
    found = rows(lines)
    if args.markdown:
        print("| Kafka | package | workload | seeds | valid / invalid / unknown | FAILED (harness) | longest no ok write in a fault band | findings |")
        print("|---|---|---|---|---|---|---|---|")
        for r in found:
            worst = f"{r['longest_no_write_s']:.1f} s" if r["longest_no_write_s"] is not None else "–"
            package = f"`{r['nemesis']}`" + (f" ({r['variant']})" if r["variant"] else "")
            print(f"| {r['version']} | {package} | {r['workload']} | {r['seeds']} | {r['valid']} / {r['invalid']} / {r['unknown']}"
                  f" | {r['failed']} | {worst} | {r['findings']} |")
    else:
        print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
