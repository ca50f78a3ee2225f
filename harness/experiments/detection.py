"""Detection power: how often the random fault schedule finds a real loss on its own (issue 21).

The controls (harness/experiments/calibration.py) only prove that loss is found where the configuration allows
it (acks=1, unclean election). This measures the question a nightly suite exists for: run the
`safe` profile (acks=all, RF 3, min.insync.replicas 2, unclean election off) under the random,
role-aware kill/partition/pause schedule on Kafka versions that had replication bugs (0.10.2.2:
KIP-101 scenario 1; 1.1.1: KIP-279) and on versions that should have none (3.9.2 and the default Kafka, 4.4.0), and
count the runs whose verdict is `invalid` because of a forbidden loss or divergence.

Brokers older than 0.11 have no idempotent producer, so `safe` there would only die with
_UNSUPPORTED_FEATURE (workloads/profiles.py refuses it): those versions run `no-idempotence`,
which is `safe` without idempotence.

`detect --schedule guided|random` (issue 38, docs/guided.md) runs the same sweep under the guided
schedule or the random one with the state watch on, and each ledger row then also holds the run's
distinct abstract states and transitions; without `--schedule` the sweep is today's random one,
unwatched, and its rows keep their old key.

Every finished run is appended to STORE/detection.jsonl at once, so a sweep that is stopped
(Ctrl-C, a lost machine) resumes where it was: a (version, profile, seed, settings) already
recorded with a verdict is not run again; one recorded as FAILED is.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness.errors import BootstrapError, HarnessError, KafkaVersionError
from harness.provision.settings import DEFAULT_KAFKA_VERSION

log = logging.getLogger(__name__)

VERSIONS = ("0.10.2.2", "1.1.1", "3.9.2", DEFAULT_KAFKA_VERSION)  # the buggy two, then two that should be valid
FAULTS = ("kill", "partition", "pause")
LEDGER = "detection.jsonl"
# Anomalies that are a loss or a divergence (analysis/rules/verdict.py's headline groups them so).
LOSS_KINDS = frozenset({"lost-write", "unseen", "inconsistent-offsets", "replica-divergence"})


def profile_for(version: str, profile: str | None = None) -> str:
    """PROFILE when one is named; else `safe`, or `no-idempotence` on brokers that predate the
    idempotent producer (KIP-98, 0.11)."""
    if profile is not None:
        return profile
    from harness.provision.kafka_jars import parse_version
    from workloads.profiles import IDEMPOTENCE_SINCE

    return "safe" if parse_version(version) >= IDEMPOTENCE_SINCE else "no-idempotence"


def finds_loss(verdict: str | None, lost: int, diverged: int, forbidden: list[str] | tuple[str, ...] = ()) -> bool:
    """Invalid because of a forbidden loss or divergence (not, say, a duplicate alone)."""
    return verdict == "invalid" and (lost > 0 or diverged > 0 or bool(LOSS_KINDS & set(forbidden)))


def results_find_loss(results: dict[str, Any] | None) -> bool:
    """`finds_loss` of a results.json."""
    results = results or {}
    head = results.get("headline") or {}
    return finds_loss(results.get("verdict"), head.get("lost", 0), head.get("diverged", 0), results.get("forbidden") or [])


@dataclass
class DetectionRun:
    version: str
    profile: str
    seed: int
    settings: dict[str, Any]
    run_dir: str
    verdict: str
    lost: int = 0
    diverged: int = 0
    duplicated: int = 0
    forbidden: list[str] = field(default_factory=list)
    failed: str | None = None  # the run could not complete (FAILED's reason): no verdict
    # With a state watch (detect --schedule): distinct abstract states and transitions the run saw.
    states: int | None = None
    transitions: int | None = None
    at_risk: int | None = None  # times writes were at risk (nemesis/guided/risk.py)

    @property
    def found(self) -> bool:
        return finds_loss(self.verdict, self.lost, self.diverged, self.forbidden)

    def key(self) -> tuple[str, str, int, str]:
        return (self.version, self.profile, self.seed, json.dumps(self.settings, sort_keys=True))


def read_ledger(store: Path) -> list[DetectionRun]:
    """Every run recorded under STORE (a torn last line, from a killed sweep, is skipped)."""
    path = store / LEDGER
    if not path.exists():
        return []
    runs = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            runs.append(DetectionRun(**json.loads(line)))
        except (ValueError, TypeError) as exc:
            log.warning("%s line %d skipped (%s): it is run again", path, number, exc)
    return runs


def append_ledger(store: Path, run: DetectionRun) -> None:
    with (store / LEDGER).open("a") as out:
        out.write(json.dumps(asdict(run), sort_keys=True) + "\n")
        out.flush()


@dataclass
class Detection:
    runs: list[DetectionRun]

    def rows(self) -> list[dict[str, Any]]:
        """One row per (version, profile): seeds run, runs that found loss, the first seed to find it."""
        rows: dict[tuple[str, str, str], dict[str, Any]] = {}
        for r in self.runs:
            schedule = schedule_of(r)
            row = rows.setdefault((r.version, r.profile, schedule), {
                "version": r.version, "profile": r.profile, "schedule": schedule, "seeds": 0, "found": 0, "first": None,
                "invalid_other": 0, "failed": 0, "unknown": 0, "states": [], "transitions": []})
            row["seeds"] += 1
            if r.states is not None:
                row["states"].append(r.states)
                row["transitions"].append(r.transitions or 0)
            row["failed"] += r.failed is not None
            row["unknown"] += r.verdict == "unknown"
            row["invalid_other"] += r.verdict == "invalid" and not r.found  # e.g. a consumer sent back by a truncation
            if r.found:
                row["found"] += 1
                row["first"] = r.seed if row["first"] is None else min(row["first"], r.seed)
        return list(rows.values())

    def markdown(self) -> str:
        lines = ["| version | profile | schedule | seeds | runs that found loss | first seed to find it | invalid for another "
                 "anomaly | unknown | failed | distinct states per run (mean) | distinct transitions per run (mean) |",
                 "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['version']} | {r['profile']} | {r['schedule']} | {r['seeds']} | {r['found']} | {r['first'] or '-'} | "
                  f"{r['invalid_other']} | {r['unknown']} | {r['failed']} | {_mean(r['states'])} | {_mean(r['transitions'])} |"
                  for r in self.rows()]
        lines += ["", "| version | schedule | seed | verdict | lost | diverged | duplicated | forbidden | states | transitions | "
                  "writes at risk | run |", "|---|---|---:|---|---:|---:|---:|---|---:|---:|---:|---|"]
        lines += [f"| {r.version} | {schedule_of(r)} | {r.seed} | {r.verdict if r.failed is None else 'FAILED: ' + r.failed[:60]} | "
                  f"{r.lost} | {r.diverged} | {r.duplicated} | {', '.join(r.forbidden) or '-'} | "
                  f"{'-' if r.states is None else r.states} | {'-' if r.transitions is None else r.transitions} | "
                  f"{'-' if r.at_risk is None else r.at_risk} | {Path(r.run_dir).name} |"
                  for r in self.runs]
        return "\n".join(lines)


def run_detection(
    store: Path,
    versions: list[str],
    seeds: list[int],
    time_limit_s: float = 120.0,
    interval_s: float = 10.0,
    rate: float = 500.0,
    packages: tuple[str, ...] = FAULTS,
    spark: Any = None,
    on_run: Callable[[DetectionRun, bool], None] | None = None,
    execute: Callable[..., DetectionRun] | None = None,
    compare_replicas: bool = False,
    profile: str | None = None,
    crash_clients_s: float | None = None,
    schedule: str | None = None,
    controllers: int = 0,
    nemesis_settings: dict[str, str] | None = None,
) -> Detection:
    """Every version × seed not yet in STORE's ledger, in seed order within each version; returns
    the runs of this measurement (ledger rows included), each checked as soon as it ends."""
    settings: dict[str, Any] = {"time_limit_s": time_limit_s, "interval_s": interval_s, "rate": rate, "nemesis": list(packages)}
    if compare_replicas:  # only when on, so that the rows recorded before the option keep their key
        settings["compare_replicas"] = True
    if crash_clients_s is not None:  # likewise
        settings["crash_clients_s"] = crash_clients_s
    if controllers:  # likewise: dedicated KRaft controllers (run --controllers)
        settings["controllers"] = controllers
    if schedule is not None:  # likewise: a watched random run or a guided one (docs/guided.md)
        settings["schedule"] = schedule
    if schedule == "guided":  # each design of the scheduler is its own measurement
        from nemesis.guided.scheduler import DESIGN

        settings["guided_design"] = DESIGN
    # The packages' own settings (coins, targets, windows) too: when a default changes, as the
    # transfer's coins did (0.5 to 0.75, 2026-11-25), the runs before and after are two measurements.
    if nemesis_settings:  # likewise: the packages' settings given (detect --db-targets), as text
        settings["nemesis_settings"] = dict(nemesis_settings)
    settings["nemesis_options"] = nemesis_options(packages, nemesis_settings)
    # The latest row of each run wins; a run that FAILED (broker never up, cluster unreachable: on
    # this 2-core machine four sweeps at once made both happen) has no verdict and is run again.
    done = {k: r for k, r in {r.key(): r for r in read_ledger(store)}.items() if r.failed is None}
    one = execute or _execute
    finisher = None
    runs = []
    for version in versions:
        chosen = profile_for(version, profile)
        for seed in seeds:
            probe = DetectionRun(version, chosen, seed, settings, "", "")
            if probe.key() in done:
                runs.append(done[probe.key()])
                if on_run is not None:
                    on_run(done[probe.key()], True)
                continue
            if finisher is None and execute is None:
                from harness.run.finish import Finisher

                finisher = Finisher(spark=spark)  # Spark starts with the first check
            result = one(store, version, chosen, seed, settings, finisher)
            append_ledger(store, result)
            runs.append(result)
            if on_run is not None:
                on_run(result, False)
    return Detection(runs)


def nemesis_options(packages: tuple[str, ...] | list[str], given: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """What each package's options are in this checkout (its defaults, or the settings `given`), as
    config.json records them, JSON-shaped."""
    from nemesis.runner import build_nemeses

    return json.loads(json.dumps({name: n.options() for name, n in build_nemeses(list(packages), given).items()}))


def _execute(store: Path, version: str, profile: str, seed: int, settings: dict[str, Any], finisher: Any) -> DetectionRun:
    """One run and its check. A run that fails (broker never up, cluster vanished) is recorded as
    such, with its reason, and the sweep goes on: it is neither a finding nor a clean run."""
    from harness.experiments.calibration import faulted_run
    from harness.run.steps import RunConfig
    from nemesis import registry

    packages = list(settings["nemesis"])
    config = RunConfig(store=store / version, profile=profile, kafka_version=version, time_limit_s=settings["time_limit_s"],
                       rate=settings["rate"], seed=seed, compare_replicas=bool(settings.get("compare_replicas")),
                       crash_clients_s=settings.get("crash_clients_s"), controllers=int(settings.get("controllers") or 0),
                       command_line=["python", "-m", "harness", "detect", "--kafka-versions", version, "--profile", profile,
                                     "--seeds", str(seed),
                                     "--time-limit", str(settings["time_limit_s"]), "--nemesis", ",".join(packages)]
                       + (["--compare-replicas"] if settings.get("compare_replicas") else [])
                       + (["--crash-clients", str(settings["crash_clients_s"])] if settings.get("crash_clients_s") else [])
                       + (["--controllers", str(settings["controllers"])] if settings.get("controllers") else [])
                       + [x for k, v in (settings.get("nemesis_settings") or {}).items()
                          for x in (registry.settings()[k].flag, str(v))])
    config.nemesis_settings = dict(settings.get("nemesis_settings") or {})
    try:
        if settings.get("schedule"):
            run_dir, results = _scheduled_run(config, packages, settings, finisher)
        else:
            run_dir, results = faulted_run(config, packages, settings["interval_s"], finisher)
    except (BootstrapError, KafkaVersionError):
        raise  # the machine or the input is broken: every further run would fail the same way
    except HarnessError as exc:
        if exc.run_dir is None:
            raise  # before any run directory existed: bad input, not a run's outcome
        return DetectionRun(version, profile, seed, settings, str(exc.run_dir), "failed", failed=exc.message)
    head = results["headline"]
    observed = _observed(Path(run_dir))
    return DetectionRun(version, profile, seed, settings, str(run_dir), results["verdict"], head["lost"],
                        head["diverged"], head.get("duplicated", 0), list(results.get("forbidden", [])),
                        states=observed.get("distinct_states"), transitions=observed.get("distinct_transitions"),
                        at_risk=observed.get("writes_at_risk_count"))


def schedule_of(run: DetectionRun) -> str:
    return str(run.settings.get("schedule") or "random (unwatched)")


def _mean(values: list[int]) -> str:
    return f"{sum(values) / len(values):.1f}" if values else "-"


def _scheduled_run(config: Any, packages: list[str], settings: dict[str, Any], finisher: Any) -> tuple[Path, dict[str, Any]]:
    """One run under `settings["schedule"]` with the state watch on: the run command's own fault
    phase (harness/run/settings.make_faults), so a guided run here is a `run --schedule guided`."""
    from harness.run.settings import make_faults
    from harness.run.steps import run

    config.scheduler, config.observe = settings["schedule"], True
    config.nemesis, config.nemesis_interval_s = ",".join(packages), settings["interval_s"]
    config.command_line += ["--schedule", settings["schedule"]]
    result = run(config, faults=make_faults(config))
    return result.run_dir, finisher.check_and_report(result.run_dir).results


def _observed(run_dir: Path) -> dict[str, Any]:
    """The state watch's summary in a run's config.json (nemesis_config.observed), or {}."""
    from harness.history.record import RecordError, read_record

    try:
        record = read_record(run_dir)
    except (OSError, RecordError):
        return {}
    observed = record.mapping("nemesis_config").get("observed") if record is not None else None
    return observed if isinstance(observed, dict) else {}
