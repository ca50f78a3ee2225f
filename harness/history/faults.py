"""The fault vocabulary of the history: which nemesis events start a fault and which end it.

Each nemesis declares the kinds it records (`Nemesis.faults`), as Jepsen's nemeses declare
their `fs`; the scenarios record the same kinds; the report's timeline draws a band from a
start event to the stop event that ends it; docs/nemesis.md lists this table (a test holds
it to these declarations). A stop event that names `targets` ends only the bands of those
nodes; one without targets ends every open band of its kind.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FaultKind:
    label: str  # how reports name it
    start: str  # f of the event that starts it
    stop: str  # f of the event that ends it


PARTITION = FaultKind("partition", "start-partition", "stop-partition")
LOSS = FaultKind("packet loss", "start-loss", "stop-loss")
KILL = FaultKind("kill", "kill", "restart")
PAUSE = FaultKind("pause", "pause", "resume")
CLOCK_BUMP = FaultKind("clock bump", "bump-clock", "reset-clock")
CLOCK_STROBE = FaultKind("clock strobe", "strobe-clock", "reset-clock")
CUT = FaultKind("cut", "cut", "heal")  # a scenario's one-link cut; its heal mends every cut
POWER = FaultKind("power loss", "power-off", "power-on")  # SIGKILL + un-fsynced data dropped; restart
# A broker's data directory failing (nemesis/disk.py): the lossy mount refuses with EIO or ENOSPC
# until the heal, which clears it and restarts the JVM if Kafka halted.
DISK_EIO_WRITE = FaultKind("disk EIO on writes", "disk-eio-write", "disk-healed")
DISK_EIO_READ = FaultKind("disk EIO on reads", "disk-eio-read", "disk-healed")
DISK_FULL = FaultKind("disk full (ENOSPC)", "disk-full", "disk-healed")
# A preferred leader election to an in-sync follower (nemesis/transfer.py): from the request to the
# moment the new leader was seen (or the wait gave up; `leader` says which).
TRANSFER = FaultKind("leader transfer", "transfer-leader", "transferred")
# Operations (issue 36): an operator's change, from its first step to its last. Its steps that take
# a node down are NODE_DOWN bands of their own (value "op" names the operation, "how" clean or hard).
# A zombie producer (nemesis/fence.py): from a second producer's init_transactions on a live
# transactional.id to the moment it let go.
ROLL = FaultKind("rolling restart", "roll", "rolled")
NODE_DOWN = FaultKind("node stopped by an operation", "node-stop", "node-start")
FENCE = FaultKind("zombie producer", "fence", "fenced")
REASSIGN = FaultKind("partition reassignment", "reassign", "reassigned")
DISK_SWAP = FaultKind("data disk replaced", "disk-swap", "disk-swapped")  # nemesis/membership.py
# A broker added under a new node id and partitions moved onto it, and a broker decommissioned (its
# partitions moved away or not, stopped, unregistered in KRaft): nemesis/membership.py.
BROKER_ADD = FaultKind("broker added", "add-broker", "broker-added")
DECOMMISSION = FaultKind("broker decommissioned", "decommission", "decommissioned")
# A rolling upgrade (nemesis/upgrade.py): every node restarted on a new version's jars, then Kafka's
# feature levels finalized (FeatureCommand upgrade), a band of its own inside the upgrade's.
UPGRADE = FaultKind("rolling upgrade", "upgrade", "upgraded")
FEATURES = FaultKind("feature upgrade", "finalize-features", "features-finalized")
# A controller quorum change (nemesis/quorum.py, KIP-853): a voter removed from the dynamic quorum
# (kafka-metadata-quorum remove-controller) until it is added back (add-controller) or the heal re-adds it.
QUORUM = FaultKind("controller voter removed", "remove-voter", "voter-added")

KINDS = (PARTITION, LOSS, KILL, PAUSE, CLOCK_BUMP, CLOCK_STROBE, CUT, POWER, DISK_EIO_WRITE, DISK_EIO_READ, DISK_FULL, TRANSFER,
         ROLL, NODE_DOWN, FENCE, REASSIGN, DISK_SWAP, BROKER_ADD, DECOMMISSION, UPGRADE, FEATURES, QUORUM)
# The kinds that are operations: results.json and the report measure clients' unavailability during each.
OPERATIONS = (ROLL, FENCE, REASSIGN, DISK_SWAP, BROKER_ADD, DECOMMISSION, UPGRADE, QUORUM)
BY_START = {k.start: k for k in KINDS}
STOPS = {k.stop for k in KINDS}
HEAL = "heal"  # the fault runner's final event: every fault healed (value: what each package did)
ERROR = "nemesis-error"  # a fault that raised; the run goes on
# A fault whose target resolved to no broker (e.g. `leader` while the metadata names no leader of
# the topic: a 0.10.2.2 run of issue 21 cut and killed "nobody" from 90 s on). Recorded instead of
# a start with empty targets, with the reason in "skipped": a point in time, never a band.
SKIPPED = "nemesis-skipped"


def ended_by(stop: str) -> tuple[FaultKind, ...]:
    """The kinds whose bands a stop event of this f closes."""
    return tuple(k for k in KINDS if k.stop == stop)
