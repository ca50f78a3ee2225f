"""`harness prune`: a store that a nightly can keep for months.

Twelve nightly runs of 60 s took 417 MB on 2026-11-25, 35 MB a run, most of it the history twice
(JSON Lines beside its Parquet twin). Two steps, each safe to repeat:

1. Every checked run (results.json written) keeps one durable form of its history: history.parquet,
   when it holds exactly the JSON Lines' events (harness/history/files.py compact_history).
2. Runs older than --older-than days, beyond the --keep-last newest, are pruned: their history,
   broker logs, replica dumps and report go; config.json, cluster.json and results.json stay, so the
   dashboard still counts their verdicts and draws their trends. A PRUNED file says what went, when.

A run still going (config.json status "running") is never touched.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path
from typing import Any

import click

from harness.errors import HarnessError
from harness.history.record import RECORD_FILE, RecordError, read_record, record_path

KEPT = (RECORD_FILE, "cluster.json", "results.json", "FAILED", "PRUNED")


def _status(run_dir: Path) -> str | None:
    try:
        record = read_record(run_dir)
    except (OSError, RecordError):
        return None
    return record.status if record is not None else None


def _when(run_dir: Path) -> dt.datetime:
    """The run's start from its id (20261125T160129-ab0362), else config.json's modification time."""
    try:
        return dt.datetime.strptime(run_dir.name.split("-")[0], "%Y%m%dT%H%M%S").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return dt.datetime.fromtimestamp(record_path(run_dir).stat().st_mtime, dt.timezone.utc)


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def runs_of(store: Path) -> list[Path]:
    """The run directories of a store (those holding config.json), newest first."""
    return sorted((d for d in store.iterdir() if d.is_dir() and record_path(d).exists()), key=_when, reverse=True)


def prune_run(run_dir: Path, dry_run: bool = False) -> int:
    """Remove all but KEPT from one run directory; write PRUNED; return the bytes freed."""
    doomed = [p for p in run_dir.iterdir() if p.name not in KEPT]
    mounted = [p for p in run_dir.rglob("*") if p.is_dir() and os.path.ismount(p)]
    if mounted:  # a lossy data directory a killed run left mounted: `harness cleanup` unmounts it first
        raise HarnessError(f"{run_dir.name} still has a mount inside ({mounted[0]}); it was not pruned.",
                           hint="run `python -m harness cleanup` first, then prune again")
    freed = sum(_size(p) for p in doomed)
    if dry_run or not doomed:
        return freed
    for path in doomed:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    (run_dir / "PRUNED").write_text(f"pruned {when}: {', '.join(sorted(p.name for p in doomed))} ({freed:,} bytes)\n")
    return freed


def prune_store(store: Path, older_than_days: float | None, keep_last: int, dry_run: bool = False) -> dict[str, Any]:
    """Both steps over a store; what each run became, and the bytes freed."""
    from harness.history.files import compact_history

    if not store.is_dir():
        raise HarnessError(f"{store} is not a store folder.", hint="pass the folder given to `run --store` (default: store)")
    now = dt.datetime.now(dt.timezone.utc)
    report: dict[str, Any] = {"compacted": [], "pruned": [], "skipped": [], "freed_bytes": 0}
    for rank, run_dir in enumerate(runs_of(store)):
        if _status(run_dir) == "running":
            report["skipped"].append(f"{run_dir.name}: still running")
            continue
        old = older_than_days is not None and rank >= keep_last and (now - _when(run_dir)).total_seconds() > older_than_days * 86400
        if old and not (run_dir / "PRUNED").exists():
            report["freed_bytes"] += prune_run(run_dir, dry_run)
            report["pruned"].append(run_dir.name)
        elif (run_dir / "results.json").exists() and (run_dir / "history.jsonl").exists():
            size = (run_dir / "history.jsonl").stat().st_size
            done = {"compacted": True, "freed_bytes": size} if dry_run else compact_history(run_dir)
            if done["compacted"]:
                report["freed_bytes"] += done["freed_bytes"]
                report["compacted"].append(run_dir.name)
            else:
                report["skipped"].append(f"{run_dir.name}: {done['why']}")
    return report


@click.command()
@click.argument("store", type=click.Path(file_okay=False, path_type=Path), default="store")
@click.option("--older-than", "older_than", type=click.FloatRange(min=0), default=None, metavar="DAYS",
              help="Prune runs that started more than DAYS days ago (history, logs, report go; verdicts and trends stay).")
@click.option("--keep-last", type=click.IntRange(min=0), default=0, show_default=True,
              help="Never prune the N newest runs, however old.")
@click.option("--dry-run", is_flag=True, help="Say what would go and how much it frees; change nothing.")
def prune(store: Path, older_than: float | None, keep_last: int, dry_run: bool) -> None:
    """Free a store's space: checked runs keep only history.parquet, and runs older than --older-than
    keep only their verdict (config.json, cluster.json, results.json). The dashboard still counts them."""
    report = prune_store(store, older_than, keep_last, dry_run)
    verb = "would free" if dry_run else "freed"
    click.echo(f"{verb} {report['freed_bytes'] / 1e6:,.1f} MB: compacted {len(report['compacted'])} run(s), "
               f"pruned {len(report['pruned'])}, skipped {len(report['skipped'])}")
    for line in report["skipped"]:
        click.echo(f"  skipped {line}")
