"""After a run: check its history (the verdict) and render its report.

Kept apart from `run.py` so that a run that was killed can be finished later
with the same code (`python -m analysis check` then `report`), and so that a
checker failure never loses the run directory.

`Finisher` is the one place that starts Spark for the top of the harness (the `run`
command, controls, the scenarios, the nightly plugin): lazily, once, on first use, with
the master the user chose; by default on the local checker, a Spark Connect server that
later runs reuse warm (analysis/checking/spark_server.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.errors import HarnessError

log = logging.getLogger(__name__)


@dataclass
class Finished:
    results: dict[str, Any]
    report: Path | None
    exit_code: int


class Finisher:
    """Checks run directories with one Spark session, started on the first check."""

    def __init__(self, spark_master: str | None = None, spark: Any = None,
                 session: Callable[[], Any] | None = None) -> None:
        self.spark_master = spark_master
        self._spark = spark
        self._session = session  # e.g. the nightly plugin's shared session factory
        self._own = spark is None and session is None  # our session: we size its partitions per history

    @property
    def spark(self) -> Any:
        if self._spark is None:
            if self._session is not None:
                self._spark = self._session()
            else:
                from analysis.checking.spark import checker_session

                self._spark = checker_session(self.spark_master)
        return self._spark

    def check(self, run_dir: Path) -> dict[str, Any]:
        """results.json of `run_dir` (written there); raises what the checker raises."""
        from analysis.checking.checker import check_run
        from analysis.checking.spark import fit_partitions, server_side

        spark = self.spark
        try:
            if self._own:
                fit_partitions(spark, Path(run_dir))
            # A Connect server reads paths from its own working folder, not ours.
            return check_run(Path(run_dir).resolve() if server_side(spark) else run_dir, spark=spark)
        except (HarnessError, OSError):
            raise
        except Exception as err:  # Spark's failure, in our words, with its log named (it is not on the terminal)
            from analysis.checking.spark import engine_failure

            raise engine_failure(err, spark) from err

    def check_and_report(self, run_dir: Path) -> Finished:
        """Write results.json and report.html; the exit code is the verdict's (0 valid, 1 invalid, 3 unknown)."""
        from analysis.rules.verdict import EXIT_CODES

        results = self.check(run_dir)
        report: Path | None = None
        try:
            from analysis.report.page import render_report

            report = render_report(run_dir)
        except Exception:  # a report that cannot be drawn must not hide the verdict
            log.exception("could not render the report of %s", run_dir)
        return Finished(results, report, EXIT_CODES[results["verdict"]])


def prepare_checker(spark_master: str | None = None) -> None:
    """Start the local checker now, in the background, when the check will use it: called as a run
    starts, its JVM comes up during the workload rather than after it (a cold start measured
    1-3 min on the 2-core machine under load, which a 30 s run then waits for). Never raises:
    the check itself reports a checker that cannot start."""
    import os
    import threading

    if spark_master is not None or os.environ.get("SPARK_REMOTE") or os.environ.get("KAFKA_CHAOS_CHECKER") == "embedded":
        return

    def start() -> None:
        try:
            from analysis.checking import spark_server
            spark_server.ensure()
        except Exception:  # noqa: BLE001 - the check says why, if it still cannot start
            log.debug("the local checker did not start early", exc_info=True)

    threading.Thread(target=start, name="local-checker-start", daemon=True).start()


def check_and_report(run_dir: Path, spark_master: str | None = None, spark: Any = None) -> Finished:
    """One run's check and report (a Finisher used once)."""
    return Finisher(spark_master, spark).check_and_report(run_dir)
