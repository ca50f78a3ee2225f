"""The target's commands: `cluster up | down | status`, `cleanup --target FILE`, and what
`run --target FILE` does before and after its run (harness/cli.py calls these)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.console import Console

from harness.errors import HarnessError

console = Console(stderr=True)


@click.group(name="cluster")
def cluster_group() -> None:
    """A standing local cluster (SASL_SSL with SCRAM, sshd on each broker, on 127.0.0.1 only) to run --target against."""


@cluster_group.command(name="up")
@click.option("--brokers", default=3, show_default=True, type=click.IntRange(1, 9))
@click.option("--kafka-version", default=None, help="Kafka release, 3.5 or later (default: the pinned 4.x).")
def cluster_up(brokers: int, kafka_version: str | None) -> None:
    """Start a standing cluster and write its target file; the last line printed is that file's path."""
    from harness.target.standing import up

    with console.status(f"starting a standing cluster of {brokers} brokers (SASL_SSL, sshd)"):
        path = up(brokers, kafka_version)
    console.print(f"standing cluster up; its keys and passwords are in {path.parent / 'secrets'} (0700). "
                  "`harness cluster down` removes it")
    click.echo(str(path))


@cluster_group.command(name="down")
@click.argument("which", required=False)
def cluster_down(which: str | None) -> None:
    """Remove a standing cluster (by run id or folder; default: every one), its keys, CA and passwords."""
    from harness.target.standing import down

    removed = down(which)
    for line in removed:
        click.echo(f"removed {line}")
    if not removed:
        click.echo("no standing cluster to remove")


@cluster_group.command(name="status")
def cluster_status() -> None:
    """The standing clusters of this machine: containers, whether each broker answers, the target file."""
    from harness.target.spec import load_target
    from harness.target.standing import standing
    from harness.target.watch import answers

    clusters = standing()
    if not clusters:
        click.echo("no standing cluster (start one with `harness cluster up`)")
        return
    for record in clusters:
        states = ", ".join(f"{name} {state}" for name, state in sorted(record["containers"].items())) or "no containers"
        click.echo(f"{record['run_id']} (since {record.get('since', '?')}): {states}")
        try:
            target = load_target(record["target"])
        except HarnessError as exc:
            click.echo(f"  target file unreadable: {exc.message}")
            continue
        for server in target.bootstrap_servers.split(","):
            host, _, port = server.rpartition(":")
            click.echo(f"  {server} ({target.security.protocol}): {'answers' if answers(host, int(port), True) else 'does not answer'}")
        click.echo(f"  target: {record['target']}")


def target_faults(ctx: click.Context, values: dict[str, Any], defaults: list[str]) -> None:
    """Without --allow-faults a target run is fault-free: `./chaos run`'s default faults are dropped
    (said so), and faults named on the command line or in a file are refused (exit 2)."""
    nemesis = str(values.get("nemesis") or "none")
    if values.get("allow_faults") or nemesis in ("", "none"):
        return
    if "--nemesis" in defaults and ctx.get_parameter_source("nemesis") != ParameterSource.COMMANDLINE:
        console.print(f"note: --target without --allow-faults is a fault-free durability check; the default faults ({nemesis}) are not injected")
        values["nemesis"] = "none"
        return
    raise HarnessError(f"--nemesis {nemesis} would inject faults into the target, which needs --allow-faults.",
                       hint="add --allow-faults if this cluster may be faulted, or use --nemesis none for a fault-free durability check")


def cleanup_target(path: Path, run_id: str | None, dry_run: bool) -> None:
    """Heal what runs' faults left on a target (rules, stopped or paused brokers) and say what."""
    from harness.target.cluster import TargetCluster
    from harness.target.leftovers import heal_leftovers, manual_commands, survey
    from harness.target.preflight import check_hosts
    from harness.target.spec import load_target

    target = load_target(path)
    with TargetCluster(target) as cluster:
        check_hosts(cluster)  # a host that does not answer is named, with the fix, before anything is done
        found = survey(cluster, run_id)
        if not found:
            click.echo(f"nothing left on {target.name}: no harness iptables rule, no stopped or paused broker marker"
                       + (f" of run {run_id}" if run_id else ""))
            return
        if dry_run:
            for item in found:
                click.echo(f"would heal {item.describe()}")
            for line in manual_commands(cluster, found):
                click.echo(f"  {line}")
            return
        done, failed = heal_leftovers(cluster, found)
    for line in done:
        click.echo(f"healed {line}")
    if failed:
        raise HarnessError(f"{len(failed)} leftover(s) on {target.name} could not be healed: {'; '.join(failed)}",
                           hint="run the same cleanup again, or the commands of `cleanup --target FILE --dry-run` by hand")
