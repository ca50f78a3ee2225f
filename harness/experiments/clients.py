"""Both clients side by side (issue 35 item 2): the same seeds and the same fault schedule with
each client library, and one table per client of what it did and what the checker found.

"The same fault schedule" is exact: for each seed the first client's run draws its schedule from
the seed, and every other client's run replays the schedule that run executed (times, packages
and the brokers each fault resolved to), as `run --replay` does. The clients then differ only in
themselves (and in the noise of a 2-core machine).

Every finished run is appended to STORE/clients.jsonl at once; a comparison that is stopped
resumes where it was (a run already recorded with a verdict is not run again; a FAILED one is).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness.errors import BootstrapError, HarnessError, KafkaVersionError

log = logging.getLogger(__name__)

LEDGER = "clients.jsonl"


@dataclass
class ClientRun:
    client: str
    seed: int
    settings: dict[str, Any]  # version, profile, packages, times: what makes two rows comparable
    run_dir: str
    verdict: str
    client_versions: dict[str, str] = field(default_factory=dict)
    sends_per_s: float = 0.0  # acknowledged sends per second the clients ran (sending_seconds)
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    diverged: int = 0
    info_share: float = 0.0  # sends whose outcome stayed unknown, of all sends
    replayed_from: str | None = None  # the run whose executed schedule this one replayed
    failed: str | None = None

    def key(self) -> tuple[str, int, str]:
        return (self.client, self.seed, json.dumps(self.settings, sort_keys=True))


def read_ledger(store: Path) -> list[ClientRun]:
    path = store / LEDGER
    runs = []
    for number, line in enumerate(path.read_text().splitlines() if path.exists() else [], 1):
        try:
            runs.append(ClientRun(**json.loads(line)))
        except (ValueError, TypeError) as exc:
            log.warning("%s line %d skipped (%s): it is run again", path, number, exc)
    return runs


def _append(store: Path, run: ClientRun) -> None:
    store.mkdir(parents=True, exist_ok=True)
    with (store / LEDGER).open("a") as out:
        out.write(json.dumps(asdict(run), sort_keys=True) + "\n")


def sending_seconds(record: Any, time_limit_s: float) -> float:
    """How long the run's clients sent: from the workload's start to the drain's, which includes
    the heal (the clients stop only after it). Dividing by the workload's seconds alone gave 1,126
    sends/s for a 1,000/s workload of 60 s whose heal took about 8 s (README, 2026-11-25), and
    2,908/s for a 10 s one. Older records without phases: the workload's and the heal's seconds."""
    if record is None:
        return time_limit_s
    phases, seconds = record.phases_s, record.seconds
    if phases.workload is not None and phases.drain is not None and phases.drain > phases.workload:
        return phases.drain - phases.workload
    return ((seconds.workload or time_limit_s) + (seconds.heal or 0.0)) or time_limit_s


def measured(client: str, seed: int, settings: dict[str, Any], run_dir: Path, results: dict[str, Any],
             replayed_from: str | None) -> ClientRun:
    """A ClientRun from a checked run's directory and results.json."""
    from harness.history.record import read_record

    record = read_record(run_dir)
    sends = (results.get("op_stats") or {}).get("send") or {}
    invoked = sends.get("invoke", 0) or 0
    sending_s = sending_seconds(record, settings["time_limit_s"])
    head = results.get("headline") or {}
    client_block = record.mapping("client") if record is not None else {}
    return ClientRun(client, seed, settings, str(run_dir), results.get("verdict", "unknown"),
                     dict(client_block.get("versions") or {}), round((sends.get("ok", 0) or 0) / sending_s, 1),
                     head.get("lost", 0), head.get("duplicated", 0), head.get("reordered", 0), head.get("diverged", 0),
                     round((sends.get("info", 0) or 0) / invoked, 4) if invoked else 0.0, replayed_from)


def compare_clients(store: Path, clients: list[str], seeds: list[int], settings: dict[str, Any],
                    execute: Callable[..., tuple[Path, dict[str, Any]]], on_run: Callable[[ClientRun, bool], None] | None = None,
                    ) -> list[ClientRun]:
    """For each seed, each client in turn: the first draws the schedule, the others replay it.
    `execute(client, seed, schedule)` runs and checks one run, returning (run_dir, results)."""
    done = {r.key(): r for r in read_ledger(store) if r.failed is None}
    runs: list[ClientRun] = []
    for seed in seeds:
        schedule: list[dict[str, Any]] | None = None
        first: str | None = None
        for client in clients:
            probe = ClientRun(client, seed, settings, "", "")
            if probe.key() in done:
                run = done[probe.key()]
            else:
                run = _one(client, seed, settings, execute, schedule, first)
                _append(store, run)
            if first is None and run.failed is None:
                first, schedule = run.run_dir, _executed_schedule(Path(run.run_dir))
            runs.append(run)
            if on_run is not None:
                on_run(run, probe.key() in done)
    return runs


def _executed_schedule(run_dir: Path) -> list[dict[str, Any]] | None:
    from harness.history.record import read_record

    record = read_record(run_dir)
    return (record.replay_schedule or None) if record is not None else None


def _one(client: str, seed: int, settings: dict[str, Any], execute: Callable[..., tuple[Path, dict[str, Any]]],
         schedule: list[dict[str, Any]] | None, first: str | None) -> ClientRun:
    try:
        run_dir, results = execute(client, seed, schedule)
    except (BootstrapError, KafkaVersionError):
        raise  # the machine or the input is broken: every further run would fail the same way
    except HarnessError as exc:
        if exc.run_dir is None:
            raise
        return ClientRun(client, seed, settings, str(exc.run_dir), "failed", failed=exc.message, replayed_from=first)
    return measured(client, seed, settings, run_dir, results, first if schedule else None)


def table(runs: list[ClientRun]) -> str:
    """One row per client (means over its runs; counts summed), then one row per run."""
    by: dict[str, list[ClientRun]] = {}
    for r in runs:
        by.setdefault(r.client, []).append(r)
    lines = ["| client | versions | runs | sends/s (mean) | lost | duplicated | reordered | diverged | info share (mean) "
             "| valid | invalid | unknown | failed |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for client, rs in by.items():
        ok = [r for r in rs if r.failed is None]
        versions = ", ".join(sorted({f"{k} {v}" for r in ok for k, v in r.client_versions.items()})) or "-"
        mean = (lambda xs: sum(xs) / len(xs) if xs else 0.0)
        lines.append(f"| {client} | {versions} | {len(rs)} | {mean([r.sends_per_s for r in ok]):.0f} | "
                     f"{sum(r.lost for r in ok)} | {sum(r.duplicated for r in ok)} | {sum(r.reordered for r in ok)} | "
                     f"{sum(r.diverged for r in ok)} | {mean([r.info_share for r in ok]):.2%} | "
                     + " | ".join(str(sum(r.verdict == v for r in ok)) for v in ("valid", "invalid", "unknown"))
                     + f" | {len(rs) - len(ok)} |")
    lines += ["", "| client | seed | verdict | sends/s | lost | duplicated | reordered | diverged | info share | run |",
              "|---|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    lines += [f"| {r.client} | {r.seed} | {r.verdict if r.failed is None else 'FAILED: ' + r.failed[:60]} | "
              f"{r.sends_per_s:.0f} | {r.lost} | {r.duplicated} | {r.reordered} | {r.diverged} | {r.info_share:.2%} | "
              f"{Path(r.run_dir).name} |" for r in runs]
    return "\n".join(lines)
