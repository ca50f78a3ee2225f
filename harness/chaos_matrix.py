"""The nightly matrix: its cases, its settings and how the command line gives them
(`pytest -m chaos`, harness/pytest_chaos.py). A case is one run: workload x nemesis set x profile x
Kafka version x seed. `--chaos-shard I/N` splits the matrix for a CI matrix of N jobs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.experiments.regression import recipe_for

DEFAULT_WORKLOADS = ("queue",)
DEFAULT_NEMESES = ("partition", "kill", "pause", "clock", "loss", "partition+kill+pause+clock")
DEFAULT_PROFILES = ("safe", "unsafe")
DEFAULT_TIME_LIMIT_S = 60.0
DEFAULT_RUNNER = "harness.pytest_chaos:real_runner"


@dataclass(frozen=True)
class ChaosCase:
    workload: str
    nemesis: str  # packages joined by '+', or "none"
    profile: str
    kafka_version: str
    seed: int
    compare_replicas: bool = False  # run options of a regression recipe (harness/experiments/regression.py)
    crash_clients_s: float | None = None

    @property
    def id(self) -> str:
        extra = ("-cmp" if self.compare_replicas else "") + (f"-crash{self.crash_clients_s:g}" if self.crash_clients_s else "")
        return f"{self.workload}-{self.nemesis}-{self.profile}-{self.kafka_version}{extra}-seed{self.seed}"

    @property
    def expect_valid(self) -> bool:
        """True when the profile permits no anomaly at all (e.g. `safe`): then anything found is a bug."""
        from analysis.rules.permissions import allowed
        from workloads.profiles import get_profile

        profile = get_profile(self.profile).for_brokers(3)
        return not allowed({"profile": profile.as_dict(), "workload": self.workload})[0]


@dataclass(frozen=True)
class ChaosSettings:
    store: Path
    time_limit_s: float
    nemesis_interval_s: float
    seeds: tuple[int, ...]
    versions: tuple[str, ...]
    workloads: tuple[str, ...]
    nemeses: tuple[str, ...]
    profiles: tuple[str, ...]
    spark_master: str | None
    runner: str
    regression_versions: tuple[str, ...] = ()  # empty unless --chaos-regression
    shard: tuple[int, int] = (1, 1)  # --chaos-shard I/N: this job runs share I of N
    retries: int = 1  # --chaos-retries: a run that ended with no verdict (the harness's failure) runs again

    def mine(self, items: list[Any]) -> list[Any]:
        """This shard's share of `items`: every N-th from the I-th, so each job gets a mix of the matrix."""
        index, count = self.shard
        return [item for j, item in enumerate(items) if j % count == index - 1]

    def regression_cases(self, version: str) -> list[ChaosCase]:
        """One case per seed of the regression set's `version`: its recipe, and its profile as the detection sweep's."""
        from harness.experiments.detection import profile_for

        r = recipe_for(version)
        return [ChaosCase("queue", r.nemesis, profile_for(version), version, s, r.compare_replicas, r.crash_clients_s)
                for s in self.seeds]

    def cases(self) -> list[ChaosCase]:
        """This shard's cases of the matrix (all of them without --chaos-shard)."""
        return self.mine([ChaosCase(w, n, p, v, s) for w in self.workloads for n in self.nemeses for p in self.profiles
                          for v in self.versions for s in self.seeds])


def split_list(text: str) -> tuple[str, ...]:
    from harness.run.settings import split_list as split  # the run command's own reading of a list

    return split(text)


def parse_seeds(text: str) -> tuple[int, ...]:
    """'3' → (1, 2, 3); '3,7' → (3, 7); '5..8' → (5, 6, 7, 8). UsageError on anything else."""
    from harness.run.settings import parse_seeds as seeds_of

    try:
        return seeds_of(text)
    except ValueError as exc:
        raise pytest.UsageError(f"--chaos-seeds {exc}") from None


def parse_settings(config: pytest.Config) -> ChaosSettings:
    """The options, validated: an unknown name is a UsageError that names it and the choices."""
    from harness.run.steps import WORKLOADS
    from nemesis.schedule import PACKAGES
    from workloads.profiles import PROFILES

    opt = config.getoption
    workloads, profiles = split_list(opt("--chaos-workloads")), split_list(opt("--chaos-profiles"))
    nemeses = tuple("+".join(p.strip() for p in n.split("+")) for n in split_list(opt("--chaos-nemeses")))
    for name, given, known in (("--chaos-workloads", workloads, WORKLOADS), ("--chaos-profiles", profiles, PROFILES)):
        bad = [g for g in given if g not in known]
        if bad or not given:
            raise pytest.UsageError(f"{name}: unknown {bad or 'empty list'}; choose from {', '.join(known)}")
    for n in nemeses:
        bad = [p for p in n.split("+") if p not in PACKAGES and n != "none"]
        if bad:
            raise pytest.UsageError(f"--chaos-nemeses: unknown package {bad} in {n!r}; join any of {', '.join(PACKAGES)} with '+', or none")
    versions = split_list(opt("--kafka-versions"))
    if not versions or not nemeses:
        raise pytest.UsageError("--kafka-versions and --chaos-nemeses need at least one entry each")
    time_limit = float(opt("--chaos-time-limit"))
    if time_limit <= 0:
        raise pytest.UsageError(f"--chaos-time-limit {time_limit}: must be greater than 0 seconds")
    runner = opt("--chaos-runner")
    if ":" not in runner:
        raise pytest.UsageError(f"--chaos-runner {runner!r}: give it as module:function")
    return ChaosSettings(
        store=(config.invocation_params.dir / opt("--chaos-store")).resolve(), time_limit_s=time_limit,
        nemesis_interval_s=float(opt("--chaos-nemesis-interval")), seeds=parse_seeds(opt("--chaos-seeds")),
        versions=versions, workloads=workloads, nemeses=nemeses, profiles=profiles,
        spark_master=opt("--spark-master"), runner=runner,
        regression_versions=_regression_versions(opt("--chaos-regression-versions")) if opt("--chaos-regression") else (),
        shard=parse_shard(opt("--chaos-shard")), retries=_retries(opt("--chaos-retries")),
    )


def _retries(value: int) -> int:
    if value < 0:
        raise pytest.UsageError(f"--chaos-retries {value}: give 0 (never retry) or more")
    return value


def _regression_versions(text: str) -> tuple[str, ...]:
    from harness.experiments.regression import parse_versions

    try:
        return parse_versions(text)
    except ValueError as exc:
        raise pytest.UsageError(f"--chaos-regression-versions: {exc}") from None


def parse_shard(text: str | None) -> tuple[int, int]:
    """'2/4' -> (2, 4); None -> (1, 1). UsageError naming the form otherwise."""
    if text is None:
        return (1, 1)
    try:
        index, count = (int(x) for x in str(text).split("/"))
    except ValueError:
        index = count = 0
    if not 1 <= index <= count:
        raise pytest.UsageError(f"--chaos-shard {text!r}: give it as I/N with 1 <= I <= N, e.g. 2/4")
    return (index, count)
