"""`python -m analysis report RUN_DIR` and `python -m analysis dashboard STORE` (click commands;
analysis/cli.py registers them with `main.add_command(...)`). Exit 0 on success, 2 on bad input
(the message names the problem and the fix)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from harness.errors import HarnessError


def _fail(err: Exception) -> None:
    click.echo(f"error: {err}", err=True)
    raise SystemExit(2)


@click.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path))
def report(run_dir: Path) -> None:
    """Write RUN_DIR/report.html (self-contained: opens offline) and print its path."""
    from analysis.report import render_report

    began = time.perf_counter()
    try:
        path = render_report(run_dir)
    except HarnessError as err:
        _fail(err)
    click.echo(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - began:.1f} s)", err=True)
    click.echo(str(path))


@click.command("dashboard")
@click.argument("store", type=click.Path(path_type=Path))
@click.option("--reports/--no-reports", default=True, show_default=True,
              help="Also write report.html for every run that has none yet.")
def dashboard(store: Path, reports: bool) -> None:
    """Write STORE/index.html: every run in the store, sortable and filterable, with trend plots."""
    from analysis.dashboard import render_dashboard

    try:
        path = render_dashboard(store, render_reports=reports)
    except HarnessError as err:
        _fail(err)
    click.echo(str(path))


COMMANDS = (report, dashboard)
