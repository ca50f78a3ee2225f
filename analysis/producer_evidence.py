"""Evidence from the brokers' logs that explains duplicates under an idempotent producer.

With `enable.idempotence` the broker drops a retried batch it already holds, so duplicates are
forbidden. librdkafka breaks that in one known case (librdkafka issue #4953, open in 2.x): an
OUT_OF_ORDER_SEQUENCE response on any partition makes it bump the producer epoch for all
partitions. It then sends again, under the new epoch, messages that may already be in the log, and
the broker cannot see that they are duplicates. The broker logs each such response as an
`OutOfOrderSequenceException`, so when a run shows forbidden duplicates the checker quotes these
lines. The duplicates stay forbidden, because they really are in the log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MARKER = "OutOfOrderSequenceException"
ISSUE = "https://github.com/confluentinc/librdkafka/issues/4953"
MAX_BYTES = 64 << 20  # per log file: bounded work even for a huge log


def out_of_order_sequences(run_dir: Path | str, limit: int = 5) -> dict[str, Any] | None:
    """Count and quote (up to `limit`) the brokers' OutOfOrderSequenceException lines, or None when
    the run has no broker logs."""
    logs = sorted(Path(run_dir).glob("brokers/*/server.log"))
    if not logs:
        return None
    count, examples = 0, []
    for log in logs:
        with open(log, "rb") as fh:
            data = fh.read(MAX_BYTES)
        for raw in data.splitlines():
            if MARKER.encode() not in raw:
                continue
            count += 1
            if len(examples) < limit:
                line = raw.decode("utf-8", "replace").strip()
                examples.append({"broker": log.parent.name, "line": line[line.find(MARKER):][:300]})
    return {"count": count, "examples": examples, "explanation": ISSUE}


def duplicate_hint(evidence: dict[str, Any] | None) -> str | None:
    """The sentence the verdict adds to its reasons when duplicates are forbidden."""
    if not evidence or not evidence["count"]:
        return None
    first = evidence["examples"][0]
    return (f"brokers logged {evidence['count']} OutOfOrderSequenceException(s) (broker {first['broker']}: "
            f"{first['line'][:160]}); after one, librdkafka bumps the producer epoch and may resend messages "
            f"already in the log, which idempotence then cannot deduplicate ({ISSUE})")


def known_client_duplicates(results: dict[str, Any]) -> str | None:
    """Why a run's verdict is `invalid` for a known client bug and nothing else: its only forbidden
    anomaly is `duplicate` and the brokers logged OutOfOrderSequenceExceptions (librdkafka #4953).
    None for every other run. The verdict stays `invalid`; this only lets a caller tell a known
    librdkafka bug from a finding about Kafka (the nightly suite marks such a run xfail)."""
    evidence = results.get("out_of_order_sequences") or {}
    if set(results.get("forbidden") or []) != {"duplicate"} or not evidence.get("count"):
        return None
    return (f"known client bug: {results.get('counts', {}).get('duplicate', '?')} duplicate(s) after "
            f"{evidence['count']} OutOfOrderSequenceException(s); librdkafka re-sends under a bumped epoch ({ISSUE})")
