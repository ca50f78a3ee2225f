"""Human-readable rendering of a results dict (kept apart from the verdict itself)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.rules.registry import ANOMALIES
from analysis.rules.verdict import headline_text


def summary(results: dict[str, Any], run_dir: Path | str, written: bool = True) -> str:
    h = results["headline"]
    lines = [
        f"verdict: {results['verdict']}",
        headline_text(h),
    ]
    found = [f"{n}={results['counts'][n]}{' (allowed)' if n in results['allowed'] else ''}"
             for n in ANOMALIES if results["counts"][n]]
    if found:
        lines.append("anomalies: " + ", ".join(found))
    lines += [f"  - {r}" for r in results["reasons"]]
    lines.append(f"{results['history']['events']} events checked in {results['timings']['total_s']} s; "
                 + (f"details in {Path(run_dir) / 'results.json'}" if written else "results.json NOT written (see the error below)"))
    return "\n".join(lines)
