"""`python -m analysis`: check one run, aggregate trends across runs, render reports and the dashboard.

Exit codes: 0 valid, 1 invalid, 2 bad input or error, 3 unknown (nothing forbidden found, but the
evidence is incomplete: the final drain did not complete or is not recorded while acknowledged
writes are unseen, or the history is truncated). Every command reports a failure the same way,
`error:` naming the problem and `hint:` the fix, with exit 2 and no traceback
(report_commands.command_errors).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from analysis.report.commands import command_errors, dashboard, fail, report
from analysis.rules.verdict import EXIT_CODES
from harness.errors import HarnessError

_MASTER = click.option("--spark-master", metavar="URL", default=None,
                       help="Spark master URL (spark://host:7077, yarn, k8s://...). Default: SPARK_REMOTE "
                            "(Spark Connect) if set, else embedded local[*].")
_CHECK_MASTER = click.option("--spark-master", metavar="URL", default=None,
                             help="Spark master URL (spark://host:7077, yarn, k8s://..., local[*] for an embedded "
                                  "Spark). Default: SPARK_REMOTE if set, else the local checker, a Spark Connect "
                                  "server reused by later checks that stops after 10 idle minutes (`harness status`).")
_MEMORY = click.option("--driver-memory", default=None, metavar="SIZE",
                       help="Driver heap for an embedded/local session, e.g. 3g (default: a quarter of the machine's "
                            "memory, 2 to 8 GB; env KAFKA_CHAOS_CHECKER_MEMORY).")
_OUTPUT = click.option("--output", type=click.Path(file_okay=False, path_type=Path), default=None,
                       help="Write into DIR instead of the run directory (created if missing).")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Check Kafka chaos-run histories for lost, duplicated and reordered records."""


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@_CHECK_MASTER
@_MEMORY
@click.option("--shuffle-partitions", type=int, default=None, help="spark.sql.shuffle.partitions.")
@click.option("--format", "prefer", type=click.Choice(["jsonl", "parquet"]), default=None,
              help="Which history file to read when both exist (default: parquet).")
@click.option("--json", "as_json", is_flag=True, help="Print results.json to stdout instead of a summary.")
@_OUTPUT
def check(run_dir: Path, spark_master: str | None, driver_memory: str | None, shuffle_partitions: int | None,
          prefer: str | None, as_json: bool, output: Path | None) -> None:
    """Check RUN_DIR's history and write results.json (into RUN_DIR, or --output DIR).

    An earlier results.json and report.html are first renamed results.stale.json and
    report.stale.html, so a check that fails never leaves an old verdict standing. The verdict is
    printed even when results.json cannot be written (then exit 2, naming where it failed).

    Exit 0 valid, 1 invalid, 3 unknown, 2 bad input or error.
    """
    from analysis.checking.checker import ResultsNotWritten, check_run
    from analysis.checking.history_load import find_history
    from harness.history.record import read_record

    out = output or run_dir
    unwritten: ResultsNotWritten | None = None
    with command_errors(os_hint=f"the check reads {run_dir}'s history and config.json and writes "
                                f"{out}/results.json: check that you may read and write there, or pass --output DIR",
                        engine="the check"):  # a HistoryError carries its own hint
        find_history(run_dir)  # fail fast, before starting a JVM
        read_record(run_dir)  # a bad config.json: exit 2 now, not after the JVM started
        if output is not None:
            output.mkdir(parents=True, exist_ok=True)
        from analysis.checking.spark import checker_session, fit_partitions, server_side

        spark = checker_session(spark_master, driver_memory=driver_memory, shuffle_partitions=shuffle_partitions)
        if server_side(spark):  # a Connect server reads paths from its own working folder
            run_dir, out = run_dir.resolve(), out.resolve()
        fit_partitions(spark, run_dir, shuffle_partitions)
        try:
            results = check_run(run_dir, spark, prefer=prefer, output=out)
        except ResultsNotWritten as err:
            results, unwritten = err.results, err
        except (HarnessError, OSError):  # bad input, a HistoryError among them
            raise
        except Exception as err:  # noqa: BLE001 - Spark's failure, in our words, with its log named
            from analysis.checking.spark import engine_failure

            raise engine_failure(err, spark) from err
    if as_json:
        click.echo(json.dumps(results, indent=2))
    else:
        from analysis.explain.text import first_examples
        from analysis.report.render import summary

        click.echo(summary(results, out, written=unwritten is None))
        click.echo(first_examples(results), nl=False)  # analysis/explain/text.py: each anomaly's first example, explained
    if unwritten is not None:
        fail(unwritten)
    sys.exit(EXIT_CODES[results["verdict"]])


@main.command()
@click.argument("store")
@click.option("--out", default=None, help="Output folder or URI (default: STORE/_trends).")
@_MASTER
@_MEMORY
def trends(store: str, out: str | None, spark_master: str | None, driver_memory: str | None) -> None:
    """Aggregate every checked run under STORE (a path or any URI Spark reads) by Kafka version,
    nemesis set, workload and profile; write Parquet and summary.json.

    Exit 0 on success, 2 when STORE holds no checked runs or cannot be read.
    """
    from analysis.report.trends import build_trends

    if "://" not in store and not Path(store).is_dir():
        fail(HarnessError(f"{store}: not a directory.", hint="pass the store folder that holds run directories"))
    with command_errors(os_hint=f"trends reads {store}/*/results.json and writes {out or store + '/_trends'}: "
                                "check that you may read and write there",
                        engine="trends"):  # a TrendsError carries its own hint
        from analysis.checking.spark import get_session

        spark = get_session(spark_master, driver_memory=driver_memory)
        summary = build_trends(spark, store, out)
    click.echo(f"{summary['runs']} run(s) in {len(summary['groups'])} group(s); wrote {summary['out']}")


main.add_command(report)
main.add_command(dashboard)
