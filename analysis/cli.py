"""`python -m analysis`: check one run, aggregate trends across runs, render reports and the dashboard.

Exit codes: 0 valid, 1 invalid, 2 bad input or error (the message names the problem and the
fix), 3 unknown (nothing forbidden found, but the evidence is incomplete: the final drain did not
complete or is not recorded while acknowledged writes are unseen, or the history is truncated).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from analysis.history_load import HistoryError
from analysis.verdict import EXIT_CODES

_MASTER = click.option("--spark-master", metavar="URL", default=None,
                       help="Spark master URL (spark://host:7077, yarn, k8s://...). Default: SPARK_REMOTE "
                            "(Spark Connect) if set, else embedded local[*].")
_MEMORY = click.option("--driver-memory", default="2g", show_default=True,
                       help="Driver heap for an embedded/local session (e.g. 2g).")


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Check Kafka chaos-run histories for lost, duplicated and reordered records."""


@main.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@_MASTER
@_MEMORY
@click.option("--shuffle-partitions", type=int, default=None, help="spark.sql.shuffle.partitions.")
@click.option("--format", "prefer", type=click.Choice(["jsonl", "parquet"]), default=None,
              help="Which history file to read when both exist (default: parquet).")
@click.option("--json", "as_json", is_flag=True, help="Print results.json to stdout instead of a summary.")
def check(run_dir: Path, spark_master: str | None, driver_memory: str, shuffle_partitions: int | None,
          prefer: str | None, as_json: bool) -> None:
    """Check RUN_DIR's history and write RUN_DIR/results.json.

    Exit 0 valid, 1 invalid, 3 unknown, 2 bad input or error.
    """
    from analysis.checker import check_run, read_config
    from analysis.history_load import find_history

    try:
        find_history(run_dir)  # fail fast, before starting a JVM
        read_config(run_dir)
        from analysis.spark import get_session

        spark = get_session(spark_master, driver_memory=driver_memory, shuffle_partitions=shuffle_partitions)
        results = check_run(run_dir, spark, prefer=prefer)
    except HistoryError as err:
        _fail(str(err))
    except Exception as err:  # noqa: BLE001 - an engine failure is still exit 2, with its cause
        _fail(f"the check failed: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    if as_json:
        click.echo(json.dumps(results, indent=2))
    else:
        from analysis.render import summary

        click.echo(summary(results, run_dir))
    sys.exit(EXIT_CODES[results["verdict"]])


@main.command()
@click.argument("store")
@click.option("--out", default=None, help="Output folder or URI (default: STORE/_trends).")
@_MASTER
@_MEMORY
def trends(store: str, out: str | None, spark_master: str | None, driver_memory: str) -> None:
    """Aggregate every checked run under STORE (a path or any URI Spark reads) by Kafka version,
    nemesis set, workload and profile; write Parquet and summary.json.

    Exit 0 on success, 2 when STORE holds no checked runs or cannot be read.
    """
    from analysis.trends import TrendsError, build_trends

    if "://" not in store and not Path(store).is_dir():
        _fail(f"{store}: not a directory; pass the store folder that holds run directories")
    try:
        from analysis.spark import get_session

        spark = get_session(spark_master, driver_memory=driver_memory)
        summary = build_trends(spark, store, out)
    except TrendsError as err:
        _fail(str(err))
    except Exception as err:  # noqa: BLE001
        _fail(f"trends failed: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    click.echo(f"{summary['runs']} run(s) in {len(summary['groups'])} group(s); wrote {summary['out']}")


def _register_report_commands() -> None:
    from analysis.report_commands import dashboard, report

    main.add_command(report)
    main.add_command(dashboard)


_register_report_commands()
