"""`python -m analysis report RUN_DIR` and `python -m analysis dashboard STORE` (click commands;
analysis/cli.py registers them with `main.add_command(...)`), and `command_errors`, the one way
every `python -m analysis` command reports a failure. Exit 0 on success, 2 on bad input (the
message names the problem, the hint the fix)."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NoReturn

import click

from harness.errors import HarnessError


def fail(err: HarnessError) -> NoReturn:
    """`error: <message>` and `hint: <fix>` on stderr (HarnessError's own rendering), then exit 2."""
    click.echo(f"error: {err}", err=True)
    sys.exit(err.exit_code)


def _os_problem(err: OSError) -> str:
    # "path: Permission denied" rather than "[Errno 13] Permission denied: 'path'".
    if err.filename is None or not err.strerror:
        return str(err)
    where = f"{err.filename} → {err.filename2}" if err.filename2 is not None else str(err.filename)
    return f"{where}: {err.strerror}"


@contextmanager
def command_errors(os_hint: str, bad_input: tuple[type[Exception], ...] = (), input_hint: str = "",
                   engine: str | None = None) -> Iterator[None]:
    """Every failure inside becomes `fail(HarnessError)`: exit 2, no traceback.

    `bad_input` are the command's own error types (their text names the problem and where);
    `input_hint` is the hint they get. An OSError (an unreadable file, an unwritable run
    directory) gets `os_hint`. With `engine` ("the check"), any other exception is a failure of
    the engine (Spark) and is reported by its type and first line; without it, it is a bug and
    keeps its traceback."""
    try:
        yield
    except HarnessError as err:
        fail(err)
    except bad_input as err:
        fail(HarnessError(str(err), hint=input_hint))
    except OSError as err:
        fail(HarnessError(_os_problem(err), hint=os_hint))
    except Exception as err:  # noqa: BLE001 - an engine failure is still exit 2, with its cause
        if engine is None:
            raise
        first = str(err).splitlines()[0] if str(err) else ""
        fail(HarnessError(f"{engine} failed: {type(err).__name__}: {first}",
                          hint="Spark's log above says more; --driver-memory gives an embedded session a larger heap"))


OUTPUT = click.option("--output", type=click.Path(file_okay=False, path_type=Path), default=None,
                      help="Write into DIR instead of the run directory / store (created if missing).")


@click.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@OUTPUT
@click.option("--inline", "--interactive", "inline", is_flag=True, default=False,
              help="Interactive charts (zoom, hover) with Plotly's JavaScript inlined: one ~5 MB file to mail. "
                   "Without it the charts are static SVG: a page of a few hundred KB that needs no other file either.")
def report(run_dir: Path, output: Path | None, inline: bool) -> None:
    """Write report.html into RUN_DIR or --output DIR; print its path. The page is one file that
    opens and draws offline, copied on its own (charts as static SVG; --inline: Plotly, interactive).

    A results.json older than the history it describes is refused: the page then says why and
    shows no verdict. Exit 0 when written, 2 on bad input or when it cannot be written."""
    from analysis.report.page import render_report

    began = time.perf_counter()
    with command_errors(os_hint=f"the report reads {run_dir}'s files and writes {output or run_dir}/report.html: "
                                "check that you may read and write there, or pass --output DIR"):
        if output is not None:
            output.mkdir(parents=True, exist_ok=True)
        path = render_report(run_dir, output, inline=inline)
        size = path.stat().st_size
    shown = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} KB"
    click.echo(f"wrote {path} ({shown} in {time.perf_counter() - began:.1f} s)", err=True)
    click.echo(str(path))


@click.command("dashboard")
@click.argument("store", type=click.Path(path_type=Path))
@click.option("--reports/--no-reports", default=True, show_default=True,
              help="Also write report.html for every run that has none yet.")
@OUTPUT
def dashboard(store: Path, reports: bool, output: Path | None) -> None:
    """Write index.html (into STORE, or --output DIR): every run in the store, sortable and
    filterable, with trend plots. Exit 0 when written, 2 on bad input or when it cannot be written."""
    from analysis.report.dashboard import render_dashboard

    with command_errors(os_hint=f"the dashboard reads the runs in {store} and writes {output or store}/index.html "
                                "(and report.html in each run): check that you may read and write there, or pass --output DIR"):
        if output is not None:
            output.mkdir(parents=True, exist_ok=True)
        path = render_dashboard(store, render_reports=reports, output=output)
    click.echo(str(path))
