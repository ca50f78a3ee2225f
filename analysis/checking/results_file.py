"""results.json's life: what history it was computed from, retiring it before a new check, writing
it atomically, and telling a reader whether it still describes the run's history.

Why: a verdict must never outlive the evidence it was drawn from. Before this, a check that failed
on a corrupted history left the previous results.json in place, and `report` then drew VALID next
to "the history could not be read" (issue 19). Now:

- a check first renames any earlier results.json and report.html to results.stale.json and
  report.stale.html (kept, not deleted: nothing is lost, and their names say what they are),
  and removes those stale copies only once its own results.json is written;
- results.json records the size and modification time of every history file it was drawn from;
  `stale_reason` compares them with the files now, so that a history changed after its check (or
  a results.json older than its history, for results written before the fingerprint existed) is
  refused by `report` and `dashboard` with the reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

HISTORY_FILES = ("history.jsonl", "history.parquet")
RESULTS = "results.json"
RUN_FILES = (*HISTORY_FILES, RESULTS, "config.json")  # any one of them makes a folder a run (report, dashboard)
STALE = {"results.json": "results.stale.json", "report.html": "report.stale.html"}


def history_fingerprint(run_dir: Path) -> dict[str, dict[str, int]]:
    """{file name: {"bytes", "mtime_ns"}} of every history file in `run_dir`."""
    out = {}
    for name in HISTORY_FILES:
        path = Path(run_dir) / name
        if path.is_file():
            st = path.stat()
            out[name] = {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    return out


def probe_writable(output: Path) -> None:
    """Raise OSError now if `output` cannot take a new file, rather than after the check's Spark
    time (a check used to spend it all, then fail writing results.json.tmp and print nothing)."""
    probe = Path(output) / f".results-write-probe-{os.getpid()}"
    probe.write_text("")
    probe.unlink()


def retire(run_dir: Path, output: Path | None = None) -> list[Path]:
    """Rename the earlier results.json and report.html (in `output`, default the run directory) to
    their stale names, before a check starts; return the stale copies."""
    where = Path(output or run_dir)
    moved = []
    for name, stale in STALE.items():
        path = where / name
        if path.is_file():
            os.replace(path, where / stale)
            moved.append(where / stale)
    return moved


def write_results(results: dict[str, Any], output: Path) -> Path:
    """Write `output`/results.json atomically (never a half-written file under the real name), then
    drop the stale copies that `retire` kept. Raises OSError when `output` cannot be written."""
    output = Path(output)
    target = output / RESULTS
    tmp = output / (RESULTS + ".tmp")
    try:
        tmp.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")
        os.replace(tmp, target)
    except OSError:
        try:
            if tmp.is_file():
                tmp.unlink()
        except OSError:
            pass
        raise
    for stale in STALE.values():
        try:
            (output / stale).unlink()
        except (FileNotFoundError, IsADirectoryError):
            pass
    return target


def stale_reason(run_dir: Path, results: dict[str, Any], results_path: Path | None = None) -> str | None:
    """Why `results` no longer describes `run_dir`'s history, or None when it does."""
    now = history_fingerprint(run_dir)
    then = (results.get("history") or {}).get("fingerprint")
    if isinstance(then, dict):
        changed = sorted((set(now) - set(then)) | {n for n in set(now) & set(then) if now[n] != then[n]})
        # A history file gone since the check is no change when its twin is still the one checked
        # (harness/history/files.py compact_history keeps history.parquet alone), or when the run
        # was pruned on purpose (harness/store_commands.py writes PRUNED); otherwise it is.
        gone = sorted(set(then) - set(now))
        if gone and not changed and not set(now) & set(then) and not (Path(run_dir) / "PRUNED").exists():
            changed = gone
        if changed:
            return (f"the history changed after it was checked ({', '.join(changed)}); "
                    f"re-run the check: python -m analysis check {run_dir}")
        return None
    path = results_path or Path(run_dir) / RESULTS
    if path.is_file() and now and max(f["mtime_ns"] for f in now.values()) > path.stat().st_mtime_ns:
        return f"results.json is older than the history; re-run the check: python -m analysis check {run_dir}"
    return None


def _is_run(d: Path) -> bool:
    return d.is_dir() and not d.name.startswith(("_", ".")) and any((d / n).exists() for n in RUN_FILES)


def run_dirs(store: Path) -> list[Path]:
    """The store's run directories, and those of the stores inside it: a nightly split into shards
    (`pytest -m chaos --chaos-shard I/N`) keeps one store per shard, and a folder holding them all
    (store/nightly/shard-1, shard-2, ...) is one dashboard with one set of trends."""
    found = []
    for d in sorted(p for p in store.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))):
        if _is_run(d):
            found.append(d)
        else:
            found += [r for r in sorted(d.iterdir()) if _is_run(r)]
    return found
