"""`harness status`: is the local checker (the reused Spark Connect server of analysis/checking/spark_server.py)
running, since when, how long until it stops by itself; `--stop` stops it now."""

from __future__ import annotations

import time
from typing import Any

import click

from harness.errors import HarnessError


def _ago(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def warming(folder: Any = None) -> str | None:
    """What the warm-up is doing (analysis/checking/warmup.py), while it runs."""
    from analysis.checking import spark_server
    status = spark_server.warmup_status(folder)
    if not status or status.get("state") != "running":
        return None
    return f"warming up (check {status['checks'] + 1} of {status['of']}; a check that comes now stops it)"


def _warm_line(folder: Any = None) -> str | None:
    """How the last warm-up ended, for the status's details."""
    from analysis.checking import spark_server
    status = spark_server.warmup_status(folder)
    if not status or status.get("state") in (None, "running"):
        return None
    why = status.get("reason") or status.get("error") or ""
    return (f"  warm-up: {status['state']}, {status.get('checks', 0)} of {status.get('of', '?')} checks of a synthetic "
            f"history in {status.get('seconds', 0):.0f} s" + (f" ({why})" if why else ""))


def _when(state: dict[str, Any], folder: Any = None) -> str:
    """Starting, in use, or idle for how long and when it stops by itself."""
    from analysis.checking import spark_server
    now = time.time()
    used = max(spark_server.last_used(state, folder), state.get("ready_at") or state["started"])
    clients = spark_server.checks_running(state, folder)
    if not state.get("ready"):
        return "starting"
    if clients > 0:
        return f"in use by {clients} connection(s)"
    if (warm := warming(folder)) is not None:
        return warm
    return f"idle for {_ago(now - used)}, stops in {_ago(max(0.0, state['idle_s'] - (now - used)))}"


@click.command()
@click.option("--stop", "stop_now", is_flag=True, help="Stop the local checker now (the next check starts it again).")
@click.option("--force", is_flag=True, help="With --stop: stop it even while a check runs on it (that check fails).")
def status(stop_now: bool, force: bool) -> None:
    """Show the local checker: the Spark Connect server that checks reuse. It stops by itself after
    10 idle minutes (KAFKA_CHAOS_CHECKER_IDLE seconds); --stop stops it now."""
    from analysis.checking import spark_server
    state = spark_server.read_state()
    if not stop_now:
        for folder, other in spark_server.elsewhere():
            click.echo(f"local checker of another checkout: running, {_when(other, folder)}; "
                       f"pid {other['pid']}, JVM pid {other['jvm_pid']}; folder {folder} ({other.get('python', '?')})")
    if state is None:
        click.echo(f"local checker: not running (it starts with the next check; folder {spark_server.home()})")
        return
    if stop_now:
        busy = spark_server.checks_running(state)
        if busy > 0 and not force:
            raise HarnessError(f"the local checker is in use by {busy} connection(s): a check is running on it.",
                               hint="wait for it, or add --force to stop it anyway (that check fails)")
        spark_server.stop()
        click.echo(f"local checker: stopped (pid {state['pid']}, JVM pid {state['jvm_pid']})")
        return
    click.echo(f"local checker: running, {_when(state)}; up {_ago(time.time() - state['started'])}")
    click.echo(f"  pid {state['pid']} (supervisor), JVM pid {state['jvm_pid']}, port {state['port']} on loopback")
    click.echo(f"  log {state['log']}")
    if (line := _warm_line()) is not None:
        click.echo(line)
