"""History files and run files on disk: read a history, validate it, write its Parquet twin,
and write any file atomically (a reader never sees half of one)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness.history.format import FORMAT_VERSION, validate_events

dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def write_text(path: Path | str, text: str) -> Path:
    """Write `text` to a temporary file beside `path`, then rename it over `path`."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def write_json(path: Path | str, data: Any, sort_keys: bool = True, indent: int = 2) -> Path:
    """`data` as indented JSON, atomically (config.json, results.json, cluster.json, ...)."""
    return write_text(path, json.dumps(data, indent=indent, sort_keys=sort_keys, default=str) + "\n")


def read_history(path: Path | str) -> list[dict[str, Any]]:
    """Events of a history file. An incomplete last line (a SIGKILL mid-write) is dropped; any other
    bad line raises. A checked run keeps only its Parquet twin (compact_history): asked for its
    history.jsonl, the events are read from history.parquet, as the JSON Lines held them; so they
    are when the Parquet file itself is named (it is no JSON: read as lines, it failed to decode)."""
    path = Path(path)
    if path.suffix == ".parquet":
        return read_parquet_events(path)
    if not path.exists() and path.suffix == ".jsonl" and path.with_suffix(".parquet").exists():
        return read_parquet_events(path.with_suffix(".parquet"))
    return list(_events(path))


def validate_history(path: Path | str) -> list[str]:
    """Problems of the history file at `path` against format v1; [] means valid."""
    try:
        events = read_history(path)
    except (OSError, ValueError) as exc:
        return [str(exc)]
    return validate_events(events)


PARQUET_BATCH = 100_000  # events per row group at most: a batch's Python objects, not the history's, are in memory
# ... and JSON bytes per row group at most: the drain's polls hold up to 5,000 records a line, so
# 100,000 of its events parsed at once are gigabytes of dicts (the streamed writer, count-bounded
# only, still peaked at 2.47 GB on the 45-minute soak's history).
PARQUET_BATCH_BYTES = 16 << 20
# Row groups of at most this many events: Spark splits a file only between row groups, so one
# group made every scan of a default run's history (~100k events) one task on one core. With
# groups of 25,000 and a small history's files split per core (analysis/checking/spark.py
# fit_partitions), two tasks share each scan; the file grows about 3 %.
ROW_GROUP_EVENTS = 25_000


def write_parquet(jsonl: Path, target: Path) -> Path:
    """history.parquet: the same events, columnar. `process` is a string ("3" or "nemesis");
    `value` is the JSON text of the value, so every `f` fits one schema.

    Streamed, one row group of PARQUET_BATCH events at a time. It used to read the whole history
    into Python dicts first: today's 45-minute soak (2.6M sends, ~5.3M events) took the harness from
    300 MiB to 10.1 GB at the end of its run, and a 2-hour run would not fit the 24 GB machine.
    Lines are read as read_history reads them: an incomplete last line is dropped, any other bad
    line raises."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("index", pa.int64()), ("time", pa.int64()), ("process", pa.string()), ("type", pa.string()),
                        ("f", pa.string()), ("value", pa.string()), ("error", pa.string())],
                       metadata={"history_format": str(FORMAT_VERSION)})

    def table(events: list[dict[str, Any]]) -> Any:
        return pa.table({"index": [e["index"] for e in events], "time": [e["time"] for e in events],
                         "process": [str(e["process"]) for e in events], "type": [e["type"] for e in events],
                         "f": [e["f"] for e in events], "value": [dumps(e.get("value")) for e in events],
                         "error": [e.get("error") for e in events]}, schema=schema)

    tmp = target.with_suffix(".parquet.tmp")
    # zstd level 9, not the default snappy: a 30 s run's 224,696 events took 3.3 MB instead of 7.6 MB,
    # written in 0.5 s instead of 0.25 s and read as fast (2026-11-25, load ~7).
    with pq.ParquetWriter(tmp, schema, compression="zstd", compression_level=9) as writer:
        batch: list[dict[str, Any]] = []
        size = 0
        for event, length in _events_sized(Path(jsonl)):
            batch.append(event)
            size += length
            if len(batch) >= PARQUET_BATCH or size >= PARQUET_BATCH_BYTES:
                writer.write_table(table(batch), row_group_size=ROW_GROUP_EVENTS)
                batch, size = [], 0
        if batch:
            writer.write_table(table(batch), row_group_size=ROW_GROUP_EVENTS)
    os.replace(tmp, target)  # never a half-written parquet under the real name
    return target


def _events(path: Path) -> Any:
    """The events of a JSON Lines history, one at a time: an incomplete last line (a SIGKILL
    mid-write) is dropped, any other bad line raises, naming its line number."""
    return (event for event, _ in _events_sized(path))


def _events_sized(path: Path) -> Any:
    """(event, its line's length in bytes), as _events reads them."""
    with open(path, "rb") as fh:
        number = 0
        for line in fh:
            number += 1
            if not line.endswith(b"\n"):
                return  # the last line, cut off (a SIGKILL mid-write)
            if line.strip():
                try:
                    yield json.loads(line), len(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not JSON: {exc}") from exc


def read_parquet_events(path: Path | str) -> list[dict[str, Any]]:
    """history.parquet's events as read_history gives the JSON Lines' (process an int unless
    "nemesis" or another name, value parsed, error only when set)."""
    import pyarrow.parquet as pq

    events = []
    for row in pq.read_table(path).to_pylist():
        event = {k: row[k] for k in ("index", "time", "type", "f")}
        process = row["process"]
        event["process"] = int(process) if process.lstrip("-").isdigit() else process
        event["value"] = json.loads(row["value"]) if row["value"] is not None else None
        if row["error"] is not None:
            event["error"] = row["error"]
        events.append(event)
    return events


def compact_history(run_dir: Path | str) -> dict[str, Any]:
    """Once a run is checked, keep one durable form of its history: history.parquet, when it holds
    exactly the events of history.jsonl, which then goes (5-12x the Parquet's size: 41 MB beside
    3.3 MB for a 30 s run). A history that was not closed cleanly has no Parquet twin and stays as
    it is: JSON Lines survive a SIGKILL mid-run line by line. Returns what it did and why."""
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    jsonl, parquet = run_dir / "history.jsonl", run_dir / "history.parquet"
    if not jsonl.exists():
        return {"compacted": False, "why": "no history.jsonl"}
    if not parquet.exists():
        return {"compacted": False, "why": "no history.parquet (the run did not end cleanly): history.jsonl kept"}
    with open(jsonl, "rb") as fh:
        lines = sum(1 for line in fh if line.strip() and line.endswith(b"\n"))
    rows = pq.ParquetFile(parquet).metadata.num_rows
    if rows != lines:
        return {"compacted": False, "why": f"history.parquet holds {rows} events and history.jsonl {lines}: both kept"}
    freed = jsonl.stat().st_size
    jsonl.unlink()
    return {"compacted": True, "freed_bytes": freed, "events": rows}
