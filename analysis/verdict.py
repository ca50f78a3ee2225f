"""The verdict: counts + permissions + drain status → valid / invalid / unknown, and the headline
numbers. Pure data in, pure data out; rendering lives in cli.py."""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.registry import ANOMALIES

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
) -> Verdict:
    """invalid if any anomaly not permitted was found (unseen only counts when the final drain is
    known to have completed: before that an unseen record may merely be unread); otherwise
    unknown if the history is truncated or empty, or unseen records remain with the drain
    incomplete/unknown; otherwise valid."""
    forbidden = []
    for name in ANOMALIES:
        if counts.get(name, 0) == 0 or name in allowed:
            continue
        if name == "unseen" and not drain_complete:
            continue
        forbidden.append(name)
    if forbidden:
        return Verdict("invalid", forbidden, [f"{counts[n]} {n} (not permitted by this configuration)" for n in forbidden])
    reasons = []
    if truncated:
        reasons.append("the history is truncated (its last line was cut off)")
    if ops == 0:
        reasons.append("the history holds no operations")
    if counts.get("unseen", 0) and "unseen" not in allowed and not drain_complete:
        state = "did not complete" if drain_complete is False else "status is unknown (config.json has no drain)"
        reasons.append(f"{counts['unseen']} acknowledged write(s) unseen and the final drain {state}")
    return Verdict("unknown" if reasons else "valid", [], reasons)


def headline(counts: dict[str, int], drain_complete: bool | None) -> dict[str, int]:
    """The four numbers a human reads first. Unseen records only count as lost when the final
    drain is known to have reached every high watermark (otherwise they may simply be unread)."""
    lost = counts["lost-write"] + (counts["unseen"] if drain_complete else 0)
    return {
        "lost": lost,
        "duplicated": counts["duplicate"],
        "reordered": counts["nonmonotonic-send"] + counts["nonmonotonic-poll"],
        "diverged": counts["inconsistent-offsets"],
    }
