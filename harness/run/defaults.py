"""What `./chaos run` adds to `python -m harness run` (issue 34): run settings' defaults from the
environment, so that a first run injects faults while --replay and --config keep their meaning, and
the lines that say which faults a run injected and how their heal went."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from harness.errors import HarnessError
from harness.history.record import RecordError, read_record

# `./chaos run` sets "time-limit=30 nemesis=kill,partition,pause": a first run shows what the tool is
# for (issue 34). Without it `python -m harness run` keeps RunConfig's defaults (60 s, fault-free).
RUN_DEFAULTS_ENV = "KAFKA_HARNESS_RUN_DEFAULTS"


def apply_run_defaults(ctx: click.Context, flags: dict[str, Any], config_file: Path | None,
                       replay: Path | None) -> tuple[dict[str, Any], list[str]]:
    """The flags with $KAFKA_HARNESS_RUN_DEFAULTS's `key=value ...` (keys as the long options), and the
    flags that record them. Not flags the script passes, which would beat --replay's and --config's
    settings: each applies where the command line gave nothing, and none with --config (its file is
    the whole run, through either entry point) or --replay (its config.json is, `nemesis none` too)."""
    text = os.environ.get(RUN_DEFAULTS_ENV, "")
    if not text.strip() or config_file or replay:
        return flags, []
    options = {p.name: p for p in ctx.command.get_params(ctx) if isinstance(p, click.Option)}
    values, recorded = dict(flags), []
    for item in shlex.split(text):
        key, sep, raw = item.partition("=")
        option = options.get(key.replace("-", "_"))
        if not sep or option is None or key in ("config", "replay"):
            raise HarnessError(f"{RUN_DEFAULTS_ENV}: {item!r} is not key=value with a run option's name.",
                               hint=f"e.g. {RUN_DEFAULTS_ENV}='time-limit=30 nemesis=kill,partition,pause'; or unset it")
        if ctx.get_parameter_source(option.name) != ParameterSource.DEFAULT:
            continue  # given on the command line (or by click's own environment variables)
        try:
            values[option.name] = option.type_cast_value(ctx, raw)
        except click.BadParameter as exc:
            raise HarnessError(f"{RUN_DEFAULTS_ENV}: bad value {raw!r} for {key}: {exc.message}",
                               hint=f"see `python -m harness run --help` for --{key}; or unset {RUN_DEFAULTS_ENV}") from None
        flag = option.opts[-1:] if values[option.name] else option.secondary_opts[-1:]
        recorded += flag if option.is_flag else [option.opts[-1], raw]
    return values, recorded


def faults_of(config: Any, defaults: list[str]) -> Any:
    """make_faults(config); a bad package that the environment named says so (exit 2)."""
    from harness.run.settings import make_faults

    try:
        return make_faults(config)
    except HarnessError as exc:
        if "--nemesis" not in defaults:
            raise
        raise HarnessError(f"{RUN_DEFAULTS_ENV} (nemesis={config.nemesis}): {exc.message}",
                           hint=f"{exc.hint}; or unset {RUN_DEFAULTS_ENV}" if exc.hint else f"unset {RUN_DEFAULTS_ENV}") from None


def fault_lines(run_dir: Path) -> list[str]:
    """From config.json: the faults injected (kind, count, aim→brokers) and how the heal went."""
    try:
        record = read_record(run_dir)
    except (OSError, RecordError):
        return []
    faults = record.nemesis_config if record is not None else None
    hits: dict[str, list[str]] = {p: [] for p in faults.packages} if faults is not None else {}
    if not hits:
        return []  # a fault-free run
    missed = {"skipped": 0, "not applied": 0}  # no target at its moment; or an error (no resolved targets)
    for event in [e for e in faults.schedule if e.action == "start"]:
        params = event.params
        if not params.get("targets") and not params.get("id"):  # a zombie producer aims at an id, not a broker
            missed["skipped" if "targets" in params else "not applied"] += 1
            continue
        aim = params.get("shape") or params.get("target") or "?"
        hits.setdefault(event.package, []).append(f"{aim}→{','.join(map(str, params.get('targets') or [params.get('id')]))}")
    kinds = "; ".join(f"{p} ×{len(h)}" + (f" ({', '.join(h)})" if h else "") for p, h in hits.items())
    extra = "".join(f", {n} {what}" for what, n in missed.items() if n)
    lines = [f"faults injected: {sum(map(len, hits.values()))} — {kinds} (aim→broker ids){extra}"]
    heal = record.heal
    if heal is None:
        lines.append("[yellow]heal: not recorded (the run ended before its fault phase did)[/yellow]")
    elif heal.isr_full:
        revived = f"; node(s) {', '.join(heal.revived)} started again" if heal.revived else ""
        lines.append(f"healed: every fault undone, every ISR full again after {heal.waited_s or 0:.1f} s{revived}")
    else:
        refused = record.mapping("heal").get("refused") or {}
        if refused:  # nemesis/refusals.py: the heal stopped waiting for them
            lines.append(f"[yellow]heal: broker(s) {', '.join(refused)} refused to truncate and cannot rejoin the ISR "
                         f"(unclean leader election is off); stopped waiting after {heal.waited_s or 0:.0f} s[/yellow]")
        else:
            lines.append(f"[yellow]heal: ISRs not full after {heal.waited_s or 0:.0f} s: {json.dumps(heal.lagging)[:200]}[/yellow]")
    return lines
