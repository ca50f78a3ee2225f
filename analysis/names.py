"""Stable names shared by both checkers, the verdict and the reports."""

from __future__ import annotations

# Dict keys of results.json["counts"]; order is the order reports print them in.
ANOMALIES: tuple[str, ...] = (
    "inconsistent-offsets",
    "duplicate",
    "lost-write",
    "unseen",
    "nonmonotonic-send",
    "nonmonotonic-poll",
    "poll-skip",
    "aborted-read",
)

OP_TYPES = ("invoke", "ok", "fail", "info")
READ_FS = ("poll", "txn")
RESET_FS = ("assign", "subscribe")
MAX_EXAMPLES = 20


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
