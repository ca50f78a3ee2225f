"""`controls` and `detect`: the commands that measure the harness itself, over many seeded runs.

- `controls`: does it find loss where the configuration allows it, and nothing where it does not
  (harness/experiments/calibration.py)?
- `detect`: how often does its random schedule find the real bugs of old Kafka versions on its
  own, and does it stay quiet on versions without them (harness/experiments/detection.py, issue 21)?
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from harness.errors import HarnessError
from harness.experiments.detection import VERSIONS as DETECT_VERSIONS

if TYPE_CHECKING:
    from harness.experiments.regression import Recipe

console = Console(stderr=True)


def _packages(nemesis: str, what: str) -> tuple[str, ...]:
    from harness.run.settings import split_list
    from nemesis.runner import build_nemeses

    packages = tuple(p for p in split_list(nemesis) if p != "none")
    build_nemeses(list(packages))  # bad package names: exit 2 before anything starts
    if not packages:
        raise click.BadParameter(f"{what} need at least one fault package", param_hint="--nemesis")
    return packages


@click.command()
@click.option("--seeds", default=10, show_default=True, type=click.IntRange(1, 100), help="Seeds 1..N for each control.")
@click.option("--time-limit", default=120.0, show_default=True, type=float, help="Seconds of workload per run.")
@click.option("--nemesis-interval", default=10.0, show_default=True, type=float)
@click.option("--rate", default=500.0, show_default=True, type=float)
@click.option("--store", default="store/controls", show_default=True, type=click.Path(file_okay=False))
@click.option("--spark-master", default=None, metavar="URL")
@click.option("--only", type=click.Choice(["unsafe", "safe"]), default=None,
              help="Run one control only (e.g. re-measure the negative control after a change).")
@click.option("--nemesis", default="kill,partition", show_default=True,
              help="Fault packages of every control run, e.g. power (safe is expected to lose data when every broker "
                   "loses power at once: docs/power.md).")
def controls(seeds: int, time_limit: float, nemesis_interval: float, rate: float, store: str, spark_master: str | None,
             only: str | None, nemesis: str) -> None:
    """Positive and negative controls: `unsafe` must show loss or divergence under the --nemesis faults (kill+partition
    by default), `safe` nothing forbidden.

    Prints a Markdown table (detection rates and every run). Exit 0 when both controls hold
    (positive: at least 90 % of seeds; negative: every seed valid), 1 when not, 2 on bad input
    or broken infrastructure."""
    from analysis.checking.spark import get_session
    from harness.experiments.calibration import run_controls
    from harness.run.directory import prepare_store

    packages = _packages(nemesis, "the controls")
    target = prepare_store(Path(store))
    spark = get_session(spark_master)
    result = run_controls(
        target, list(range(1, seeds + 1)), time_limit_s=time_limit, interval_s=nemesis_interval, rate=rate, spark=spark,
        profiles=(only,) if only else None, packages=packages,
        on_run=lambda r: console.print(f"{r.profile} seed {r.seed}: {r.verdict}, lost {r.lost}, diverged {r.diverged}, "
                                       f"duplicated {r.duplicated}"),
    )
    click.echo(result.markdown())
    summary = result.summary()
    holds = (summary["positive"]["found_loss_or_divergence"] >= 0.9 * summary["positive"]["seeds"]
             and summary["negative"]["valid"] == summary["negative"]["seeds"])  # a control not run holds vacuously
    sys.exit(0 if holds else 1)


@click.command()
@click.option("--kafka-versions", default=",".join(DETECT_VERSIONS), show_default=True,
              help="Comma-separated Kafka versions; each runs `safe` (`no-idempotence` before 0.11, which has no idempotent producer).")
@click.option("--profile", default=None, metavar="NAME",
              help="Run this client profile on every version instead (e.g. acks1: a writer with nothing pending on the "
                   "old leader, which KIP-279's divergence needs); a separate measurement in the ledger.  [default: safe, "
                   "or no-idempotence before 0.11]")
@click.option("--seeds", default="10", show_default=True, help="A count N (seeds 1..N), a list '3,7' or a range '5..8'.")
@click.option("--time-limit", default=120.0, show_default=True, type=float, help="Seconds of workload per run.")
@click.option("--nemesis", default="kill,partition,pause", show_default=True, help="Random fault packages of every run.")
@click.option("--nemesis-interval", default=10.0, show_default=True, type=float)
@click.option("--rate", default=500.0, show_default=True, type=float)
@click.option("--store", default="store/detection", show_default=True, type=click.Path(file_okay=False),
              help="Run directories go to STORE/<version>/; every finished run is appended to STORE/detection.jsonl, "
                   "and runs already there are not repeated (a stopped sweep resumes).")
@click.option("--spark-master", default=None, metavar="URL")
@click.option("--compare-replicas", is_flag=True, help="Each run also dumps and compares every replica after its drain "
              "(run --compare-replicas): divergence the clients never read counts. A separate measurement in the ledger.")
@click.option("--crash-clients", default=None, type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Each run crashes its producers after a random life of mean SECONDS (run --crash-clients). "
                   "A separate measurement in the ledger.")
@click.option("--controllers", default=0, show_default=True, type=click.IntRange(0, 5),
              help="Dedicated KRaft controllers of every run (run --controllers; 0: every broker is also a "
                   "controller). The quorum package and membership's decommission need 3 or more. A separate "
                   "measurement in the ledger.")
@click.option("--db-targets", default=None, metavar="LIST",
              help="Kill and pause targets of every run (run --db-targets: one, leader, controller, minority, majority, "
                   "all, follower, rejoined). A separate measurement in the ledger.  [default: the packages' own]")
@click.option("--markdown", "markdown_out", default=None, type=click.Path(dir_okay=False),
              help="Also write the tables to this Markdown file.")
@click.option("--schedule", default=None, type=click.Choice(["random", "guided"]),
              help="guided: each run's faults steer toward abstract states not seen before (docs/guided.md), with "
                   "STORE/<version>/guided-coverage.json growing over the sweep; random: the random schedule with the "
                   "same state watch, so both count distinct states. Either is a separate measurement in the ledger.  "
                   "[default: the random schedule, unwatched]")
@click.option("--campaign", default=None, type=click.FloatRange(min=0, min_open=True), metavar="HOURS",
              help="Instead of --seeds: seeds 1, 2, ... on every version until HOURS of wall time are spent (runs "
                   "recorded earlier count theirs, so a stopped campaign resumes); `harness campaign STORE` draws its page.")
@click.option("--recipes", is_flag=True, help="Run each version under its measured recipe (harness/experiments/regression.py: "
              "0.10.2.2 heir with replicas compared; 1.1.1 transfer with replicas compared and crash-clients 5; "
              "any other the compound mix) instead of --nemesis/--compare-replicas/--crash-clients: issue 21's "
              "measurement in one command.")
@click.pass_context
def detect(ctx: click.Context, kafka_versions: str, profile: str | None, seeds: str, time_limit: float, nemesis: str,
           nemesis_interval: float, rate: float, store: str, spark_master: str | None, compare_replicas: bool,
           crash_clients: float | None, controllers: int, db_targets: str | None, markdown_out: str | None,
           schedule: str | None, campaign: float | None, recipes: bool) -> None:
    """Detection power of a fault schedule (random, or guided with --schedule guided): `safe` runs
    under role-aware faults (kill, partition and pause unless --nemesis names others), per Kafka
    version and seed, counting the runs that are invalid because of a forbidden loss or divergence.

    0.10.2.2 (KIP-101 scenario 1) and 1.1.1 (KIP-279) had such bugs and should be found; 3.9.2 and
    the newest (the harness's default Kafka) should come out valid. Prints each run as it ends and then two Markdown tables. Exit 0
    once every run has a verdict (findings are measurements, not failures), 2 on bad input or
    broken infrastructure."""
    from harness.experiments.detection import Detection, profile_for, run_detection
    from harness.run.directory import prepare_store

    if campaign is not None and ctx.get_parameter_source("seeds") is not click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--campaign chooses the seeds (1, 2, ... until the budget is spent); drop --seeds")
    seed_list, versions = _checked(ctx, kafka_versions, profile, "1" if campaign else seeds, recipes)
    plans = _plans(versions, nemesis, compare_replicas, crash_clients, recipes)
    for vs, r in plans:  # quorum without a quorum it can change (the run's own check): exit 2 before any cluster starts
        if "quorum" in r.nemesis.split("+"):
            from harness.cluster.quorum import refuse_dynamic

            for version in vs:
                try:
                    refuse_dynamic(version, controllers)
                except HarnessError as exc:
                    raise click.BadParameter(f"{exc.message} {exc.hint}", param_hint="--nemesis") from None
    nemesis_settings = {"db_targets": db_targets} if db_targets is not None else None
    if nemesis_settings is not None:  # a typo exits 2 before any cluster starts
        from nemesis.runner import build_nemeses

        try:
            build_nemeses(["kill"], nemesis_settings)
        except HarnessError as exc:
            raise click.BadParameter(f"{exc.message}" + (f"; {exc.hint}" if exc.hint else ""), param_hint="--db-targets") from None
    if schedule == "guided":
        from nemesis.guided.scheduler import refuse_recipes

        for _, r in plans:  # heir, transfer, flap, rejoin: exit 2 before any cluster starts
            refuse_recipes(list(_packages(r.nemesis.replace("+", ","), "detection runs")))
    target = prepare_store(Path(store))
    total: int | str = len(versions) * len(seed_list)
    # The seeds as resolved: '--seeds 8' is a count (1..8), and it once ran seeds 1-7 again by mistake.
    named = (f"{seed_list[0]}..{seed_list[-1]}" if len(seed_list) > 2 and seed_list == list(range(seed_list[0], seed_list[-1] + 1))
             else ",".join(map(str, seed_list)))
    if campaign is not None:
        total, named = "?", f"1, 2, ... for {campaign:g} h"
    console.print(f"{total} run(s) × seeds {named}, {time_limit:g} s each: "
                  + "; ".join(f"{', '.join(f'{v} ({profile_for(v, profile)})' for v in vs)} under {r.label}"
                              for vs, r in plans) + f"; ledger {target / 'detection.jsonl'}")
    seen = [0]

    def progress(r, recorded: bool) -> None:  # type: ignore[no-untyped-def]
        seen[0] += 1
        what = "FAILED: " + r.failed if r.failed else f"{r.verdict}, lost {r.lost}, diverged {r.diverged}, duplicated {r.duplicated}"
        if r.states is not None:
            what += f", {r.states} states, {r.transitions} transitions"
        console.print(f"[{seen[0]}/{total}] {r.version} seed {r.seed}: {what}{' (recorded earlier)' if recorded else ''}"
                      f"{'  FOUND' if r.found else ''}", highlight=False)

    spark = None
    if spark_master is not None:
        from analysis.checking.spark import get_session

        spark = get_session(spark_master)

    def sweep(seeds: list[int]) -> list:  # type: ignore[type-arg]
        runs = []
        for vs, r in plans:
            runs += run_detection(target, vs, seeds, time_limit_s=time_limit, interval_s=nemesis_interval, rate=rate,
                                  packages=_packages(r.nemesis.replace("+", ","), "detection runs"), spark=spark,
                                  on_run=progress, compare_replicas=r.compare_replicas, profile=profile,
                                  crash_clients_s=r.crash_clients_s, schedule=schedule, controllers=controllers,
                                  nemesis_settings=nemesis_settings).runs
        return runs

    if campaign is None:
        runs = sweep(seed_list)
    else:
        from harness.experiments.campaign import campaign_seeds

        runs = campaign_seeds(campaign, sweep)
    result = Detection(runs)
    text = result.markdown()
    click.echo(text)
    if markdown_out:
        Path(markdown_out).write_text(text + "\n")


def _checked(ctx: click.Context, kafka_versions: str, profile: str | None, seeds: str,
             recipes: bool) -> tuple[list[int], list[str]]:
    """The seeds and versions, every one checked before any cluster starts: bad input exits 2 now,
    not after an hour of other versions."""
    from harness.provision.kafka_jars import parse_version
    from harness.run.settings import parse_seeds, split_list

    try:
        seed_list = list(parse_seeds(seeds))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--seeds") from None
    versions = list(split_list(kafka_versions))
    if not versions:
        raise click.BadParameter("give at least one Kafka version", param_hint="--kafka-versions")
    for version in versions:
        parse_version(version)
        if profile is not None:  # an unknown profile, or one the version cannot serve
            from workloads.profiles import get_profile, refuse_unsupported

            refuse_unsupported(get_profile(profile), "queue", version)
    if recipes:
        given = [f"--{n.replace('_', '-')}" for n in ("nemesis", "compare_replicas", "crash_clients")
                 if ctx.get_parameter_source(n) is not click.core.ParameterSource.DEFAULT]
        if given:
            raise click.UsageError(f"--recipes chooses each version's faults; drop {', '.join(given)}")
    return seed_list, versions


def _plans(versions: list[str], nemesis: str, compare: bool, crash: float | None,
           recipes: bool) -> list[tuple[list[str], Recipe]]:
    """(versions, recipe) per measurement: the options' one for all versions, or with --recipes
    each version's own (harness/experiments/regression.py)."""
    from harness.experiments.regression import Recipe, recipe_for

    if not recipes:
        packages = _packages(nemesis, "detection runs")  # bad package names: exit 2 before anything starts
        return [(versions, Recipe("+".join(packages), compare_replicas=compare, crash_clients_s=crash))]
    return [([v], recipe_for(v)) for v in versions]


@click.command(name="compare-clients")
@click.option("--clients", default="librdkafka,java", show_default=True, help="Comma-separated client drivers, in run order.")
@click.option("--kafka-version", default=None, help="Kafka release (default: the pinned 4.x).")
@click.option("--profile", default="safe", show_default=True)
@click.option("--seeds", default="10", show_default=True, metavar="N|A,B|A..B", help="A count (10 = seeds 1..10), a list or a range.")
@click.option("--time-limit", default=60.0, show_default=True, type=float, help="Seconds of workload per run.")
@click.option("--nemesis", default="kill,partition,pause", show_default=True, help="Fault packages of every run.")
@click.option("--nemesis-interval", default=10.0, show_default=True, type=float)
@click.option("--rate", default=1000.0, show_default=True, type=float)
@click.option("--store", default="store/clients", show_default=True, type=click.Path(file_okay=False))
@click.option("--markdown", "markdown_out", default=None, type=click.Path(dir_okay=False), help="Also write the tables here.")
def compare_clients_command(clients: str, kafka_version: str | None, profile: str, seeds: str, time_limit: float,
                            nemesis: str, nemesis_interval: float, rate: float, store: str, markdown_out: str | None) -> None:
    """The same seeds and the same fault schedule with each client (issue 35): the first client's run
    draws the schedule from the seed, the others replay what it executed. Prints each run as it ends,
    then a table per client: sends/s, lost, duplicated, reordered, diverged, info share, verdicts.
    Exit 0 once every run has a verdict (findings are measurements), 2 on bad input."""
    from harness.experiments.clients import compare_clients, table
    from harness.provision.settings import kafka_version as resolve
    from harness.run.directory import prepare_store
    from harness.run.settings import parse_seeds, split_list
    from workloads import drivers

    names = list(split_list(clients))
    unknown = [c for c in names if c not in drivers.names()]
    if unknown or not names:
        raise click.BadParameter(f"unknown client(s) {unknown or 'none given'}; use {', '.join(drivers.names())}", param_hint="--clients")
    try:
        seed_list = list(parse_seeds(seeds))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--seeds") from None
    packages = _packages(nemesis, "client comparisons")
    version = resolve(kafka_version)
    settings = {"kafka_version": version, "profile": profile, "time_limit_s": time_limit, "interval_s": nemesis_interval,
                "rate": rate, "nemesis": list(packages)}
    target = prepare_store(Path(store))
    finisher = None

    def execute(client: str, seed: int, schedule: list | None) -> tuple[Path, dict]:
        nonlocal finisher
        from harness.run.finish import Finisher
        from harness.run.settings import make_faults
        from harness.run.steps import RunConfig, run

        finisher = finisher or Finisher()
        config = RunConfig(store=target / client, profile=profile, kafka_version=version, time_limit_s=time_limit, rate=rate,
                           seed=seed, client=client, nemesis=",".join(packages), nemesis_interval_s=nemesis_interval,
                           schedule=schedule, command_line=["python", "-m", "harness", "compare-clients", "--clients", client,
                                                            "--seeds", str(seed), "--kafka-version", version])
        result = run(config, faults=make_faults(config))  # the seed's schedule, or the replayed one
        return result.run_dir, finisher.check_and_report(result.run_dir).results

    total = len(names) * len(seed_list)
    console.print(f"{total} run(s): clients {', '.join(names)} × seeds {seed_list[0]}..{seed_list[-1]} on Kafka {version}, "
                  f"{profile}, {time_limit:g} s of {'+'.join(packages)} each; ledger {target / 'clients.jsonl'}")
    seen = [0]

    def progress(r, recorded: bool) -> None:  # type: ignore[no-untyped-def]
        seen[0] += 1
        what = "FAILED: " + r.failed if r.failed else (f"{r.verdict}, {r.sends_per_s:.0f} sends/s, lost {r.lost}, "
                                                       f"duplicated {r.duplicated}, info {r.info_share:.1%}")
        console.print(f"[{seen[0]}/{total}] {r.client} seed {r.seed}: {what}{' (recorded earlier)' if recorded else ''}"
                      f"{' (replayed schedule)' if r.replayed_from else ''}", highlight=False)

    text = table(compare_clients(target, names, seed_list, settings, execute, progress))
    click.echo(text)
    if markdown_out:
        Path(markdown_out).write_text(text + "\n")
