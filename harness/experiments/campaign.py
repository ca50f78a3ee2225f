"""The campaign over a `detect` store (issue 38, docs/guided.md): how coverage grew run after run,
every find with what reproduces it, and the replays of a find.

A campaign is what a `detect` store already holds: the ledger STORE/detection.jsonl (one row per
run, harness/experiments/detection.py) and the run directories STORE/<version>/<run-id>/. Nothing
here runs a cluster: harness/experiments/replays.py replays a find and appends each replay to
STORE/replays.jsonl, a ledger of the same rows as detect's, which the page reads (read_replays).

Coverage is counted from each run's `observed` history events (docs/history.md) with the state
watch's own counter (nemesis/guided/state.py Seen), so a run's distinct states here are the ones
its config.json and its ledger row name; the union over a schedule's runs, in the order they ran,
is its coverage over time.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness.errors import HarnessError
from harness.experiments.detection import LOSS_KINDS, DetectionRun, read_ledger, schedule_of

log = logging.getLogger(__name__)

REPLAYS = "replays.jsonl"


@dataclass
class CampaignRun:
    """One ledger row with what its run directory says: coverage, times, the first loss example."""
    row: DetectionRun
    run_dir: Path
    states: set[str] = field(default_factory=set)
    transitions: set[str] = field(default_factory=set)
    watched: bool = False  # the run recorded `observed` events
    # Per observed event: seconds after the workload began, states and transitions new to the run.
    steps: list[tuple[float, list[str], list[str]]] = field(default_factory=list)
    workload_s: float = 0.0
    first_evidence_s: float | None = None  # seconds into the workload of the first loss example's evidence
    first_evidence: str = ""  # that example's anomaly and sentence
    replays: list[DetectionRun] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    @property
    def replay_command(self) -> str:
        from harness.history.record import record_path

        return f"python -m harness run --replay {record_path(self.run_dir)}"


@dataclass
class Group:
    """The runs of one (version, profile, schedule), in the order they ran, with their cumulative union."""
    version: str
    profile: str
    schedule: str
    runs: list[CampaignRun] = field(default_factory=list)
    failed: int = 0
    # After each run: (campaign seconds of workload, union of states, union of transitions).
    curve: list[tuple[float, int, int]] = field(default_factory=list)
    # The same at each observed event (its time within its run's workload, clamped to it): the line drawn.
    growth: list[tuple[float, int, int]] = field(default_factory=list)
    union_states: set[str] = field(default_factory=set)
    union_transitions: set[str] = field(default_factory=set)

    @property
    def finds(self) -> list[CampaignRun]:
        return [r for r in self.runs if r.row.found]

    def first_find(self) -> tuple[int, float, float | None] | None:
        """(runs until it, campaign seconds of workload before its run, seconds into that run of its
        first evidence or None) of the group's first find, or None."""
        before = 0.0
        for n, r in enumerate(self.runs, 1):
            if r.row.found:
                return n, before, r.first_evidence_s
            before += r.workload_s
        return None


def schedule_label(row: DetectionRun) -> str:
    """The schedule, with the guided design when the ledger names it: each design is its own measurement."""
    design = row.settings.get("guided_design")
    return schedule_of(row) + (f" (design {design})" if design is not None else "")


def observed_steps(run_dir: Path) -> list[tuple[float, list[str], list[str]]]:
    """Per `observed` event of a run: its time (seconds on the history's clock) and the states and
    transitions first seen then, counted by the state watch's own Seen (each event holds the
    partitions whose state changed at that tick, as the watch recorded them)."""
    from nemesis.guided.state import Seen

    seen, steps = Seen(), []
    for time_ns, states in _observed_events(run_dir):
        known_states, known_transitions = len(seen.states), len(seen.transitions)
        seen.update(states)
        steps.append((time_ns / 1e9, list(seen.states)[known_states:], list(seen.transitions)[known_transitions:]))
    return steps


def observed_sets(run_dir: Path) -> tuple[set[str], set[str], bool]:
    """A run's distinct states and transitions, and whether it recorded any `observed` event."""
    steps = observed_steps(run_dir)
    return ({x for _, new, _ in steps for x in new}, {x for _, _, new in steps for x in new}, bool(steps))


def _observed_events(run_dir: Path) -> list[tuple[int, dict[str, str]]]:
    """(time, `states` map) of a run's observed events, in history order. The Parquet twin is read
    with a filter (45 events out of 250,000: 0.1 s instead of parsing 45 MB of JSON Lines); a run
    not checked yet has only history.jsonl, read as every reader does (harness/history/files.py)."""
    from harness.history.format import OBSERVED

    parquet = run_dir / "history.parquet"
    if parquet.exists():
        import pyarrow.parquet as pq

        table = pq.read_table(parquet, columns=["index", "time", "f", "value"], filters=[("f", "==", OBSERVED)])
        rows = sorted(table.to_pylist(), key=lambda r: r["index"])
        return [(r["time"], json.loads(r["value"])["states"]) for r in rows if r["value"]]
    if not (run_dir / "history.jsonl").exists():
        return []
    from harness.history.files import read_history

    return [(e["time"], e["value"]["states"]) for e in read_history(run_dir / "history.jsonl")
            if e.get("f") == OBSERVED and e.get("process") == "nemesis"]


def first_evidence(results: dict[str, Any], workload_began_s: float) -> tuple[float | None, str]:
    """Seconds into the workload at which the earliest loss example the results explain was complete
    (a lost record's acknowledgement; for two records acknowledged at one offset, the second
    acknowledgement), and its sentence. Only the examples results.json keeps are looked at."""
    best: tuple[float, str] | None = None
    examples = ((results.get("explanations") or {}).get("examples") or {})
    for kind in sorted(LOSS_KINDS & set(results.get("forbidden") or [])):
        for example in examples.get(kind) or []:
            at = (example.get("at") or {}).get("to_s")
            if isinstance(at, (int, float)) and (best is None or at < best[0]):
                best = (float(at), f"{kind}: {example.get('sentence') or ''}")
    if best is None:
        return None, ""
    return round(best[0] - workload_began_s, 1), best[1]


def load_run(row: DetectionRun, store: Path) -> CampaignRun:
    """A ledger row and its run directory (found where the ledger says, or under STORE/<version>/
    when the store was moved)."""
    run_dir = Path(row.run_dir)
    if not run_dir.is_dir() and (store / row.version / run_dir.name).is_dir():
        run_dir = store / row.version / run_dir.name
    run = CampaignRun(row, run_dir, workload_s=float(row.settings.get("time_limit_s") or 0))
    from harness.history.record import RecordError, read_record

    try:
        record = read_record(run_dir)
    except (OSError, RecordError):
        record = None
    if record is not None and record.seconds.workload:
        run.workload_s = float(record.seconds.workload)  # the workload as it ran, not as asked
    results = read_json(run_dir / "results.json")
    began = record.phases_s.workload if record is not None and record.phases_s.workload else 0.0
    if row.found:
        run.first_evidence_s, run.first_evidence = first_evidence(results, float(began))
    run.steps = [(t - began, ns, nt) for t, ns, nt in observed_steps(run_dir)]
    run.states = {x for _, new, _ in run.steps for x in new}
    run.transitions = {x for _, _, new in run.steps for x in new}
    run.watched = bool(run.steps)
    return run


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_campaign(store: Path, replay_ledgers: list[Path] | None = None) -> list[Group]:
    """The groups of a detect store, each run in the order it started (its run id), the latest row
    of a run key winning as in detect; FAILED rows are counted, not drawn."""
    store = Path(store)
    rows = read_ledger(store)
    if not rows:
        raise HarnessError(f"{store / 'detection.jsonl'}: no detect ledger (or an empty one).",
                           hint="pass the --store folder of a `python -m harness detect` sweep")
    latest = {r.key(): r for r in rows}
    replays = read_replays([store / REPLAYS, *(replay_ledgers or [])])
    groups: dict[tuple[str, str, str], Group] = {}
    for row in sorted(latest.values(), key=lambda r: Path(r.run_dir).name):
        group = groups.setdefault((row.version, row.profile, schedule_label(row)),
                                  Group(row.version, row.profile, schedule_label(row)))
        if row.failed is not None:
            group.failed += 1
            continue
        run = load_run(row, store)
        run.replays = replays.get(run.run_id, [])
        group.runs.append(run)
    for group in groups.values():
        at = 0.0
        group.curve.append((0.0, 0, 0))
        group.growth.append((0.0, 0, 0))
        for run in group.runs:
            for t, states, transitions in run.steps:
                group.union_states.update(states)
                group.union_transitions.update(transitions)
                group.growth.append((at + min(max(t, 0.0), run.workload_s), len(group.union_states),
                                     len(group.union_transitions)))
            at += run.workload_s
            group.curve.append((at, len(group.union_states), len(group.union_transitions)))
            group.growth.append(group.curve[-1])
    return sorted(groups.values(), key=lambda g: (g.version, g.profile, g.schedule))


# ------------------------------------------------------------------ detect --campaign HOURS

def run_wall_s(row: DetectionRun) -> float:
    """A recorded run's wall time: from its run id (its start, UTC) to its record's last write
    (config.json, at the run's end), plus the check's own time (results.json's timings). Not to
    results.json's time of writing: a check run again hours later (the 4.4.0 campaign's seeds 5, 19
    and 33, to explain them anew) made the first 17 runs count 5.58 hours instead of about 1.1.
    0 when nothing can be read."""
    import json

    from harness.history.record import record_path

    run_dir = Path(row.run_dir)
    try:
        start = dt.datetime.strptime(run_dir.name[:15], "%Y%m%dT%H%M%S").replace(tzinfo=dt.timezone.utc).timestamp()
        ends = [record_path(run_dir).stat().st_mtime] if record_path(run_dir).exists() else []
        results = run_dir / "results.json"
        if not ends and results.exists():  # no record: the results file's time is all there is
            ends = [results.stat().st_mtime]
        end = max(ends)
    except ValueError:  # not a run id, or no file (max of nothing)
        return 0.0
    try:
        check_s = float(((json.loads(results.read_text()).get("timings") or {}).get("total_s")) or 0.0)
    except (OSError, ValueError, TypeError, AttributeError):
        check_s = 0.0
    return max(end + check_s - start, 0.0)


def campaign_seeds(hours: float, sweep: Callable[[list[int]], list[DetectionRun]],
                   clock: Callable[[], float] | None = None) -> list[DetectionRun]:
    """Seeds 1, 2, ... each through `sweep` (every version of the sweep, resumable as detect is)
    until HOURS of wall time are spent, then stop. A seed recorded earlier counts its runs' wall
    time from their files, so a stopped campaign resumes with its budget partly spent; a seed run
    now counts the time it took. The last seed started is finished, so the budget may be overrun
    by one seed's runs."""
    import itertools
    import time

    clock = clock or time.monotonic
    spent, runs = 0.0, []
    for seed in itertools.count(1):
        if spent >= hours * 3600:
            break
        began = clock()
        done = sweep([seed])
        spent += max(clock() - began, sum(run_wall_s(r) for r in done))
        runs += done
    return runs


# ------------------------------------------------------------------ replays of a find

def read_replays(paths: list[Path]) -> dict[str, list[DetectionRun]]:
    """Replays with a verdict by the run id they replay (settings.replay_of is the original run
    directory); later rows of the same replay number win."""
    out: dict[str, dict[int, DetectionRun]] = {}
    for path in paths:
        if not path.exists():
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            try:
                row = DetectionRun(**json.loads(line))
            except (ValueError, TypeError) as exc:
                log.warning("%s line %d skipped (%s)", path, number, exc)
                continue
            if row.failed is None:
                out.setdefault(Path(row.settings["replay_of"]).name, {})[int(row.settings.get("replay", 0))] = row
    return {k: [v[n] for n in sorted(v)] for k, v in out.items()}
