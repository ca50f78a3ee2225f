"""Randomized positive and negative controls: a harness that never finds anything proves nothing.

- Positive control: the `unsafe` profile (RF 2, acks=1, min.insync.replicas 1, unclean election on)
  under kill and partition faults must show lost or diverged records (permitted by that profile,
  so the verdict stays `valid`) for nearly every seed.
- Negative control: the `safe` profile under the same faults must find nothing forbidden for every
  seed.

Each run is an ordinary `harness run` directory in the store, checked by the normal checker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness.run.finish import Finisher
from harness.run.steps import TOPIC, RunConfig, run
from nemesis.runner import FaultRunner, build_nemeses

log = logging.getLogger(__name__)

POSITIVE, NEGATIVE = "unsafe", "safe"
FAULTS = ["kill", "partition"]


@dataclass
class ControlRun:
    profile: str
    seed: int
    run_dir: str
    verdict: str
    lost: int
    diverged: int
    duplicated: int = 0

    @property
    def found(self) -> bool:
        """Loss or divergence was observed (whatever the profile permits)."""
        return self.lost > 0 or self.diverged > 0


@dataclass
class Controls:
    runs: list[ControlRun] = field(default_factory=list)

    def of(self, profile: str) -> list[ControlRun]:
        return [r for r in self.runs if r.profile == profile]

    def summary(self) -> dict[str, Any]:
        positive, negative = self.of(POSITIVE), self.of(NEGATIVE)
        return {
            "positive": {"profile": POSITIVE, "seeds": len(positive), "found_loss_or_divergence": sum(r.found for r in positive)},
            "negative": {"profile": NEGATIVE, "seeds": len(negative), "valid": sum(r.verdict == "valid" for r in negative)},
        }

    def markdown(self) -> str:
        s = self.summary()
        lines = [
            "| control | profile | seeds | detected |",
            "|---|---|---:|---|",
            f"| positive (must find loss/divergence) | {POSITIVE} | {s['positive']['seeds']} | "
            f"{s['positive']['found_loss_or_divergence']} of {s['positive']['seeds']} |",
            f"| negative (must find nothing forbidden) | {NEGATIVE} | {s['negative']['seeds']} | "
            f"{s['negative']['valid']} of {s['negative']['seeds']} valid |",
            "",
            "| profile | seed | verdict | lost | diverged | duplicated | run |",
            "|---|---:|---|---:|---:|---:|---|",
        ]
        lines += [f"| {r.profile} | {r.seed} | {r.verdict} | {r.lost} | {r.diverged} | {r.duplicated} | {Path(r.run_dir).name} |"
                  for r in self.runs]
        return "\n".join(lines)


def faulted_run(config: RunConfig, packages: tuple[str, ...] | list[str], interval_s: float,
                finisher: Finisher) -> tuple[Path, dict[str, Any]]:
    """One run of `config` under the random schedule of `packages` (seeded by the run's seed),
    checked and reported: its directory and results.json. Shared by the controls and by
    harness/experiments/detection.py's sweep."""
    faults = FaultRunner(build_nemeses(list(packages), config.nemesis_settings), config.time_limit_s, interval_s=interval_s, seed=config.seed, topic=TOPIC)
    result = run(config, faults=faults)
    return result.run_dir, finisher.check_and_report(result.run_dir).results


def run_controls(
    store: Path,
    seeds: list[int],
    time_limit_s: float = 120.0,
    interval_s: float = 10.0,
    rate: float = 500.0,
    spark: Any = None,
    on_run: Callable[[ControlRun], None] | None = None,
    profiles: tuple[str, ...] | None = None,
    packages: tuple[str, ...] = tuple(FAULTS),
) -> Controls:
    """Run both controls (or only `profiles`) for every seed; each run is checked as soon as it ends."""
    finisher = Finisher(spark=spark)  # Spark starts with the first check
    controls = Controls()
    for seed in seeds:
        for profile in profiles or (POSITIVE, NEGATIVE):
            config = RunConfig(store=store, profile=profile, time_limit_s=time_limit_s, rate=rate, seed=seed,
                               command_line=["python", "-m", "harness", "controls", "--seeds", str(seed),
                                             "--nemesis", ",".join(packages)])
            run_dir, results = faulted_run(config, packages, interval_s, finisher)
            headline = results["headline"]
            control = ControlRun(profile, seed, str(run_dir), results["verdict"], headline["lost"], headline["diverged"],
                                 headline.get("duplicated", 0))
            controls.runs.append(control)
            if on_run is not None:
                on_run(control)
    return controls
