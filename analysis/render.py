"""Human-readable rendering of a results dict (kept apart from the verdict itself)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.registry import ANOMALIES


def summary(results: dict[str, Any], run_dir: Path | str) -> str:
    h = results["headline"]
    lines = [
        f"verdict: {results['verdict']}",
        f"lost {h['lost']}  duplicated {h['duplicated']}  reordered {h['reordered']}  diverged {h['diverged']}",
    ]
    found = [f"{n}={results['counts'][n]}{' (allowed)' if n in results['allowed'] else ''}"
             for n in ANOMALIES if results["counts"][n]]
    if found:
        lines.append("anomalies: " + ", ".join(found))
    lines += [f"  - {r}" for r in results["reasons"]]
    lines.append(f"{results['history']['events']} events checked in {results['timings']['total_s']} s; "
                 f"details in {Path(run_dir) / 'results.json'}")
    return "\n".join(lines)
