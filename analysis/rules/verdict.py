"""The verdict: counts + permissions + drain status → valid / invalid / unknown, and the headline
numbers. Pure data in, pure data out; rendering lives in cli.py."""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.rules.registry import ANOMALIES

EXIT_CODES = {"valid": 0, "invalid": 1, "unknown": 3}


@dataclass
class Verdict:
    verdict: str  # "valid" | "invalid" | "unknown"
    forbidden: list[str] = field(default_factory=list)  # anomalies found and not permitted
    reasons: list[str] = field(default_factory=list)  # why, in words


def decide(
    counts: dict[str, int],
    allowed: set[str],
    drain_complete: bool | None,
    truncated: bool = False,
    ops: int = 1,
    ok_ops: int | None = None,
    worker_errors: list[str] | tuple[str, ...] = (),
    undrained: dict[str, str] | None = None,
    unseen_drained: int = 0,
    writes: tuple[int, int] = (0, 0),
) -> Verdict:
    """invalid if any anomaly not permitted was found (unseen only counts when the final drain is
    known to have completed: before that an unseen record may merely be unread); otherwise
    unknown if the evidence cannot support "valid": the history is truncated or empty, no write
    and no read completed ok (`ok_ops` == 0: nothing was checked), client workers died
    (`worker_errors`, which config.json lists unless the user allowed them), or unseen records
    remain with the drain incomplete/unknown (`undrained`: the partitions it did not read to their
    end, and why, e.g. an offline partition on an old broker: issue 21); otherwise valid.
    `unseen_drained` counts the unseen records on partitions such a drain did read to their end:
    those are forbidden as if the drain had completed. `writes` is (sends and txns that completed,
    of which ok): when writes completed and none of them ok, nothing was acknowledged, so nothing
    could be lost, and the verdict is unknown however many reads completed.

    Why an empty or clientless run is not valid (issue 19): a run whose producers all died at
    once (librdkafka's fatal _UNSUPPORTED_FEATURE against a 0.10 broker) acknowledged nothing,
    so it could lose nothing, and it printed "valid". An absence of evidence is `unknown`."""
    forbidden = []
    for name in ANOMALIES:
        if counts.get(name, 0) == 0 or name in allowed:
            continue
        if name == "unseen" and not drain_complete and not unseen_drained:
            continue
        if name == "eos-lost" and not drain_complete:  # its output may merely be unread
            continue
        forbidden.append(name)
    if forbidden:
        return Verdict("invalid", forbidden, [
            f"{unseen_drained} of {counts[n]} unseen on partitions the final drain read to their end (not permitted by "
            f"this configuration)" if n == "unseen" and not drain_complete else
            f"{counts[n]} {n} (not permitted by this configuration)" for n in forbidden])
    reasons = []
    if truncated:
        reasons.append("the history is truncated (its last line was cut off)")
    if ops == 0:
        reasons.append("the history holds no operations")
    elif ok_ops == 0:
        reasons.append("nothing to check: no write and no read completed ok (no ok send, txn or poll)")
    elif writes[0] and not writes[1]:
        reasons.append(f"nothing acknowledged: none of the {writes[0]} writes (sends and transactions) that completed "
                       "completed ok, so none could be lost; the reads alone prove nothing")
    if worker_errors:
        reasons.append(f"{len(worker_errors)} client worker(s) died during the run, so the history lacks what they "
                       f"would have done (first: {str(worker_errors[0])[:200]})")
    if counts.get("unseen", 0) and "unseen" not in allowed and not drain_complete:
        state = "did not complete" if drain_complete is False else "status is unknown (config.json has no drain)"
        why = "; ".join(f"partition {p}: {r}" for p, r in sorted((undrained or {}).items(), key=lambda kv: _key(kv[0])))
        reasons.append(f"{counts['unseen']} acknowledged write(s) unseen and the final drain {state}"
                       + (f" (not drained: {why})" if undrained else ""))
    if counts.get("eos-lost", 0) and "eos-lost" not in allowed and not drain_complete:
        reasons.append(f"{counts['eos-lost']} input value(s) the pipeline committed past have no output read, and the "
                       "final drain did not read the output to its end")
    return Verdict("unknown" if reasons else "valid", [], reasons)


def _key(partition: str) -> tuple[int, str]:
    return (int(partition), "") if partition.isdigit() else (1 << 62, partition)


# The headline's numbers, in reading order. Each anomaly kind counts in exactly one of them, so
# "invalid" never shows next to all zeros: a run whose only finding is, say, a poll-skip shows
# it under "other" (it used to show "invalid 0/0/0/0", issue 19).
HEADLINE = ("lost", "duplicated", "reordered", "diverged", "other")
_GROUPS = {"lost-write": "lost", "unseen": "lost", "eos-lost": "lost", "duplicate": "duplicated",
           "eos-duplicate": "duplicated", "nonmonotonic-send": "reordered",
           "nonmonotonic-poll": "reordered", "inconsistent-offsets": "diverged"}


def headline(counts: dict[str, int], drain_complete: bool | None, forbidden: list[str] | tuple[str, ...] = (),
             replica_diverged: int = 0, unseen_drained: int = 0) -> dict[str, int]:
    """The numbers a human reads first. Unseen records only count as lost when the final drain is
    known to have reached every high watermark (otherwise they may simply be unread). `diverged`
    adds the offsets where replicas disagreed after healing; `other` counts every forbidden kind
    of anomaly that none of the first four names."""
    lost = counts.get("lost-write", 0) + (counts.get("unseen", 0) if drain_complete else unseen_drained)
    # The pipeline's input values (eos) count besides the records: a lost input value whose output
    # record was committed and then lost counts once as each.
    lost += counts.get("eos-lost", 0) if drain_complete else 0
    return {
        "lost": lost,
        "duplicated": counts.get("duplicate", 0) + counts.get("eos-duplicate", 0),
        "reordered": counts.get("nonmonotonic-send", 0) + counts.get("nonmonotonic-poll", 0),
        "diverged": counts.get("inconsistent-offsets", 0) + replica_diverged,
        "other": sum(counts.get(n, 0) for n in forbidden if n not in _GROUPS),
    }


def headline_text(head: dict[str, int]) -> str:
    """"lost 0  duplicated 0  reordered 0  diverged 0  other 0" (older results have no "other")."""
    return "  ".join(f"{k} {head.get(k, 0)}" for k in HEADLINE if k in head or k != "other")
