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
    """Events of a history file. An incomplete last line (a SIGKILL mid-write) is dropped; any other bad line raises."""
    events = []
    with open(path, "rb") as fh:
        data = fh.read()
    complete = data.split(b"\n")[:-1]  # the last piece is b"" after a newline, or a cut-off line
    for number, line in enumerate(complete, 1):
        if line.strip():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON: {exc}") from exc
    return events


def validate_history(path: Path | str) -> list[str]:
    """Problems of the history file at `path` against format v1; [] means valid."""
    try:
        events = read_history(path)
    except (OSError, ValueError) as exc:
        return [str(exc)]
    return validate_events(events)


def write_parquet(jsonl: Path, target: Path) -> Path:
    """history.parquet: the same events, columnar. `process` is a string ("3" or "nemesis");
    `value` is the JSON text of the value, so every `f` fits one schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    events = read_history(jsonl)
    table = pa.table(
        {
            "index": pa.array([e["index"] for e in events], pa.int64()),
            "time": pa.array([e["time"] for e in events], pa.int64()),
            "process": pa.array([str(e["process"]) for e in events], pa.string()),
            "type": pa.array([e["type"] for e in events], pa.string()),
            "f": pa.array([e["f"] for e in events], pa.string()),
            "value": pa.array([dumps(e.get("value")) for e in events], pa.string()),
            "error": pa.array([e.get("error") for e in events], pa.string()),
        }
    )
    table = table.replace_schema_metadata({"history_format": str(FORMAT_VERSION)})
    tmp = target.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, target)  # never a half-written parquet under the real name
    return target
