"""Leader-epoch scenarios: deterministic, step-by-step reproductions of the failures that
KIP-101, KIP-279, KIP-320 and KIP-966 describe, run against real Kafka (docs/scenarios.md).

A `Scenario` names its KIP, the versions expected to show the bug, and a steps function that
drives a `ScenarioContext` (harness/scenarios/context.py). `run_scenario` gives it a cluster and
a run directory shaped like `harness run`'s, so `python -m analysis check RUN_DIR` checks it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.scenarios.context import ScenarioContext


@dataclass(frozen=True)
class Scenario:
    name: str
    kip: str
    description: str
    bug_versions: str  # human-readable: which versions are expected to show the bug
    expected: dict[str, str]  # version range -> expected outcome, from the KIPs
    steps: Callable[["ScenarioContext"], dict[str, Any]] | None
    runnable: bool = True
    reason: str = ""  # why not runnable
    acks: str = "1"
    min_insync_replicas: int = 1
    unclean: bool = False
    broker_config: dict[str, Any] = field(default_factory=dict)
    topic_config: dict[str, Any] = field(default_factory=dict)
    shows_bug: Callable[[dict[str, Any]], bool] | None = None  # from the scenario's result
    replication_factor: int = 2  # the replicas are A and B; 3 adds C
    # The controller on a node that holds no replica (D): a separate KRaft controller, or a fourth
    # ZooKeeper-era broker, so that killing two replicas' brokers leaves a controller (and a quorum).
    controller_apart: bool = False
    # Every Kafka node's data directory on a lossy mount (docs/power.md), for scenarios that cut power.
    lossy_data: bool = False
    # KRaft-only (KIP-966's ELR): refused on a ZooKeeper-era version before any container starts.
    needs_kraft: bool = False
    # The readers' isolation level, and so the checker's (config.json's profile): read_committed for
    # the transactional scenarios, whose aborted records a read_uncommitted reader may see.
    isolation_level: str = "read_uncommitted"

    def serves(self, kraft: bool) -> str | None:
        """Why this scenario cannot run on a cluster of that mode, or None when it can."""
        if self.needs_kraft and not kraft:
            return f"{self.kip} needs KRaft (Kafka 3.3 or later); this version runs in ZooKeeper mode"
        return None

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "kip": self.kip, "description": self.description, "bug_versions": self.bug_versions,
                "expected": self.expected, "runnable": self.runnable, "reason": self.reason or None}


def scenarios() -> dict[str, Scenario]:
    from harness.scenarios.elr_scenarios import ELR_SCENARIOS
    from harness.scenarios.library import SCENARIOS
    from harness.scenarios.power_scenarios import POWER_SCENARIOS
    from harness.scenarios.txn_scenarios import TXN_SCENARIOS

    return {s.name: s for s in SCENARIOS + POWER_SCENARIOS + ELR_SCENARIOS + TXN_SCENARIOS}


def get_scenario(name: str) -> Scenario:
    found = scenarios()
    if name not in found:
        raise HarnessError(f"unknown scenario {name!r}.", hint=f"use one of: {', '.join(found)} (`scenario list`)")
    return found[name]
