"""A run's settings from three sources: flags, a TOML file (`run --config`), and an earlier
run's config.json (`run --replay`), turned into a `RunConfig` and its nemesis.

Settings are a flat dict keyed like the `run` command's parameters (`time_limit`, `nemesis`,
`partition_targets`, ...). Precedence: command-line flags > file (TOML or replayed config.json)
> the defaults, which live in one place: `RunConfig`'s fields (`DEFAULTS` below spells them as
settings; the `run` command's options and the nightly pytest plugin both take them from here).
"""

from __future__ import annotations

import dataclasses
import sys
import tomllib
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.history.record import RecordError, read_record
from harness.run.config import TOPIC, RunConfig

# Setting name -> RunConfig field, where they differ (the options say seconds in their help).
FIELDS = {"time_limit": "time_limit_s", "drain_timeout": "drain_timeout_s", "nemesis_interval": "nemesis_interval_s",
          "crash_clients": "crash_clients_s"}
# The run's own settings; each fault package's settings (partition_targets, ...) are declared by the
# package (nemesis/registry.py) and added by `defaults()` and `list_keys()`.
_SETTINGS = ("store", "workload", "profile", "brokers", "kafka_version", "upgrade_to", "time_limit", "rate", "seed",
             "partitions",
             "producers", "consumers", "subscribe", "abort_probability", "drain_timeout", "nemesis", "nemesis_interval",
             "allow_worker_errors", "compare_replicas", "crash_clients", "power_writeback_s", "client", "client_version",
             "group_protocol", "controllers", "scheduler", "observe")
# The user's Kafka settings: --broker-config K=V ... (repeatable), or a TOML table of the same name.
CONFIG_SCOPES = {"broker_config": "broker", "topic_config": "topic", "producer_config": "producer",
                 "consumer_config": "consumer"}
_FIELD_DEFAULTS = {f.name: f.default for f in dataclasses.fields(RunConfig) if f.default is not dataclasses.MISSING}
DEFAULTS: dict[str, Any] = {k: _FIELD_DEFAULTS[FIELDS.get(k, k)] for k in _SETTINGS if FIELDS.get(k, k) in _FIELD_DEFAULTS}
DEFAULTS["store"] = "store"
# Settings that choose the fault schedule: a replayed schedule holds only while they are unchanged.
SCHEDULE_KEYS = ("nemesis", "nemesis_interval", "seed", "time_limit", "scheduler")


def defaults() -> dict[str, Any]:
    """Every setting's default: the run's (DEFAULTS) and every registered package's."""
    from nemesis import registry

    return {**DEFAULTS, **{key: () for key in CONFIG_SCOPES}, **registry.defaults()}


def list_keys() -> tuple[str, ...]:
    """Keys that take a comma-separated list on the command line; TOML may give an array instead."""
    from nemesis import registry

    return ("nemesis", *(name for name, s in registry.settings().items() if s.kind == "list"))


def read_toml(path: Path, known: dict[str, Any]) -> dict[str, Any]:
    """Settings from a TOML file; `known` maps each accepted key to a converter (value → value).
    Keys may be spelled with '-' or '_'. An unknown key or bad value is a HarnessError (exit 2)."""
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise HarnessError(f"cannot read the run file {path}: {exc.strerror or exc}.", hint="pass an existing TOML file to --config") from None
    except tomllib.TOMLDecodeError as exc:
        raise HarnessError(f"{path} is not valid TOML: {exc}.", hint="fix the file (https://toml.io)") from None
    values: dict[str, Any] = {}
    for raw, value in data.items():
        key = raw.replace("-", "_")
        if key not in known:
            raise HarnessError(f"{path}: unknown key {raw!r}.", hint=f"use any of: {', '.join(sorted(known))}")
        if key in list_keys() and isinstance(value, list):
            value = ",".join(str(v) for v in value)
        try:
            values[key] = known[key](value)
        except Exception as exc:  # click's BadParameter and friends: say which key, which file
            raise HarnessError(f"{path}: bad value {value!r} for {raw!r}: {str(getattr(exc, 'message', exc)).rstrip('.')}.",
                               hint=f"see `python -m harness run --help` for {raw}") from None
    return values


def read_replay(path: Path) -> dict[str, Any]:
    """The settings that reproduce the run whose config.json is `path` (seed, version, workload,
    profile, nemesis packages/interval/options, rate, sizes). The store defaults to the folder
    holding that run directory. The record is read as harness/history/record.py reads every version;
    a value of the wrong type in it is refused (exit 2) rather than replayed as a default."""
    path = Path(path)
    try:
        record = read_record(path)  # the file, or a run directory's
    except (OSError, RecordError) as exc:
        raise HarnessError(f"cannot read {path} as a run's config.json: {str(getattr(exc, 'message', exc)).rstrip('.')}.",
                           hint="pass STORE/RUN_ID/config.json of an earlier run to --replay") from None
    if record is None:
        raise HarnessError(f"cannot read {path} as a run's config.json: no such file.",
                           hint="pass STORE/RUN_ID/config.json of an earlier run to --replay")
    if record.seed is None or record.workload is None:
        raise HarnessError(f"{path} is not a run's config.json (no seed or workload).",
                           hint="pass STORE/RUN_ID/config.json written by `python -m harness run`")
    if record.problems:
        raise HarnessError(f"{path}: cannot replay a run record with bad values: {'; '.join(record.problems)}.",
                           hint="fix those values in the file, or give the settings as flags instead")
    path = record.source or path
    values: dict[str, Any] = {
        "store": str(path.resolve().parent.parent),
        "seed": record.seed,
        "workload": record.workload,
        "profile": record.profile_name or "safe",
    }
    recorded = {"kafka_version": record.kafka_version, "brokers": record.brokers, "rate": record.rate,
                "time_limit": record.time_limit_s, "partitions": record.partitions, "producers": record.producers,
                "consumers": record.consumers, "subscribe": record.subscribe, "abort_probability": record.abort_probability,
                "drain_timeout": record.drain_timeout_s, "allow_worker_errors": record.allow_worker_errors,
                "compare_replicas": record.compare_replicas, "crash_clients": record.crash_clients_s,
                "power_writeback_s": record.power_writeback_s}
    values.update({key: value for key, value in recorded.items() if value is not None})
    from harness.kafka_settings.given import replayed

    client = record.mapping("client")
    values.update({k: v for k, v in (("client", client.get("name")), ("client_version", client.get("version")),
                                     ("group_protocol", record.raw.get("group_protocol")),
                                     ("controllers", record.raw.get("controllers")),
                                     ("upgrade_to", record.raw.get("upgrade_to"))) if v is not None})
    settings = replayed(record.mapping("settings"))
    values.update({key: settings[scope] for key, scope in CONFIG_SCOPES.items() if scope in settings})
    values["replay_of"] = str(path.resolve())
    values["nemesis"] = ",".join(record.packages) or "none"
    if record.replay_schedule:
        values["schedule"] = record.replay_schedule  # the executed schedule: times and resolved targets
    faults = record.nemesis_config
    if faults is not None and faults.interval_s is not None:
        values["nemesis_interval"] = faults.interval_s
    raw_faults = record.mapping("nemesis_config")
    if raw_faults.get("scheduler") in ("random", "guided"):  # a guided run's replay repeats its executed schedule
        values["scheduler"] = raw_faults["scheduler"]
    if "observed" in raw_faults:
        values["observe"] = True
    from nemesis import registry

    values.update(registry.replayed_settings(faults.options if faults is not None else {}))
    return values


def split_list(text: str) -> tuple[str, ...]:
    """'a, b,,a' -> ('a', 'b'): the items of a comma-separated option, blanks and repeats dropped."""
    return tuple(dict.fromkeys(part.strip() for part in str(text).split(",") if part.strip()))


def parse_seeds(text: str) -> tuple[int, ...]:
    """'3' -> (1, 2, 3); '3,7' -> (3, 7); '5..8' -> (5, 6, 7, 8). ValueError (naming the three forms) otherwise."""
    text = str(text).strip()
    try:
        if ".." in text:
            lo, hi = (int(x) for x in text.split(".."))
            seeds = tuple(range(lo, hi + 1))
        elif "," in text:
            seeds = tuple(int(x) for x in split_list(text))
        else:
            seeds = tuple(range(1, int(text) + 1))
    except ValueError:
        seeds = ()
    if not seeds:
        raise ValueError(f"{text!r}: give a count (3 = seeds 1..3), a list (3,7) or a range (5..8)")
    return seeds


def run_config(values: dict[str, Any], command_line: list[str] | None = None) -> RunConfig:
    """The RunConfig for settings; a setting left out takes its default (DEFAULTS)."""
    from nemesis import registry

    v = {**defaults(), **{k: x for k, x in values.items() if x is not None or k == "kafka_version"}}
    return RunConfig(
        store=Path(v["store"]), workload=v["workload"], profile=v["profile"], brokers=int(v["brokers"]),
        kafka_version=v.get("kafka_version"), upgrade_to=v.get("upgrade_to"), time_limit_s=float(v["time_limit"]),
        rate=float(v["rate"]),
        seed=int(v["seed"]), partitions=int(v["partitions"]), producers=int(v["producers"]),
        consumers=int(v["consumers"]), subscribe=bool(v["subscribe"]),
        abort_probability=float(v["abort_probability"]), drain_timeout_s=float(v["drain_timeout"]),
        nemesis=str(v["nemesis"]), nemesis_interval_s=float(v["nemesis_interval"]),
        nemesis_settings={name: s.text(v[name]) for name, s in registry.settings().items()},
        allow_worker_errors=bool(v["allow_worker_errors"]), compare_replicas=bool(v["compare_replicas"]),
        crash_clients_s=None if v.get("crash_clients") is None else float(v["crash_clients"]),
        power_writeback_s=None if v.get("power_writeback_s") is None else float(v["power_writeback_s"]),
        client=str(v["client"]), client_version=v.get("client_version"), group_protocol=str(v["group_protocol"]),
        controllers=int(v["controllers"]), settings=given_settings(v),
        scheduler=str(v["scheduler"]), observe=bool(v["observe"]),
        schedule=v.get("schedule"), replay_of=v.get("replay_of"),
        command_line=command_line if command_line is not None else ["python", "-m", "harness", *sys.argv[1:]],
    )


def given_settings(values: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The four --*-config settings (a tuple of K=V from flags, a table from TOML or a replayed
    config.json) as scope -> key -> value; bad input raises HarnessError (exit 2)."""
    from harness.kafka_settings.given import parse_pairs

    parsed = {scope: parse_pairs(scope, values.get(key)) for key, scope in CONFIG_SCOPES.items()}
    return {scope: pairs for scope, pairs in parsed.items() if pairs}


def make_faults(config: RunConfig) -> Any:
    """The FaultRunner for the config (a replayed schedule when it carries one), or None when no
    fault package is named. Bad packages or targets raise HarnessError before anything starts."""
    packages = [p for p in split_list(config.nemesis) if p != "none"]
    if not packages:
        return None
    from nemesis.runner import FaultRunner, build_nemeses
    from nemesis.schedule import recorded_schedule

    nemeses = build_nemeses(packages, config.nemesis_settings)
    schedule = recorded_schedule(config.schedule) if config.schedule else None
    scheduler = None
    if config.scheduler == "guided":
        from harness.provision.settings import kafka_version
        from nemesis.guided import coverage
        from nemesis.guided.scheduler import GuidedScheduler, refuse_recipes

        refuse_recipes(packages)  # heir, transfer, flap, rejoin: exit 2, a replay included
        if schedule is None:  # a replay of a guided run repeats what it executed, decided nothing anew
            scheduler = GuidedScheduler(nemeses, config.time_limit_s, config.nemesis_interval_s, config.seed,
                                        coverage_path=coverage.path_in(config.store),
                                        version=kafka_version(config.kafka_version))
    return FaultRunner(nemeses, config.time_limit_s, interval_s=config.nemesis_interval_s, seed=config.seed,
                       topic=TOPIC, schedule=schedule, scheduler=scheduler,
                       observe=config.observe or config.scheduler == "guided")
