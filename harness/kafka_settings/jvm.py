"""Kafka's own ConfigDefs as a judge of settings: ConfigCheck.java run on a Kafka version's jars.

The class is compiled once per Kafka version (its API differs across 0.10 to 4.x only in what
reflection reaches) into the cache, beside the jars; a check is then one JVM start, 0.6 s here on
an idle machine, paid only by runs that give settings.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError
from harness.provision.settings import cache_dir

SOURCE = Path(__file__).with_name("ConfigCheck.java")


@dataclass
class Verdict:
    """What Kafka's ConfigDefs said of one scope's settings."""

    names: set[str] = field(default_factory=set)  # every key the scope knows (for "did you mean")
    unknown: list[str] = field(default_factory=list)
    invalid: dict[str, str] = field(default_factory=dict)  # key -> Kafka's message
    refused: list[str] = field(default_factory=list)  # the whole client config refused: Kafka's messages
    known: bool = True  # False: no ConfigDef found for the scope in these jars


def compiled(libs: Path, version: str) -> Path:
    """The folder holding ConfigCheck.class for these jars, compiled on first use."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    out = cache_dir() / "config-check" / f"{version}-{digest}"
    if (out / "ConfigCheck.class").exists():
        return out
    if shutil.which("javac") is None:
        raise HarnessError("javac is not installed: settings cannot be checked against Kafka's ConfigDefs.",
                           hint="install a JDK (17 or later), or run without --broker-config/--topic-config")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "ConfigCheck.class").exists():
            scratch = out.with_name(out.name + ".tmp")
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir()
            proc = subprocess.run(["javac", "-nowarn", "-cp", f"{libs}/*", "-d", str(scratch), str(SOURCE)],
                                  capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                raise HarnessError(f"could not compile the settings check against Kafka {version}'s jars: "
                                   f"{proc.stderr.strip()[-400:]}", hint="report this; run without the settings meanwhile")
            scratch.rename(out)
    return out


def check(libs: Path, version: str, settings: dict[str, dict[str, str]]) -> dict[str, Verdict]:
    """Each scope's verdict from the ConfigDefs in `libs` (Kafka `version`'s jars)."""
    scopes = {s: v for s, v in settings.items() if v}
    if not scopes:
        return {}
    args: list[str] = []
    for scope, values in scopes.items():
        args += ["--", scope, *(f"{k}={v}" for k, v in values.items())]
    classes = compiled(libs, version)
    # log4j 1 (Kafka before 2.8) warns on stderr that it has no appender: stderr is only read on failure.
    proc = subprocess.run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", f"{libs}/*:{classes}",
                           "ConfigCheck", *args[1:]], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise HarnessError(f"the settings check on Kafka {version}'s jars failed: {proc.stderr.strip()[-400:]}",
                           hint="report this; run without the settings meanwhile")
    verdicts = {scope: Verdict() for scope in scopes}
    for line in proc.stdout.splitlines():
        kind, scope, *rest = line.split("\t")
        v = verdicts[scope]
        if kind == "NAMES":
            v.names = set(rest[0].split(",")) if rest and rest[0] else set()
        elif kind == "UNKNOWN":
            v.unknown.append(rest[0])
        elif kind == "INVALID":
            v.invalid[rest[0]] = rest[1] if len(rest) > 1 else ""
        elif kind == "REFUSED":
            v.refused.append(rest[-1])
        elif kind == "NODEF":
            v.known = False
    return verdicts
