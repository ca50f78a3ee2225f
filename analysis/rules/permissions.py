"""Which anomalies a client/broker configuration permits: Kafka only promises what it is
configured to promise, so finding a permitted anomaly is not a bug.

The table (also in docs/checker.md). A row applies when its condition holds for the run's
profile; the allowed set is the union of the applying rows. A missing config.json, or a missing
field, takes the `safe` value (the strictest reading: nothing is excused by omission).

| condition                                   | permits                                                        | why |
|---------------------------------------------|----------------------------------------------------------------|-----|
| acks = 0                                    | lost-write, unseen, inconsistent-offsets, poll-skip, nonmonotonic-poll | nothing waits for the write; offsets unknown |
| acks = 1                                    | lost-write, unseen, inconsistent-offsets, poll-skip, nonmonotonic-poll | only the leader had it; a new leader truncates and reuses offsets |
| unclean.leader.election.enable = true       | same as acks = 1                                               | an out-of-sync replica may become leader |
| min.insync.replicas < 2 or replication.factor < 3 | lost-write, unseen, poll-skip                            | an acks=all write may live on one broker only |
| enable.idempotence = false and retries > 0  | duplicate                                                      | a retried batch may be written twice |
| … and max.in.flight > 1                     | nonmonotonic-send                                              | a retried batch may land after a later one |
| isolation.level = read_uncommitted (txn workload) | aborted-read                                             | uncommitted and aborted records are visible |
| enable.idempotence = true, not transactional, delivery.timeout.ms < 120 s | duplicate                         | librdkafka re-sends in-flight batches under a bumped epoch after a timeout; the broker may already have written them |
| found, whatever the profile (Kafka's transaction model) | int-send-skip, G0; G1c whose every cycle needs a ww edge | transactions do not isolate their writes: others' records interleave with a transaction's, and a send reaches the log before its commit, so ww order is no commit order |
| subscribe = true, every pair of the kind across a group rebalance | nonmonotonic-poll, poll-skip | a rebalance restarts a consumer at the group's committed offset (rebalance_permitted) |

The run's record comes as harness/history/record.py reads it (a `RunRecord`; a dict of config.json's
content is upgraded the same way). Profiles are read in any of the spellings the harness wrote:
dotted keys at the top level, the underscored field names of record version 1
(`min_insync_replicas`, ...), and its nested `producer`, `consumer` and `topic` configs
(`"unclean.leader.election.enable": "true"`). Booleans given as text are parsed, never taken for
their truthiness.
"""

from __future__ import annotations

from typing import Any, Mapping

from analysis.rules.registry import ANOMALIES
from harness.history.record import RecordLike, as_record

SAFE: dict[str, Any] = {
    "name": "safe",
    "acks": "all",
    "enable.idempotence": True,
    "retries": 0,
    "max.in.flight": 5,
    "isolation.level": "read_committed",
    "unclean.leader.election.enable": False,
    "min.insync.replicas": 2,
    "replication.factor": 3,
    "delivery.timeout.ms": 300_000,
    "transactional": False,
}

# Other spellings of the same settings, as harness.run.steps's Profile and client configs write them.
ALIASES = {
    "enable_idempotence": "enable.idempotence",
    "max_in_flight": "max.in.flight",
    "max.in.flight.requests.per.connection": "max.in.flight",
    "isolation_level": "isolation.level",
    "unclean_leader_election": "unclean.leader.election.enable",
    "min_insync_replicas": "min.insync.replicas",
    "replication_factor": "replication.factor",
    "delivery_timeout_ms": "delivery.timeout.ms",
    "message.timeout.ms": "delivery.timeout.ms",
}
BOOLEANS = ("enable.idempotence", "unclean.leader.election.enable", "transactional")

# eos-lost and eos-duplicate follow the input's records: a pipeline cannot process an input record
# the log lost, and processes a duplicated one twice.
_LOSS = {"lost-write", "unseen", "poll-skip", "eos-lost"}
_DIVERGENCE = _LOSS | {"inconsistent-offsets", "nonmonotonic-poll"}

# (description, predicate over the effective profile and workload, permitted anomalies)
RULES: list[tuple[str, Any, set[str]]] = [
    ("acks=0", lambda p, w: str(p["acks"]) == "0", _DIVERGENCE),
    ("acks=1", lambda p, w: str(p["acks"]) == "1", _DIVERGENCE),
    ("unclean.leader.election.enable=true", lambda p, w: bool(p["unclean.leader.election.enable"]), _DIVERGENCE),
    ("min.insync.replicas<2", lambda p, w: int(p["min.insync.replicas"]) < 2, _LOSS),
    ("replication.factor<3", lambda p, w: int(p["replication.factor"]) < 3, _LOSS),
    ("no idempotence with retries", lambda p, w: not p["enable.idempotence"] and int(p["retries"]) > 0,
     {"duplicate", "eos-duplicate"}),
    ("no idempotence with retries and max.in.flight>1",
     lambda p, w: not p["enable.idempotence"] and int(p["retries"]) > 0 and int(p["max.in.flight"]) > 1,
     {"nonmonotonic-send"}),
    ("read_uncommitted consumer in the txn workload",
     lambda p, w: w == "txn" and p["isolation.level"] == "read_uncommitted", {"aborted-read"}),
    ("idempotent producer with delivery.timeout.ms < 120 s (librdkafka re-sends timed-out batches under a new epoch)",
     lambda p, w: p["enable.idempotence"] and not p["transactional"] and w != "txn" and int(p["delivery.timeout.ms"]) < 120_000,
     {"duplicate", "eos-duplicate"}),
]

# Kafka's transaction model, whatever the profile (as Jepsen's allowed-error-types): a
# transaction's records are appended as it sends them, interleaved with every other producer's.
MODEL_RULE = "Kafka's transactions do not isolate writes ({})"
MODEL_PERMITS = ("int-send-skip", "G0")


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


SECTIONS = ("producer", "consumer", "topic")


def normalise(given: Mapping[str, Any]) -> dict[str, Any]:
    """One flat dict of dotted keys from any spelling of a profile (nested configs win over aliases)."""
    flat: dict[str, Any] = {}
    nested = {key: value for key, value in given.items() if key in SECTIONS and isinstance(value, dict)}
    for key, value in given.items():
        if key not in nested:
            flat[ALIASES.get(key, key)] = value
    for section in SECTIONS:
        for key, value in (nested[section].items() if section in nested else ()):
            flat[ALIASES.get(key, key)] = value
    if "transactional.id" in flat:
        flat["transactional"] = True
    for key in BOOLEANS:
        if key in flat and flat[key] is not None:
            flat[key] = _as_bool(flat[key])
    return flat


def effective_profile(record: RecordLike) -> dict[str, Any]:
    """The run's profile with every missing field filled from SAFE."""
    profile = dict(SAFE)
    recorded = as_record(record).profile
    given = normalise(recorded.keys if recorded is not None else {})
    profile.update({k: v for k, v in given.items() if v is not None})
    if "name" not in given:
        profile["name"] = "safe" if not given else "custom"
    return profile


def allowed(record: RecordLike) -> tuple[set[str], list[str]]:
    """The anomalies the run's configuration permits, and the rules that permitted them."""
    record = as_record(record)
    profile = effective_profile(record)
    workload = record.workload or "queue"
    permitted: set[str] = set()
    reasons: list[str] = []
    sources = profile.get("sources") if isinstance(profile.get("sources"), dict) else {}
    for description, applies, anomalies in RULES:
        if applies(profile, workload):
            permitted |= anomalies
            reasons.append(description + _set_by(description, sources))
    return {a for a in ANOMALIES if a in permitted}, reasons


# The settings each rule reads, so that a run given its own settings (workloads/profile_settings.py
# records who set each key) says which of them permitted what: `acks=1 (--producer-config)`.
RULE_KEYS = {
    "acks=0": ("acks",), "acks=1": ("acks",),
    "unclean.leader.election.enable=true": ("unclean.leader.election.enable",),
    "min.insync.replicas<2": ("min.insync.replicas",), "replication.factor<3": ("replication.factor",),
    "no idempotence with retries": ("enable.idempotence", "retries"),
    "no idempotence with retries and max.in.flight>1": ("enable.idempotence", "retries", "max.in.flight"),
    "read_uncommitted consumer in the txn workload": ("isolation.level",),
}


def _set_by(description: str, sources: Mapping[str, Any]) -> str:
    """' (acks: --producer-config)' for the rule's settings a user gave; '' for a profile's own run."""
    keys = RULE_KEYS.get(description) or (("delivery.timeout.ms", "enable.idempotence") if "delivery.timeout.ms" in description else ())
    said = [f"{key}: {sources[key]}" for key in keys if isinstance(sources.get(key), str) and not sources[key].startswith("profile ")]
    return f" ({'; '.join(said)})" if said else ""


def model_permitted(counts: dict[str, int], g1c_wr_only: int = 0) -> tuple[set[str], list[str]]:
    """What Kafka's transaction model permits of what was found: int-send-skip and G0 always, and
    G1c when no component of it closes a cycle of wr edges alone (g1c_wr_only = 0). A wr edge
    orders commits (a read_committed reader saw the writer's commit), a ww edge only sends, so a
    cycle that needs a ww edge is no contradiction. Only kinds found are named, so a run without
    them shows nothing permitted by this rule."""
    found = {a for a in MODEL_PERMITS if counts.get(a, 0)}
    if counts.get("G1c", 0) and not g1c_wr_only:
        found.add("G1c")
    if not found:
        return set(), []
    names = ", ".join(a for a in ANOMALIES if a in found)
    rule = MODEL_RULE.format(names) + ("; every G1c cycle needs a ww edge" if "G1c" in found else "")
    return found, [rule]


# A group rebalance restarts each consumer it assigns a partition at the group's committed offset
# (librdkafka's assign after a rebalance; docs/history.md, "Group rebalances"). That offset may be
# below what the consumer read (it read on past its last commit: at-least-once, the records are read
# again) or above it (another member read and committed them meanwhile; the history records no
# revocation). Jepsen permits every poll-skip and nonmonotonic-poll of a run that subscribes
# (allowed-error-types); here only pairs with a rebalance between their reads are, so a consumer that
# jumps or goes back with no rebalance is still found in a subscribing run.
REBALANCE_KINDS = ("nonmonotonic-poll", "poll-skip")
REBALANCE_RULE = ("subscribe=true: a group rebalance restarts a consumer at the group's committed offset, so reads "
                  "across one may go back (re-reading what was not committed) or jump (what another member read) ({})")


def rebalance_permitted(counts: dict[str, int], across: dict[str, int], subscribe: bool) -> tuple[set[str], list[str]]:
    """What a subscribing run's group rebalances permit of what was found: nonmonotonic-poll or
    poll-skip when every one of its pairs has a rebalance between its reads (across[kind] ==
    counts[kind]); a kind with one pair that has none stays forbidden, all of it, as G1c does with
    one cycle of wr edges alone. Only kinds found are named; nothing without `subscribe`."""
    found = {k for k in REBALANCE_KINDS if subscribe and counts.get(k, 0) and across.get(k, 0) == counts[k]}
    if not found:
        return set(), []
    return found, [REBALANCE_RULE.format(", ".join(f"{counts[k]} {k}" for k in REBALANCE_KINDS if k in found))]
