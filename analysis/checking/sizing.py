"""What a history's size asks of Spark: a small history is checked with as many shuffle partitions
as the machine has cores and without adaptive execution, a large one with the session's own
settings (4 partitions a core, adaptive).

Why: adaptive execution runs each shuffle's stages one after the other to re-plan between them,
and the session's 8 partitions (2 cores) make 4 tasks a core of every shuffle; on a small history
both are fixed costs with nothing to win. Warm checks in one JVM, each setting in turn
(2026-12-02, embedded, 2-core machine, idle):

| history | session's settings | 2 partitions | no adaptive | both |
|---|---:|---:|---:|---:|
| a 30 s run's 87,243 events (median of 4) | 9.15 s | 8.58 s | 8.41 s | **7.50 s** |
| bench_checker's 1M events (median of 3) | 11.46 s | 10.01 s | 12.27 s | **9.52 s** |
| bench_checker's 10M events (median of 2) | **42.6 s** | 52.1 s | 43.4 s | 51.4 s |

so the line is drawn at SMALL_EVENTS, between the sizes where it won and the size where it lost.
The size is read from the file before loading (a Parquet footer's row count; JSON Lines by its
bytes), so the load runs with it too. KAFKA_CHAOS_SMALL_PLAN=0 keeps the session's settings."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

SMALL_EVENTS = 2_000_000
# A 30 s run's 87,243 events written as the recorder writes JSON Lines: 16.2 MB, 186 B an event.
# Rounded down, so the count is guessed high: a history near the line keeps the session's settings.
JSONL_BYTES_PER_EVENT = 150
ENV = "KAFKA_CHAOS_SMALL_PLAN"


def estimated_events(path: Path, fmt: str) -> int | None:
    """The history's event count from its file alone, or None when it cannot be read here (a
    remote checker's path, an unreadable footer: the session's settings then stand)."""
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return pq.read_metadata(str(path)).num_rows
        return path.stat().st_size // JSONL_BYTES_PER_EVENT
    except Exception:  # noqa: BLE001 - any failure only means "not known": the load reports real problems
        return None


def small_plan(events: int | None) -> dict[str, str] | None:
    """The settings for a history of `events`, or None to keep the session's."""
    if events is None or events > SMALL_EVENTS or os.environ.get(ENV, "").strip() == "0":
        return None
    return {"spark.sql.shuffle.partitions": str(max(2, os.cpu_count() or 2)), "spark.sql.adaptive.enabled": "false"}


@contextmanager
def sized(spark: Any, events: int | None) -> Iterator[dict[str, str] | None]:
    """Within the block, the session runs with small_plan(events); its own values come back after
    (a reused session, the local checker's or a caller's, checks a large history next)."""
    plan = small_plan(events)
    if plan is None:
        yield None
        return
    before = {k: spark.conf.get(k, None) for k in plan}
    for k, v in plan.items():
        spark.conf.set(k, v)
    try:
        yield plan
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
