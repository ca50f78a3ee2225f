"""What one run is: `RunConfig`, with every default in one place.

Kept apart from `harness.run.steps` (which brings in the cluster, testcontainers and the Kafka
client) so that the command line can read the defaults for its options without that import:
it cost every `python -m harness` start, `--help` included, 0.3 s (0.19 s -> 0.45-0.50 s).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from workloads.registry import names as workload_names

WORKLOADS = workload_names()  # workloads/registry.py
TOPIC = "queue"
GROUP_PROTOCOLS = ("classic", "consumer")
SCHEDULERS = ("random", "guided")


@dataclass
class RunConfig:
    store: Path
    workload: str = "queue"
    profile: str = "safe"
    brokers: int = 3
    kafka_version: str | None = None
    # A rolling upgrade's new version (the `upgrade` package, nemesis/upgrade.py): its jars are mounted
    # in every node beside --kafka-version's (harness/cluster/versions.py).
    upgrade_to: str | None = None
    time_limit_s: float = 60.0
    rate: float = 1000.0
    seed: int = 0
    partitions: int = 8
    producers: int = 2
    consumers: int = 2
    subscribe: bool = False
    abort_probability: float = 0.2
    drain_timeout_s: float = 60.0
    # A client worker that dies leaves a history without its ops: the check says `unknown` then,
    # unless the run was meant to kill clients (analysis/rules/verdict.py).
    allow_worker_errors: bool = False
    # After the drain, dump every replica of every partition with DumpLogSegments and compare them
    # (harness/cluster/replicas.py): divergence the clients never read (e.g. KIP-279's, where the
    # diverged records were acks=1 writes or never read back) becomes a forbidden anomaly. Off by
    # default: one JVM per replica, 24 for 8 partitions x RF 3.
    compare_replicas: bool = False
    # Jepsen's --crash-clients: each queue producer is abandoned after a random life of mean N s
    # and a fresh one takes over (workloads/queue.py says why a fresh writer matters). None: never.
    crash_clients_s: float | None = None
    # The fault phase (nemesis/runner.py); "none" runs fault-free.
    nemesis: str = "none"
    nemesis_interval_s: float = 10.0
    # Who decides the faults (docs/guided.md): "random", the seeded schedule drawn ahead; or "guided",
    # which steers toward abstract states the store's runs have not seen (nemesis/guided/).
    scheduler: str = "random"
    # Watch and record the cluster's abstract states (`observed` history events) under any
    # schedule; guided always does. detect turns it on for random runs, to count their states.
    observe: bool = False
    # Each package's own settings (partition_targets, db_targets, ...), by name as the run command's
    # options say them: declared by the packages (nemesis/registry.py); one left out takes its default.
    nemesis_settings: dict[str, Any] = field(default_factory=dict)
    # Power loss's model (nemesis/power.py), a property of the cluster's lossy mounts: None is the
    # worst case, everything not fsynced is lost; N means data and names dirty for N s or more had
    # already reached the disk.
    power_writeback_s: float | None = None
    # The Kafka client library beneath the workloads (workloads/drivers/) and its version (None: the
    # driver's default; librdkafka's is the installed confluent-kafka's).
    client: str = "librdkafka"
    client_version: str | None = None
    # KIP-848: `consumer` is the new group protocol, for subscribing consumers (Kafka 4.0 and later).
    group_protocol: str = "classic"
    # Dedicated KRaft controller nodes beside the brokers (0: each broker is also a controller).
    controllers: int = 0
    # A user's Kafka settings by scope (broker, topic, producer, consumer) -> key -> value as given,
    # on top of the profile (workloads/profile_settings.py; checked by harness/kafka_settings).
    settings: dict[str, dict[str, str]] = field(default_factory=dict)
    schedule: list[dict[str, Any]] | None = None  # a recorded schedule to replay (run --replay)
    replay_of: str | None = None  # the config.json replayed
    command_line: list[str] = field(default_factory=lambda: list(sys.argv))

    def check(self) -> None:
        """Refuse bad input before anything is created."""
        from workloads.profiles import get_profile

        if self.workload not in WORKLOADS:
            raise HarnessError(f"unknown workload {self.workload!r}.", hint=f"use one of: {', '.join(WORKLOADS)}")
        get_profile(self.profile)
        if not self.rate > 0:
            raise HarnessError(f"rate={self.rate}: the rate must be greater than 0 operations per second.", hint="e.g. --rate 1000")
        if not self.time_limit_s > 0:
            raise HarnessError(f"time limit {self.time_limit_s}: it must be greater than 0 seconds.", hint="e.g. --time-limit 60")
        for name in ("partitions", "producers", "brokers"):
            if getattr(self, name) < 1:
                raise HarnessError(f"{name}={getattr(self, name)}: it must be at least 1.")
        if self.consumers < 0:
            raise HarnessError(f"consumers={self.consumers}: it cannot be negative.")
        if self.crash_clients_s is not None:
            if not self.crash_clients_s > 0:
                raise HarnessError(f"crash clients every {self.crash_clients_s} s: it must be greater than 0 seconds.",
                                   hint="e.g. --crash-clients 10, or leave it out")
            if self.workload != "queue":
                raise HarnessError(f"--crash-clients applies to the queue workload, not {self.workload!r}.",
                                   hint="use --workload queue, or leave --crash-clients out")
        if not 0 <= self.abort_probability <= 1:
            raise HarnessError(f"abort probability {self.abort_probability}: it must lie between 0 and 1.")
        from workloads import drivers

        if self.client not in drivers.names():
            raise HarnessError(f"unknown client {self.client!r}.", hint=f"use --client {' or --client '.join(drivers.names())}")
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise HarnessError(f"unknown group protocol {self.group_protocol!r}.",
                               hint="use --group-protocol classic, or consumer (KIP-848, Kafka 4.0 and later)")
        if self.group_protocol == "consumer" and not self.subscribe:
            raise HarnessError("--group-protocol consumer applies to consumers that join a group, and this run's assign.",
                               hint="add --subscribe, or leave --group-protocol out")
        if self.scheduler not in SCHEDULERS:
            raise HarnessError(f"unknown schedule {self.scheduler!r}.", hint=f"use --schedule {' or --schedule '.join(SCHEDULERS)}")
        packages = {p.strip() for p in str(self.nemesis).split(",")}
        if self.upgrade_to and "upgrade" not in packages:
            raise HarnessError(f"--upgrade-to {self.upgrade_to} is given, but the upgrade package is not in --nemesis {self.nemesis}.",
                               hint="add upgrade to --nemesis (e.g. --nemesis upgrade or upgrade,kill), or leave --upgrade-to out")
        if "upgrade" in packages and not self.upgrade_to:
            raise HarnessError("--nemesis upgrade needs the version to upgrade to.",
                               hint="add --upgrade-to VERSION, newer than --kafka-version (e.g. --kafka-version 4.1.1 --upgrade-to 4.4.0)")
        if not 0 <= self.controllers <= 5:
            raise HarnessError(f"controllers={self.controllers}: use 0 (every broker is also a controller) or 1 to 5.",
                               hint="e.g. --controllers 3, the layout of a production KRaft cluster")
