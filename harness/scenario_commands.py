"""`scenario` commands: list the leader-epoch scenarios, run one, run the version matrix.

Exit codes: 0 the scenario ran (whatever it found), 2 bad input or infrastructure failure.
Register with `main.add_command(scenario)` in harness/cli.py.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import click

from harness.errors import HarnessError
from harness.provision.settings import DEFAULT_KAFKA_VERSION

DEFAULT_STORE = "store/scenarios"


def _fail(message: str, hint: str | None = None) -> None:
    click.echo(f"error: {message}" + (f"\n  fix: {hint}" if hint else ""), err=True)
    sys.exit(2)


@click.group()
@click.option("-v", "--verbose", is_flag=True, help="Log every step as it happens.")
def scenario(verbose: bool) -> None:
    """Leader-epoch scenarios from KIP-101, KIP-279 and KIP-320 against real Kafka."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("librdkafka").setLevel(logging.CRITICAL)


@scenario.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the definitions as JSON.")
def list_(as_json: bool) -> None:
    """Every scenario, its KIP, the versions expected to show the bug, and whether it is runnable."""
    from harness.scenarios import scenarios

    found = scenarios()
    if as_json:
        click.echo(json.dumps([s.summary() for s in found.values()], indent=2))
        return
    for s in found.values():
        state = "runnable" if s.runnable else "NOT RUNNABLE"
        click.echo(f"{s.name}  [{s.kip}]  {state}\n  {s.description}\n  bug expected on: {s.bug_versions}")
        if not s.runnable:
            click.echo(f"  why not: {s.reason}")


@scenario.command()
@click.argument("name")
@click.option("--kafka-version", default=None, help="Kafka version (default: the harness default).")
@click.option("--store", type=click.Path(path_type=Path), default=DEFAULT_STORE, show_default=True, help="Where run directories go.")
@click.option("--check/--no-check", default=False, help="Also run the normal (Spark) checker: writes results.json.")
@click.option("--client", default="librdkafka", show_default=True, metavar="NAME",
              help="The Kafka client of the scenario's driven clients, as `run --client`: librdkafka or java. "
                   "Only the kafka17754-* scenarios take java; the others refuse it.")
@click.option("--client-version", default=None, metavar="VERSION",
              help="kafka-clients version for --client java (default: the newest 4.x served); librdkafka's is the installed one.")
def run(name: str, kafka_version: str | None, store: Path, check: bool, client: str, client_version: str | None) -> None:
    """Run scenario NAME once; print its summary and the run directory."""
    from harness.scenarios import get_scenario
    from harness.scenarios.runner import run_scenario
    from harness.scenarios.matrix import render_run

    try:
        s = get_scenario(name)
        if not s.runnable:
            raise HarnessError(f"scenario {name} is not runnable: {s.reason}")
        run_dir = run_scenario(s, kafka_version, store, command_line=sys.argv, client=client, client_version=client_version)
    except HarnessError as exc:
        _fail(exc.message, exc.hint or None)
        return
    results = None
    if check:
        try:
            from harness.run.finish import Finisher

            results = Finisher().check(run_dir)
        except Exception as exc:  # the run itself succeeded; say why the check did not
            click.echo(f"checker failed: {type(exc).__name__}: {exc}", err=True)
    click.echo(render_run(run_dir, results))


@scenario.command()
@click.option("--versions", default=f"{DEFAULT_KAFKA_VERSION},3.9.2,1.1.1,0.10.2.2", show_default=True, help="Comma-separated Kafka versions.")
@click.option("--scenarios", "names", default=None, help="Comma-separated scenario names (default: every runnable one).")
@click.option("--store", type=click.Path(path_type=Path), default=DEFAULT_STORE, show_default=True)
@click.option("--output", type=click.Path(path_type=Path), default=None, help="Also write the Markdown table here.")
@click.option("--checker/--no-checker", default=True, help="Use the normal Spark checker (else the reference checker).")
@click.option("--clients", default="librdkafka", show_default=True, metavar="LIST",
              help="Comma-separated clients, each NAME or NAME:VERSION (librdkafka,java,java:3.9.1): every scenario that "
                   "can drive a client runs once per client; the others get a 'not applicable' row for it.")
def matrix(versions: str, names: str | None, store: Path, output: Path | None, checker: bool, clients: str) -> None:
    """Run scenario x version x client and print a Markdown table: lost / diverged / detected-by-client, verdict."""
    from harness.scenarios import get_scenario, scenarios
    from harness.scenarios.matrix import parse_clients, run_matrix

    try:
        chosen = [get_scenario(n.strip()) for n in names.split(",")] if names else list(scenarios().values())
        chosen_clients = parse_clients(clients)
    except HarnessError as exc:
        _fail(exc.message, exc.hint or None)
        return
    table = run_matrix(chosen, [v.strip() for v in versions.split(",") if v.strip()], store, use_checker=checker,
                       echo=lambda line: click.echo(line, err=True), clients=chosen_clients)
    click.echo(table)
    if output is not None:
        output.write_text(table + "\n")


@scenario.command()
@click.option("--store", type=click.Path(path_type=Path, exists=True, file_okay=False), default=DEFAULT_STORE, show_default=True)
@click.option("--checker/--no-checker", default=True, help="Check runs that have no results.json with the normal checker.")
def table(store: Path, checker: bool) -> None:
    """The Markdown table for the scenario runs already in STORE (newest per scenario and version)."""
    from harness.scenarios.matrix import table_from_store

    click.echo(table_from_store(store, use_checker=checker, echo=lambda line: click.echo(line, err=True)))
