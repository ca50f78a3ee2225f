"""`python -m harness`: the command line of the Kafka chaos harness."""

from __future__ import annotations

import logging
import signal
import sys
import time
from typing import Any

import click
from rich.console import Console

from harness.errors import HarnessError

console = Console(stderr=True)


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    # Unwind like Ctrl-C so that every context manager tears its cluster down.
    raise SystemExit(128 + signum)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Log what the harness does (Docker, Maven, brokers).")
def cli(verbose: bool) -> None:
    """Jepsen-style fault injection against real Apache Kafka, checked for lost, duplicated and reordered records."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("librdkafka").setLevel(logging.CRITICAL if not verbose else logging.WARNING)


@cli.command()
@click.option("--kafka-version", default=None, help="Kafka release to resolve (default: the pinned 4.x; env KAFKA_HARNESS_KAFKA_VERSION).")
def bootstrap(kafka_version: str | None) -> None:
    """Prepare this machine: Docker engine, base image, Kafka jars. Idempotent."""
    from harness.bootstrap import prepare

    with console.status("preparing: Docker engine, base image (first time: debootstrap, ~1 min), Kafka jars (first time: Maven, ~30 s)"):
        prepared = prepare(kafka_version)
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in prepared.seconds.items())
    console.print(f"ready: image {prepared.image}, Kafka {prepared.kafka.version} ({timings})")


@cli.command()
@click.option("--run-id", default=None, help="Remove only this run's resources (default: every run's).")
@click.option("--dry-run", is_flag=True, help="List what would be removed, remove nothing.")
def cleanup(run_id: str | None, dry_run: bool) -> None:
    """Remove containers and networks left by crashed or killed runs (everything carrying the harness label)."""
    from harness import cleanup as cleaning
    from harness.docker_engine import docker_answers

    if not docker_answers():
        raise HarnessError("no Docker engine answers, so there is nothing to clean up from here.", hint="run `python -m harness bootstrap` to start it")
    report = cleaning.leftovers(run_id) if dry_run else cleaning.cleanup(run_id)
    verb = "would remove" if dry_run else "removed"
    console.print(f"{verb} {len(report.containers)} container(s) and {len(report.networks)} network(s) of {len(report.run_ids)} run(s)")
    for name in report.containers + report.networks:
        click.echo(name)


@cli.command()
@click.option("--brokers", default=3, show_default=True, type=click.IntRange(1, 9), help="Number of Kafka brokers.")
@click.option("--kafka-version", default=None, help="Kafka release (default: the pinned 4.x).")
@click.option("--records", default=10_000, show_default=True, type=click.IntRange(1, 10_000_000), help="Records to produce and read back.")
@click.option("--partitions", default=6, show_default=True, type=click.IntRange(1, 1000))
def smoke(brokers: int, kafka_version: str | None, records: int, partitions: int) -> None:
    """Start a cluster, produce with acks=all, read everything back, tear down. Exit 1 if anything acknowledged is missing."""
    from harness.cluster import KafkaCluster
    from workloads.roundtrip import RoundTrip, consume, produce

    result = RoundTrip()
    with console.status(f"starting {brokers} Kafka brokers"):
        cluster = KafkaCluster(brokers=brokers, kafka_version=kafka_version).start()
    try:
        console.print(f"cluster {cluster.run_id} ready in {cluster.timings['ready_s']:.1f} s at {cluster.bootstrap_servers()}")
        rf = min(3, brokers)
        cluster.create_topic("smoke", partitions=partitions, replication_factor=rf, config={"min.insync.replicas": min(2, rf)})
        began = time.monotonic()
        with console.status(f"producing {records} records (acks=all, idempotent)"):
            produce(cluster.bootstrap_servers(), "smoke", records, partitions, result)
        with console.status("reading every partition back from the beginning"):
            consume(cluster.bootstrap_servers(), "smoke", partitions, len(result.acked), result)
        elapsed = time.monotonic() - began
    finally:
        cluster.stop()
    missing, misplaced, disorder = result.missing(), result.misplaced(), result.out_of_order()
    console.print(
        f"acknowledged {len(result.acked)}, failed {len(result.failed)}, read {len(result.read)} in {elapsed:.1f} s; "
        f"missing {len(missing)}, misplaced {len(misplaced)}, out of order {len(disorder)}; torn down in {cluster.timings['teardown_s']:.1f} s"
    )
    if missing or misplaced or disorder:
        console.print(f"[red]INVALID[/red]: first missing {missing[:10]}, misplaced {misplaced[:10]}, out of order {disorder[:5]}")
        sys.exit(1)
    console.print("[green]VALID[/green]: every acknowledged record was read once, at its offset, in order")


def main() -> None:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        console.print("interrupted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2)  # bad usage: unknown option, bad value
    except HarnessError as exc:
        console.print(f"[red]error:[/red] {exc.message}")
        if exc.hint:
            console.print(f"hint: {exc.hint}")
        if exc.details:
            console.print(exc.details, markup=False, highlight=False)
        sys.exit(exc.exit_code)
