"""Replays of a find (`python -m harness replay-find RUN_DIR --times N`, docs/guided.md): the found
run replayed with the run command's own code path (`run --replay`), in process as `detect` runs its
runs, each replay appended to STORE/replays.jsonl (rows as detect's ledger, `settings.replay_of`
naming the find) so that a stopped set of replays resumes; the campaign page counts them."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from harness.errors import HarnessError
from harness.experiments.campaign import REPLAYS, observed_sets, read_json, read_replays
from harness.experiments.detection import LOSS_KINDS, DetectionRun


def found_run(run_dir: Path) -> DetectionRun:
    """The run at RUN_DIR as a ledger row, refused (exit 2) unless it is a checked find."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise HarnessError(f"{run_dir}: no such run directory.", hint="pass STORE/<version>/<run-id>/ of a detect run")
    from harness.history.record import RecordError, read_record

    try:
        record = read_record(run_dir)
    except (OSError, RecordError):
        record = None
    if record is None or record.seed is None:
        raise HarnessError(f"{run_dir}: no readable config.json there, so nothing to replay.",
                           hint="pass a run directory written by `python -m harness run` or `detect`")
    results = read_json(run_dir / "results.json")
    head = results.get("headline") or {}
    row = DetectionRun(str(record.kafka_version), str(record.profile_name), record.seed, {}, str(run_dir.resolve()),
                       str(results.get("verdict")), int(head.get("lost", 0)), int(head.get("diverged", 0)),
                       int(head.get("duplicated", 0)), list(results.get("forbidden") or []))
    if not row.found:
        what = "it has no results.json (not checked)" if not results else (
            f"its verdict is {row.verdict} with forbidden {', '.join(row.forbidden) or 'nothing'}")
        raise HarnessError(f"{run_dir} is not a find: {what}; a find is invalid for a forbidden loss or divergence "
                           f"({', '.join(sorted(LOSS_KINDS))}).",
                           hint="pick a run the campaign page lists under finds (python -m harness campaign STORE)")
    return row


def replay_find(run_dir: Path, times: int, store: Path | None = None,
                execute: Callable[[Path, Path, Any], tuple[Path, dict[str, Any]]] | None = None,  # (run dir, store, finisher)
                on_replay: Callable[[DetectionRun, bool], None] | None = None) -> list[DetectionRun]:
    """Replay the find at RUN_DIR until STORE/replays.jsonl holds `times` replays of it with a
    verdict (STORE: the run's own store, RUN_DIR/../..); replays already there are not repeated, a
    FAILED one is. Each replay is `run --replay RUN_DIR/config.json` with its run directory under
    STORE/<version>/. Returns the replays with a verdict, in order."""
    original = found_run(run_dir)
    run_dir = Path(original.run_dir)
    store = Path(store) if store is not None else run_dir.parent.parent
    from harness.run.directory import prepare_store

    store = prepare_store(store)
    done = {int(r.settings["replay"]): r for r in read_replays([store / REPLAYS]).get(run_dir.name, [])
            if r.settings.get("replay_of") == str(run_dir)}
    one = execute or _execute_replay
    finisher = None
    for n in range(1, times + 1):
        if n in done:
            if on_replay is not None:
                on_replay(done[n], True)
            continue
        if finisher is None and execute is None:
            from harness.run.finish import Finisher

            finisher = Finisher()
        settings = {"replay_of": str(run_dir), "replay": n}
        try:
            replay_dir, results = one(run_dir, store / original.version, finisher)
        except HarnessError as exc:
            if exc.run_dir is None:
                raise  # nothing ran: bad input or a broken machine, not a replay's outcome
            row = DetectionRun(original.version, original.profile, original.seed, settings, str(exc.run_dir), "failed",
                               failed=exc.message)
        else:
            head = results.get("headline") or {}
            states, transitions, watched = observed_sets(Path(replay_dir))
            row = DetectionRun(original.version, original.profile, original.seed, settings, str(replay_dir),
                               str(results.get("verdict")), int(head.get("lost", 0)), int(head.get("diverged", 0)),
                               int(head.get("duplicated", 0)), list(results.get("forbidden") or []),
                               states=len(states) if watched else None, transitions=len(transitions) if watched else None)
        with (store / REPLAYS).open("a") as out:
            out.write(json.dumps(asdict(row), sort_keys=True) + "\n")
        if row.failed is None:
            done[n] = row
        if on_replay is not None:
            on_replay(row, False)
    return [done[n] for n in sorted(done) if n <= times]


def _execute_replay(run_dir: Path, store: Path, finisher: Any) -> tuple[Path, dict[str, Any]]:
    """`python -m harness run --replay RUN_DIR/config.json --store STORE`, in process, checked and
    compacted as the run command does (harness/cli.py run_command)."""
    from harness.history.files import compact_history
    from harness.history.record import record_path
    from harness.run.settings import make_faults, read_replay, run_config
    from harness.run.steps import run

    values = read_replay(run_dir)  # the run directory's config.json, read by the record module
    values["store"] = str(store)
    config = run_config(values, command_line=["python", "-m", "harness", "run", "--replay", f"{record_path(run_dir)}",
                                              "--store", str(store)])
    result = run(config, faults=make_faults(config))
    results = finisher.check_and_report(result.run_dir).results
    compact_history(result.run_dir)
    return result.run_dir, results
