"""The run record: RUN_DIR/config.json, typed and versioned, read through one function.

harness/ writes it as a run goes (harness/run/directory.py, for runs and scenarios alike); every
reader (the checker, the report, the dashboard, `run --replay`, `prune`, the faults summary) reads it
with `read_record` and gets a `RunRecord`: frozen dataclasses with typed attributes instead of
`.get` chains over a dict, the same shape whatever version wrote the file.

Versions (the file's `config_format`, which readers of the old shape already know):

- 1 (no `config_format`: run directories before 2026-11-23): the profile spelled three ways at once
  (dataclass field names, dotted Kafka keys, and nested `producer`/`consumer`/`topic` configs),
  and a fault schedule without the targets each fault resolved, so it cannot be replayed exactly;
- 2 (RECORD_VERSION): the profile in one flat spelling of Kafka's keys; the executed schedule, targets resolved.

`upgrade` reads every version into today's shape: a profile given as a bare name becomes a
profile of that name, and `replay_schedule` is empty below version 2. The profile's keys are kept
as written: analysis/rules/permissions.py reads all three spellings. Anything this module does not
name stays reachable in `raw`, so a field added by a newer harness is never lost to a reader.

The file stays plain JSON with the keys it always had, so a reader of the old shape (an older
checkout's dashboard or `run --replay`) still reads a new one. Reading is lenient: a value of the
wrong type reads as absent and is named in `problems`; readers that act on the record
(`run --replay`) refuse one with problems, readers that only show it (the dashboard) go on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, TypeVar

from harness.errors import HarnessError
from harness.history.files import write_json

RECORD_FILE = "config.json"
VERSION_KEY = "config_format"  # the key older checkouts read (>= 2: the schedule replays exactly)
RECORD_VERSION = 2

_NUMBER = (int, float)
T = TypeVar("T")
_HINT = "fix or remove it: it is written by `python -m harness run` (its fields: docs/history.md)"


class RecordError(HarnessError):
    """config.json is there but is not a run record: not JSON, or not a JSON object (exit 2)."""


@dataclass(frozen=True)
class Profile:
    """The client profile the run used (workloads/profiles.py)."""

    name: str | None
    description: str | None
    keys: dict[str, Any]  # every key as recorded, name included: Kafka's own, in any spelling the harness wrote


@dataclass(frozen=True)
class Drain:
    """The final drain's outcome (workloads/drain.py)."""

    complete: bool | None  # None: not recorded as a boolean, so the drain's status is unknown
    high_watermarks: dict[str, int] | None  # partition (key) -> offset the drain read up to
    undrained: dict[str, str] | None  # partition -> why it was not read to its end; None in older runs
    timed_out_partitions: tuple[int, ...] | None
    processes: tuple[int, ...]  # the drain's own reader processes
    first_index: int | None  # the history index where the drain's reads begin
    seconds: float | None


@dataclass(frozen=True)
class Heal:
    """How the heal went (nemesis/runner.py heal_and_stop)."""

    isr_full: bool
    waited_s: float | None
    lagging: Any  # partition -> replicas still missing from its ISR, when not full
    revived: dict[str, Any]  # node id -> the JVM started again at the heal, and why
    errors: tuple[Any, ...]


@dataclass(frozen=True)
class ScheduledFault:
    """One event of the fault schedule (nemesis/schedule.py FaultEvent), as recorded."""

    at_s: float | None
    package: str
    action: str  # start or stop
    params: dict[str, Any]  # what the fault resolved: target, targets, shape, partition, ...
    raw: dict[str, Any]  # the event as written, which `run --replay` gives back


@dataclass(frozen=True)
class NemesisConfig:
    """The fault phase's settings and schedule (nemesis/runner.py describe)."""

    packages: tuple[str, ...]
    interval_s: float | None
    seed: int | None
    options: dict[str, dict[str, Any]]  # package -> its nemesis's options()
    schedule: tuple[ScheduledFault, ...]


@dataclass(frozen=True)
class Phases:
    """When each phase began, in seconds on the history's own clock (record version 2)."""

    workload: float | None = None
    faults: float | None = None  # once a write was acknowledged; None without faults, or before 2026-11-29
    heal: float | None = None
    drain: float | None = None


@dataclass(frozen=True)
class Seconds:
    """How long each step of the run took, in seconds (a scenario records its total only)."""

    cluster_ready: float | None = None
    workload: float | None = None
    heal: float | None = None
    drain: float | None = None
    replicas: float | None = None
    total: float | None = None


@dataclass(frozen=True)
class Unresponsive:
    """When and why the brokers stopped answering (harness/cluster/watch.py)."""

    at_s: float | None
    reason: str | None

    def as_json(self) -> dict[str, Any]:
        return {"at_s": self.at_s, "reason": self.reason}


@dataclass(frozen=True)
class RunRecord:
    """One run's config.json, upgraded to RECORD_VERSION's shape. Every field is optional on disk
    (None, or empty, when absent); `version` is the one the file was written in."""

    version: int = 1
    history_format: int | None = None
    run_id: str | None = None
    status: str | None = None  # running, completed, failed
    failure: str | None = None
    history_start_utc: str | None = None
    seed: int | None = None
    kafka_version: str | None = None
    brokers: int | None = None
    workload: str | None = None  # queue, txn, eos or scenario:NAME
    profile: Profile | None = None
    rate: float | None = None
    time_limit_s: float | None = None
    partitions: int | None = None
    replication_factor: int | None = None
    producers: int | None = None
    consumers: int | None = None
    subscribe: bool | None = None
    abort_probability: float | None = None
    drain_timeout_s: float | None = None
    allow_worker_errors: bool | None = None
    compare_replicas: bool | None = None
    crash_clients_s: float | None = None
    power_writeback_s: float | None = None
    topic: str | None = None
    nemesis: tuple[str, ...] | None = None
    nemesis_config: NemesisConfig | None = None
    replay_of: str | None = None
    command_line: str | None = None
    drain: Drain | None = None
    heal: Heal | None = None
    worker_errors: tuple[str, ...] | None = None
    stuck_workers: tuple[str, ...] | None = None  # still inside a client call when the stop's wait ended
    unresponsive: Unresponsive | None = None
    replicas: dict[str, Any] | None = None  # the replica comparison's summary (harness/run/steps.py)
    counts: dict[str, int] = field(default_factory=dict)  # history events by type
    seconds: Seconds = Seconds()
    phases_s: Phases = Phases()
    scenario: dict[str, Any] | None = None  # a scenario run's summary (harness/scenarios)
    broker_config: dict[str, Any] | None = None
    topic_config: dict[str, Any] | None = None
    lossy_data: bool | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)  # the file as read, unknown keys too
    problems: tuple[str, ...] = ()  # values of the wrong type, read as absent
    source: Path | None = None  # the file it was read from (read_record)

    def mapping(self, key: str) -> dict[str, Any]:
        """raw[KEY] when the file holds a mapping there (client, settings, nemesis_config as written), else {}."""
        return self.raw[key] if isinstance(self.raw.get(key), dict) else {}

    @property
    def profile_name(self) -> str | None:
        return self.profile.name if self.profile is not None else None

    @property
    def packages(self) -> tuple[str, ...]:
        """The fault packages: the fault phase's own list, else the `nemesis` names."""
        if self.nemesis_config is not None and self.nemesis_config.packages:
            return self.nemesis_config.packages
        return self.nemesis or ()

    @property
    def replay_schedule(self) -> list[dict[str, Any]]:
        """The executed schedule as `run --replay` takes it; empty before version 2, whose events
        did not record the targets they resolved."""
        if self.version < 2 or self.nemesis_config is None:
            return []
        return [dict(e.raw) for e in self.nemesis_config.schedule]

    @property
    def extra(self) -> dict[str, Any]:
        """The keys this module does not name (a newer harness's, or a hand-added one)."""
        return {k: v for k, v in self.raw.items() if k not in _KNOWN}


EMPTY = RunRecord()  # the record of a run without config.json: every field absent
RecordLike = RunRecord | Mapping[str, Any] | None  # what readers accept: a record, config.json's content, or none


def record_path(run_dir: Path | str) -> Path:
    return Path(run_dir) / RECORD_FILE


def read_record(where: Path | str) -> RunRecord | None:
    """The run record of a run directory, or of the config.json file `where` names; None when
    there is none. RecordError when it is not a JSON object; an OSError (unreadable) is raised as
    it is, so that a caller can name the file and the fix."""
    path = Path(where)
    if path.name != RECORD_FILE and (path.is_dir() or not path.suffix):  # a run directory
        path = path / RECORD_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError as err:
        raise RecordError(f"{path}: not valid JSON ({err}).", hint=_HINT) from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: must hold a JSON object, not {type(data).__name__}.", hint=_HINT)
    return replace(upgrade(data), source=path)


def as_record(value: RecordLike) -> RunRecord:
    """`value` as a RunRecord: a record as it is, a mapping (config.json's content) upgraded, None
    as EMPTY. For callers that hold a record or were handed the file's dict."""
    if isinstance(value, RunRecord):
        return value
    return EMPTY if value is None else upgrade(value)


def write_record(run_dir: Path | str, data: dict[str, Any]) -> Path:
    """Write `data` as RUN_DIR/config.json, atomically, stamped with RECORD_VERSION. The stamp is
    made in `data` itself: a run keeps adding to one dict until its last write."""
    data[VERSION_KEY] = RECORD_VERSION
    return write_json(record_path(run_dir), data)


# ------------------------------------------------------------------------------ upgrade
class _Reader:
    """Typed values out of one JSON object; a value of the wrong type reads as None and is noted."""

    def __init__(self, data: Mapping[str, Any], where: str, problems: list[str]) -> None:
        self.data, self.where, self.problems = data, where, problems

    def take(self, key: str, kinds: tuple[type, ...], what: str) -> Any:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool)):
            return value
        self.problems.append(f"{self.where}{key} should be {what}, not {value!r}")
        return None

    def integer(self, key: str) -> int | None:
        return self.take(key, (int,), "an integer")

    def number(self, key: str) -> float | None:
        return self.take(key, _NUMBER, "a number")

    def text(self, key: str) -> str | None:
        return self.take(key, (str,), "text")

    def flag(self, key: str) -> bool | None:
        return self.take(key, (bool,), "true or false")

    def mapping(self, key: str) -> dict[str, Any] | None:
        value = self.take(key, (dict,), "an object")
        return dict(value) if value is not None else None

    def names(self, key: str) -> tuple[str, ...] | None:
        value = self.take(key, (list, tuple), "a list")
        return None if value is None else tuple(str(v) for v in value)

    def ints(self, key: str) -> tuple[int, ...] | None:
        value = self.take(key, (list, tuple), "a list")
        if value is None:
            return None
        try:
            return tuple(int(v) for v in value)
        except (TypeError, ValueError):
            self.problems.append(f"{self.where}{key} should be a list of integers, not {value!r}")
            return None

    def inner(self, key: str) -> "_Reader | None":
        value = self.mapping(key)
        return None if not value else _Reader(value, f"{self.where}{key}.", self.problems)


def upgrade(data: Mapping[str, Any]) -> RunRecord:
    """config.json's content, of any version, as a RunRecord (the module docstring says what
    changed between versions)."""
    problems: list[str] = []
    r = _Reader(data, "", problems)
    version = r.integer(VERSION_KEY) or 1
    profile = data.get("profile")
    if isinstance(profile, str):  # a bare profile name, as some early records and hand-written ones hold
        profile = {"name": profile}
    return RunRecord(
        version=version, history_format=r.integer("history_format"), run_id=r.text("run_id"), status=r.text("status"),
        failure=r.text("failure"), history_start_utc=r.text("history_start_utc"), seed=r.integer("seed"),
        kafka_version=r.text("kafka_version"), brokers=r.integer("brokers"), workload=r.text("workload"),
        profile=_profile(_Reader({"profile": profile}, "", problems).mapping("profile")),
        rate=r.number("rate"), time_limit_s=r.number("time_limit_s"), partitions=r.integer("partitions"),
        replication_factor=r.integer("replication_factor"), producers=r.integer("producers"), consumers=r.integer("consumers"),
        subscribe=r.flag("subscribe"), abort_probability=r.number("abort_probability"),
        drain_timeout_s=r.number("drain_timeout_s"), allow_worker_errors=r.flag("allow_worker_errors"),
        compare_replicas=r.flag("compare_replicas"), crash_clients_s=r.number("crash_clients_s"),
        power_writeback_s=r.number("power_writeback_s"), topic=r.text("topic"), nemesis=r.names("nemesis"),
        nemesis_config=_nemesis(r.inner("nemesis_config")), replay_of=r.text("replay_of"),
        command_line=r.text("command_line"), drain=_drain(r.inner("drain")), heal=_heal(r.inner("heal")),
        worker_errors=r.names("worker_errors"), stuck_workers=r.names("stuck_workers"), unresponsive=_unresponsive(r.inner("unresponsive")),
        replicas=r.mapping("replicas"), counts=r.mapping("counts") or {}, seconds=_steps(r.inner("seconds"), Seconds),
        phases_s=_steps(r.inner("phases_s"), Phases), scenario=r.mapping("scenario"), broker_config=r.mapping("broker_config"),
        topic_config=r.mapping("topic_config"), lossy_data=r.flag("lossy_data"),
        raw=dict(data), problems=tuple(problems),
    )


def _profile(keys: dict[str, Any] | None) -> Profile | None:
    if keys is None:
        return None
    name, description = keys.get("name"), keys.get("description")
    return Profile(name if isinstance(name, str) else None, description if isinstance(description, str) else None, keys)


def _drain(r: _Reader | None) -> Drain | None:
    if r is None:
        return None
    marks = r.mapping("high_watermarks")
    try:
        hws = {str(k): int(v) for k, v in marks.items()} if marks is not None else None
    except (TypeError, ValueError):
        r.problems.append(f"{r.where}high_watermarks should map partitions to offsets, not {marks!r}")
        hws = None
    undrained = r.mapping("undrained")
    processes = r.data.get("processes")
    return Drain(
        complete=r.flag("complete"), high_watermarks=hws,
        undrained={str(k): str(v) for k, v in undrained.items()} if undrained is not None else None,
        timed_out_partitions=r.ints("timed_out_partitions"),
        processes=tuple(p for p in processes if isinstance(p, int)) if isinstance(processes, list) else (),
        first_index=r.integer("first_index"), seconds=r.number("seconds"))


def _heal(r: _Reader | None) -> Heal | None:
    if r is None:
        return None
    return Heal(isr_full=bool(r.data.get("isr_full")), waited_s=r.number("waited_s"), lagging=r.data.get("lagging"),
                revived=r.mapping("revived") or {}, errors=tuple(r.take("errors", (list,), "a list") or ()))


def _nemesis(r: _Reader | None) -> NemesisConfig | None:
    if r is None:
        return None
    events = []
    for i, e in enumerate(r.take("schedule", (list,), "a list") or []):
        if not isinstance(e, dict):
            r.problems.append(f"{r.where}schedule[{i}] should be an object, not {e!r}")
            continue
        at, params = e.get("at_s"), e.get("params")
        events.append(ScheduledFault(at if isinstance(at, _NUMBER) and not isinstance(at, bool) else None,
                                     str(e.get("package")), str(e.get("action")),
                                     dict(params) if isinstance(params, dict) else {}, dict(e)))
    options = r.mapping("options") or {}
    return NemesisConfig(packages=r.names("packages") or (), interval_s=r.number("interval_s"), seed=r.integer("seed"),
                         options={str(k): v for k, v in options.items() if isinstance(v, dict)}, schedule=tuple(events))


def _steps(r: _Reader | None, kind: type[T]) -> T:
    """Seconds or Phases: a number for each step the record names."""
    return kind() if r is None else kind(**{name: r.number(name) for name in kind.__dataclass_fields__})  # type: ignore[attr-defined]


def _unresponsive(r: _Reader | None) -> Unresponsive | None:
    if r is None:
        return None
    return Unresponsive(at_s=r.number("at_s"), reason=r.text("reason"))


_KNOWN = frozenset(f for f in RunRecord.__dataclass_fields__ if f not in ("version", "raw", "problems", "source")) | {VERSION_KEY}
