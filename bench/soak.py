"""The soak (issue 34, item 7): one long `run` under faults, with the harness's memory sampled.

    python bench/soak.py --time-limit 7200                    # the issue's soak: 2 h of kill,partition,pause
    python bench/soak.py --time-limit 300 --every 10          # a short try of the same

It starts `python -m harness run --time-limit T --nemesis kill,partition,pause --store STORE` as a
child and samples, every --every seconds, the resident memory (VmRSS from /proc) of that process and
of its descendants (the local checker's JVM is started detached, so it is not counted: the soak
measures the harness, not Spark). Each sample is one JSON line in the ledger; the last line is the
summary:

- memory flat: the largest sample after the first 10 minutes against the sample at 10 minutes
  (the issue's bound: within 10 %);
- the run's exit code and verdict (valid history, check finished), the check's own seconds;
- the report's size (the bound: 1 MB) and the run directory's size.

The machine's load average goes in every sample: a 2-core machine under a cluster is noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may itself hold spaces: the parent follows the last ')'.
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss(root: int) -> tuple[int, int, int]:
    """(the root's RSS, the RSS of the root and its descendants, the number of processes) in KiB."""
    tree, seen, todo = children(), [], [root]
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo.extend(tree.get(pid, []))
    return rss_kib(root), sum(rss_kib(p) for p in seen), len(seen)


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-limit", type=float, default=7200.0)
    parser.add_argument("--nemesis", default="kill,partition,pause")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between memory samples")
    parser.add_argument("--store", default=str(ROOT / "store-soak"))
    parser.add_argument("--ledger", default=None, help="JSON Lines output (default bench/results/soak-DATE.jsonl)")
    args = parser.parse_args()
    ledger = Path(args.ledger or ROOT / "bench" / "results" / f"soak-{time.strftime('%Y-%m-%d')}.jsonl")
    ledger.parent.mkdir(parents=True, exist_ok=True)
    store = Path(args.store)
    command = [sys.executable, "-m", "harness", "run", "--time-limit", str(args.time_limit),
               "--nemesis", args.nemesis, "--store", str(store)]
    log = ledger.with_suffix(".log")
    began = time.monotonic()
    with open(log, "w") as out, open(ledger, "a") as book:
        book.write(json.dumps({"command": command, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
        child = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        samples = []
        while child.poll() is None:
            own, total, count = tree_rss(child.pid)
            sample = {"t_s": round(time.monotonic() - began, 1), "rss_mib": round(own / 1024, 1),
                      "tree_rss_mib": round(total / 1024, 1), "processes": count,
                      "load_1min": round(os.getloadavg()[0], 2)}
            samples.append(sample)
            book.write(json.dumps(sample) + "\n")
            book.flush()
            time.sleep(args.every)
        elapsed = time.monotonic() - began
        lines = log.read_text().splitlines()
        run_dir = Path(lines[-1].strip()) if lines else None
        summary: dict = {"exit_code": child.returncode, "elapsed_s": round(elapsed, 1), "run_dir": str(run_dir)}
        # Memory "after the first 10 minutes": the workload starts after the cluster (about a minute),
        # so the reference is the first sample at or after 600 s, and the bound applies to those after it.
        workload_end = args.time_limit + 120
        later = [s for s in samples if 600 <= s["t_s"] <= workload_end]
        if later:
            ref, top = later[0]["rss_mib"], max(s["rss_mib"] for s in later)
            summary.update(rss_at_10min_mib=ref, rss_max_after_mib=top,
                           rss_growth_pct=round(100 * (top - ref) / ref, 1) if ref else None)
        if run_dir and run_dir.is_dir():
            results = run_dir / "results.json"
            if results.exists():
                data = json.loads(results.read_text())
                summary["verdict"] = data.get("verdict")
                summary["check_s"] = (data.get("timings") or {}).get("total_s")
                summary["events"] = (data.get("history") or {}).get("events")
            report = run_dir / "report.html"
            summary["report_bytes"] = report.stat().st_size if report.exists() else None
            summary["run_dir_bytes"] = size(run_dir)
        book.write(json.dumps({"summary": summary}) + "\n")
    print(json.dumps(summary, indent=1))
    return 0 if child.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
