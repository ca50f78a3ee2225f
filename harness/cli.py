"""`python -m harness`: the command line of the Kafka chaos harness."""

from __future__ import annotations

import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from harness.errors import HarnessError
from harness.run.options import RunCommand
from harness.run.settings import DEFAULTS as D

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
    from harness.provision.bootstrap import prepare

    with console.status("preparing: Docker engine, base image (first time: debootstrap, ~1 min), Kafka jars (first time: Maven, ~30 s)"):
        prepared = prepare(kafka_version)
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in prepared.seconds.items())
    console.print(f"ready: image {prepared.image}, Kafka {prepared.kafka.version} ({timings})")


@cli.command()
@click.option("--run-id", default=None, help="Only this run's resources; they go unless their owner process still runs.")
@click.option("--all", "force", is_flag=True, help="Also remove what live processes, other hosts or unknown owners hold.")
@click.option("--dry-run", is_flag=True, help="Say what would be removed and why each run is kept; remove nothing.")
@click.option("--target", "target_file", default=None, type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Instead: heal what runs' faults left on this target (iptables rules, stopped or paused brokers; docs/target.md).")
def cleanup(run_id: str | None, force: bool, dry_run: bool, target_file: Path | None) -> None:
    """Remove the containers, networks, lossy mounts and temporary folders of runs whose harness process
    has died (a SIGKILLed run cannot tear down). A live run is never touched without --all."""
    from harness.provision import cleanup as cleaning
    from harness.provision.docker_engine import docker_answers

    if target_file is not None:
        from harness.target.commands import cleanup_target

        return cleanup_target(target_file, run_id, dry_run)

    if not docker_answers():
        raise HarnessError("no Docker engine answers, so there is nothing to clean up from here.", hint="run `python -m harness bootstrap` to start it")
    report = cleaning.sweep(run_id, force=force, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    console.print(f"{verb} {len(report.containers)} container(s), {len(report.networks)} network(s), {len(report.mounts)} mount(s) "
                  f"and {len(report.folders)} folder(s) of {len(report.run_ids)} run(s); kept {len(report.kept)} run(s)")
    for run in sorted(report.runs, key=lambda r: (not r.remove, r.run_id)):
        click.echo(f"{'remove' if run.remove else 'keep'} {run.run_id}: {run.reason}")
        for name in run.names() if run.remove else []:
            click.echo(f"  {name}")
    if report.errors:
        raise HarnessError(f"{len(report.errors)} resource(s) could not be removed: {'; '.join(report.errors)}",
                           hint="run the same cleanup again; Docker's message is above")
    if run_id is not None and report.kept and not dry_run:
        raise HarnessError(f"run {run_id} was kept: {report.kept[0].reason}.",
                           hint="stop its harness process first, or add --all to remove it anyway")


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


@cli.command(name="run", cls=RunCommand)
@click.option("--brokers", default=D["brokers"], show_default=True, type=click.IntRange(1, 9), help="Number of Kafka brokers.")
@click.option("--workload", default=D["workload"], show_default=True, help="queue (sends and polls), txn (transactions, read_committed) or eos (exactly-once pipeline: consume, transform, produce and commit input offsets in one transaction; read_committed readers of the output).")
@click.option("--profile", default=D["profile"], show_default=True, help="Client profile: safe, fsync, no-idempotence, acks1, acks0, minisr1, unclean, autocommit, short-timeout, unsafe.")
@click.option("--time-limit", default=D["time_limit"], show_default=True, type=float, help="Seconds of workload (before heal and drain).")
@click.option("--rate", default=D["rate"], show_default=True, type=float, help="Target sends per second, over all producers.")
@click.option("--seed", default=D["seed"], show_default=True, type=int, help="Seed of the schedule (which value goes to which partition, when).")
@click.option("--store", default=D["store"], show_default=True, type=click.Path(file_okay=False), help="Folder that receives the run directory.")
@click.option("--partitions", default=D["partitions"], show_default=True, type=int)
@click.option("--producers", default=D["producers"], show_default=True, type=int)
@click.option("--consumers", default=D["consumers"], show_default=True, type=int)
@click.option("--subscribe", is_flag=True, default=D["subscribe"], help="Consumers join a group (subscribe) instead of assigning partitions.")
@click.option("--abort-probability", default=D["abort_probability"], show_default=True, type=float, help="txn and eos workloads: share of transactions aborted on purpose.")
@click.option("--drain-timeout", default=D["drain_timeout"], show_default=True, type=float, help="Seconds the final drain may go without reading a record (10x this in all).")
@click.option("--allow-worker-errors", is_flag=True, default=D["allow_worker_errors"],
              help="A client worker that dies does not make the verdict unknown (for runs meant to kill clients).")
@click.option("--compare-replicas", is_flag=True, default=D["compare_replicas"],
              help="After the drain, dump every replica with DumpLogSegments and compare them offset by offset: replicas "
                   "that hold different values at one offset are a forbidden anomaly without unclean election "
                   "(replicas.json; one JVM per replica, ~1 min for 24).")
@click.option("--crash-clients", default=D["crash_clients"], type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="queue workload: crash each producer after a random life of mean SECONDS and open a fresh one "
                   "(Jepsen's --crash-clients); a fresh writer goes to the leader of the moment.  [default: never]")
@click.option("--kafka-version", default=D["kafka_version"], help="Kafka release (default: the pinned 4.x).")
@click.option("--upgrade-to", default=D["upgrade_to"], metavar="VERSION",
              help="With --nemesis upgrade: the release a rolling upgrade under load moves every node to (docs/nemesis.md).")
@click.option("--nemesis", default=D["nemesis"], show_default=True, help="Comma-separated fault packages, or none (the packages are listed below).")
@click.option("--nemesis-interval", default=D["nemesis_interval"], show_default=True, type=float, help="Mean seconds between a fault package's start and stop.")
@click.option("--schedule", "scheduler", default=D["scheduler"], show_default=True, type=click.Choice(["random", "guided"]),
              help="Who decides the faults: random (seeded, drawn ahead) or guided (steers toward abstract states this store's "
                   "runs have not seen, with generic packages only; docs/guided.md).")
@click.option("--observe", is_flag=True, default=D["observe"],
              help="Record the cluster's abstract states (observed history events) under any schedule; guided always does.")
@click.option("--power-writeback-s", default=D["power_writeback_s"], type=float,
              help="Power loss's model: data dirty for this many seconds had reached the disk (default: the worst case, "
                   "everything not fsynced is lost).")
@click.option("--client", default=D["client"], show_default=True, metavar="NAME",
              help="The Kafka client beneath the workloads: librdkafka (confluent-kafka) or java (kafka-clients in a JVM child).")
@click.option("--client-version", default=D["client_version"], metavar="VERSION",
              help="kafka-clients version for --client java (default: the newest 4.x served); librdkafka's is the installed one.")
@click.option("--group-protocol", default=D["group_protocol"], show_default=True, type=click.Choice(["classic", "consumer"]),
              help="Consumer group protocol for --subscribe: consumer is KIP-848's (Kafka 4.0 and later).")
@click.option("--controllers", default=D["controllers"], show_default=True, type=click.IntRange(0, 5),
              help="Dedicated KRaft controller nodes beside the brokers (0: every broker is also a controller).")
@click.option("--broker-config", multiple=True, metavar="K=V",
              help="A broker setting (server.properties) on top of the harness's, e.g. min.insync.replicas=3; repeatable. "
                   "A topic inherits min.insync.replicas, unclean.leader.election.enable and log.flush.interval.messages from it.")
@click.option("--topic-config", multiple=True, metavar="K=V",
              help="A setting of the workload topic on top of the profile's, e.g. min.insync.replicas=3, or replication.factor=2; repeatable.")
@click.option("--producer-config", multiple=True, metavar="K=V",
              help="A producer setting on top of the profile's, e.g. acks=1 (which turns the profile's idempotence off); repeatable.")
@click.option("--consumer-config", multiple=True, metavar="K=V",
              help="A consumer setting on top of the profile's, e.g. isolation.level=read_uncommitted; repeatable. "
                   "Secrets (passwords, keys, JAAS) are never written down, in any of the four.")
@click.option("--check/--no-check", default=True, show_default=True, help="Check the history (Spark) and write report.html at the end.")
@click.option("--spark-master", default=None, metavar="URL", help="Spark master for the check (default: SPARK_REMOTE, else local[*]).")
@click.option("--config", "config_file", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="A TOML file of run settings (keys as the long options: time-limit = 30, nemesis = [\"kill\"]); flags override it.")
@click.option("--target", default=None, type=click.Path(dir_okay=False), metavar="FILE",
              help="Run against a cluster the harness did not start, described by FILE (docs/target.md): its own topic, deleted after.")
@click.option("--allow-faults", is_flag=True, help="With --target: the target may be faulted (without it, --nemesis must be none).")
@click.option("--keep-topic", is_flag=True, help="With --target: keep the run's topic on the target.")
@click.option("--replay", default=None, type=click.Path(dir_okay=False, path_type=Path), metavar="CONFIG_JSON",
              help="Reproduce a run from its STORE/RUN/config.json (seed, version, workload, profile, nemesis, sizes); flags override it.")
@click.pass_context
def run_command(ctx: click.Context, config_file: Path | None, replay: Path | None, **flags: Any) -> None:
    """Run a workload against a fresh cluster, heal, drain, check and report.

    Settings come from flags, a TOML file (--config) or an earlier run (--replay), flags winning.
    The last line printed is the run directory. Exit 0 valid, 1 invalid, 3 unknown
    (with --no-check: 0 once the run completed), 2 bad input or infrastructure failure."""
    from harness.run.steps import run
    from harness.run.defaults import apply_run_defaults, fault_lines, faults_of
    from harness.run.settings import run_config

    flags, defaults = apply_run_defaults(ctx, flags, config_file, replay)
    values = resolve_run_settings(ctx, flags, config_file, replay)
    if values.get("target"):
        from harness.target.commands import target_faults

        target_faults(ctx, values, defaults)  # faults on a target need --allow-faults: exit 2 before anything
    # The recorded command line names what the environment chose, so that it alone reproduces the run.
    config = run_config(values, command_line=["python", "-m", "harness", *sys.argv[1:], *defaults])
    faults = faults_of(config, defaults)  # bad packages or targets: exit 2 before anything starts
    check, spark_master = values["check"], values["spark_master"]
    if config.schedule:
        console.print(f"replaying the fault schedule of {replay}: {len(config.schedule)} events at their recorded "
                      "times, on their recorded targets")
    with RunProgress(config.time_limit_s) as progress:
        step = with_checker_start(progress.update, check, spark_master)
        if values.get("target"):
            from harness.target.run import run_target_file

            result = run_target_file(values["target"], config, faults, step, values.get("keep_topic", False))
        else:
            result = run(config, faults=faults, progress=step)
    drain = result.drain
    state = "complete" if drain["complete"] else f"[yellow]not drained: {drain.get('undrained') or drain['timed_out_partitions']}[/yellow]"
    counts = result.counts
    console.print(
        f"run {result.run_id}: {counts.get('ok', 0)} ok, {counts.get('fail', 0)} fail, {counts.get('info', 0)} info; "
        f"drain {state}"
    )
    for line in fault_lines(result.run_dir):
        console.print(line, highlight=False)
    exit_code = 0
    if check:
        from analysis.report.render import summary
        from harness.run.finish import check_and_report

        with console.status("checking the history (Spark) and writing the report"):
            finished = check_and_report(result.run_dir, spark_master=spark_master)
        colour = {"valid": "green", "invalid": "red"}.get(finished.results["verdict"], "yellow")
        console.print(f"[{colour}]{summary(finished.results, result.run_dir)}[/{colour}]", highlight=False)
        if finished.report is not None:
            console.print(f"report: {finished.report}")
        exit_code = finished.exit_code
        from harness.history.files import compact_history

        compact_history(result.run_dir)  # checked: one durable form of its history is kept (docs/nightly.md)
    click.echo(str(result.run_dir))  # the last line on stdout, for scripts
    sys.exit(exit_code)


def with_checker_start(update: Any, check: bool, spark_master: str | None) -> Any:
    """The progress callback, which also starts the local checker in the background once the
    workload runs (harness/run/finish.py prepare_checker): its JVM then comes up during the workload,
    not after it, and not during the cluster's start, which is the most sensitive to CPU on 2 cores."""
    started = [not check]

    def step(phase: str, recorder: Any) -> None:
        update(phase, recorder)
        if phase == "workload" and not started[0]:
            from harness.run.finish import prepare_checker

            started[0] = True
            prepare_checker(spark_master)
    return step


def resolve_run_settings(ctx: click.Context, flags: dict[str, Any], config_file: Path | None,
                         replay: Path | None) -> dict[str, Any]:
    """Defaults < TOML file or replayed config.json < flags given on the command line."""
    from click.core import ParameterSource

    from harness.kafka_settings.given import parse_pairs
    from harness.run.settings import CONFIG_SCOPES, SCHEDULE_KEYS, read_replay, read_toml

    if config_file is not None and replay is not None:
        raise HarnessError("--config and --replay cannot be combined.", hint="use one of them, and flags to change single settings")
    file_values: dict[str, Any] = {}
    if config_file is not None:
        converters = {p.name: _converter(ctx, p) for p in ctx.command.get_params(ctx)
                      if isinstance(p, click.Option) and p.name not in ("config_file", "replay", "help")}
        file_values = read_toml(config_file, converters)
    elif replay is not None:
        file_values = read_replay(replay)
    values = dict(flags)
    for key, value in file_values.items():
        if key in CONFIG_SCOPES and value:  # the file's settings, with the command line's on top, key by key
            scope = CONFIG_SCOPES[key]
            values[key] = {**parse_pairs(scope, value), **parse_pairs(scope, flags.get(key))}
        elif ctx.get_parameter_source(key) != ParameterSource.COMMANDLINE:
            values[key] = value
    changed = [k for k in SCHEDULE_KEYS if k in file_values and values[k] != file_values[k]]
    if "schedule" in values and changed:
        del values["schedule"]
        console.print(f"note: --{changed[0].replace('_', '-')} differs from the replayed run, so its recorded fault "
                      "schedule does not apply; a fresh one is drawn from the seed")
    return values


def _converter(ctx: click.Context, param: click.Parameter) -> Any:
    from harness.run.settings import CONFIG_SCOPES

    if param.name in CONFIG_SCOPES:  # a TOML table of settings ([producer-config] acks = "1"), checked later
        return lambda value: value if isinstance(value, dict) else param.type_cast_value(ctx, value)
    return lambda value: param.type_cast_value(ctx, value)




class RunProgress:
    """A live line on stderr: phase, elapsed time, ops/s and ok/fail/info counts."""

    def __init__(self, time_limit: float) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("{task.fields[phase]:<16}"), BarColumn(), TimeElapsedColumn(), TextColumn("{task.fields[stats]}"),
            console=console, transient=False,
        )
        self.task = self.progress.add_task("run", total=time_limit, phase="preparing", stats="")
        self.time_limit = time_limit
        self.workload_began: float | None = None
        self.last: tuple[float, int] = (time.monotonic(), 0)
        self.rate = 0.0
        self.started = False  # the line appears with the first phase

    def __enter__(self) -> "RunProgress":
        return self  # the line appears with the first phase: bad input (run() checks it first) prints no empty bar

    def __exit__(self, *exc: object) -> None:
        if self.started:
            self.progress.stop()

    def update(self, phase: str, recorder: Any) -> None:
        if not self.started:
            self.progress.start()
            self.started = True
        now = time.monotonic()
        completed = 0
        if recorder is not None:
            counts = recorder.counts
            completed = counts["ok"] + counts["fail"] + counts["info"]
            then, before = self.last
            if now - then >= 1.0:
                self.rate, self.last = (completed - before) / (now - then), (now, completed)
            stats = f"{self.rate:>8,.0f} ops/s  ok {counts['ok']:,}  fail {counts['fail']:,}  info {counts['info']:,}"
        else:
            stats = ""
        if phase == "workload" and self.workload_began is None:
            self.workload_began = now
        done = min(self.time_limit, now - self.workload_began) if self.workload_began else 0
        if phase not in ("starting cluster", "opening clients", "workload"):
            done = self.time_limit
        self.progress.update(self.task, phase=phase, stats=stats, completed=done)


def _register_commands() -> None:
    """scenario, status (the local checker), and the analysis commands (check, report, dashboard, trends) as they are."""
    from analysis.cli import main as analysis_main
    from harness.checker_commands import status
    from harness.experiments.campaign_commands import campaign, replay_find_command
    from harness.experiments.commands import compare_clients_command, controls, detect
    from harness.scenario_commands import scenario
    from harness.store_commands import prune

    for command in (prune, status, scenario, controls, detect, compare_clients_command, campaign, replay_find_command):
        cli.add_command(command)
    from harness.target.commands import cluster_group

    cli.add_command(cluster_group)
    for name in ("check", "report", "dashboard", "trends"):
        cli.add_command(analysis_main.commands[name])


_register_commands()


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
        report_error(exc)
        sys.exit(exc.exit_code)
    except OSError as exc:  # a folder that cannot be written, a file that vanished: bad input, exit 2
        report_error(HarnessError(f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}.",
                                  hint="check that the path exists and that you may read and write it"))
        sys.exit(2)


def report_error(exc: HarnessError) -> None:
    """Every command's errors, one way: the message, the hint, logs, and the run directory."""
    console.print(f"[red]error:[/red] {exc.message}", highlight=False)
    if exc.hint:
        console.print(f"hint: {exc.hint}", highlight=False)
    if exc.details:
        console.print(exc.details, markup=False, highlight=False)
    if exc.run_dir is not None:
        console.print(f"run directory: {exc.run_dir}", highlight=False)
