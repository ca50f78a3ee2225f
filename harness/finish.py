"""After a run: check its history (the verdict) and render its report.

Kept apart from `run.py` so that a run that was killed can be finished later
with the same code (`python -m analysis check` then `report`), and so that a
checker failure never loses the run directory.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class Finished:
    results: dict[str, Any]
    report: Path | None
    exit_code: int


def check_and_report(run_dir: Path, spark_master: str | None = None, spark: Any = None) -> Finished:
    """Write results.json and report.html; the exit code is the verdict's (0 valid, 1 invalid, 3 unknown)."""
    from analysis.checker import check_run
    from analysis.verdict import EXIT_CODES

    if spark is None:
        from analysis.spark import get_session

        spark = get_session(spark_master)
    results = check_run(run_dir, spark=spark)
    report: Path | None = None
    try:
        from analysis.report import render_report

        report = render_report(run_dir)
    except Exception:  # a report that cannot be drawn must not hide the verdict
        log.exception("could not render the report of %s", run_dir)
    return Finished(results, report, EXIT_CODES[results["verdict"]])
