"""The old-version regression set (`pytest -m chaos --chaos-regression`): a positive control of the
suite itself. Each version that had a replication bug runs, seed after seed, the random recipe that
measurably finds that bug (`harness detect`, docs/detection.md), and passes only if some seed does.

A recipe is a detection measurement: the fault packages, and the run options that were part of it.
Each version gets the recipe with the best measured rate; a version not listed gets the compound
packages, the recipe measured on every old version.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Recipe:
    nemesis: str  # packages joined by '+'
    compare_replicas: bool = False
    crash_clients_s: float | None = None
    measured: str = ""  # the rate behind the choice, for --help and the failure message

    @property
    def label(self) -> str:
        extra = (["compare-replicas"] if self.compare_replicas else []) + (
            [f"crash-clients {self.crash_clients_s:g}"] if self.crash_clients_s is not None else [])
        return " + ".join([self.nemesis, *extra])


# KIP-101's loss: 3 of 10 seeds on 0.10.2.2 (docs/detection.md, attempt by attempt).
COMPOUND = Recipe("kill+partition+pause+flap+rejoin", measured="0.10.2.2: 3 of 10 seeds found KIP-101's loss")

RECIPES: dict[str, Recipe] = {
    # KIP-101's loss needs the survivor truncated to its high watermark while the next leader is
    # already dead (nemesis/heir.py): 6 of 10 under `heir` alone, against 3 of 10 under the compound mix.
    "0.10.2.2": Recipe("heir", compare_replicas=True, measured="0.10.2.2: 6 of 10 seeds found KIP-101's loss"),
    # KIP-279's divergence needs a writer with nothing pending on the old leader (crash-clients)
    # and replicas compared after the heal: no client may read it. 0 of 40 under the compound mix;
    # 2 of 10 with the transfer's coins at 0.5, 3 of 10 at 0.75 (docs/detection.md, 2026-11-25).
    "1.1.1": Recipe("transfer", compare_replicas=True, crash_clients_s=5.0,
                    measured="1.1.1: 3 of 10 seeds found KIP-279's divergence"),
}

# On by --chaos-regression: 10 seeds all miss with probability 0.4^10 = 0.01 % on 0.10.2.2 and
# 0.7^10 = 2.8 % on 1.1.1.
DEFAULT_VERSIONS = ("0.10.2.2", "1.1.1")


def recipe_for(version: str) -> Recipe:
    return RECIPES.get(version, COMPOUND)


def parse_versions(text: str) -> tuple[str, ...]:
    """'0.10.2.2,1.1.1' → the versions; ValueError naming what is wrong."""
    from harness.errors import KafkaVersionError
    from harness.provision.kafka_jars import parse_version
    from harness.run.settings import split_list

    versions = split_list(text)
    if not versions:
        raise ValueError("give at least one version")
    for v in versions:
        try:
            parse_version(v)
        except KafkaVersionError as exc:
            raise ValueError(exc.message) from None
    return versions
