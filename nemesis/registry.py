"""The nemesis registry: each fault package declares one `Package` in its own module, and every
other place that needs the packages reads them from here.

Before the registry a package's name was repeated in seven places (the schedule's list, the
runner's makers and its heal order, RunConfig's fields, the settings' keys and replay reading,
the run command's options, a special case in harness/run/steps.py); the disk package touched six files,
and a package left out of the heal order was never torn down. Now a package's module holds:

    PACKAGES = (Package("kill", make=..., settings=(TARGETS,), heal_rank=20, summary="..."),)

and from those declarations come: the package names the schedule and `--nemesis` accept, the
factories, the order `heal_and_stop` undoes faults in, the `run` command's options and their TOML
keys (harness/cli.py, harness/run/settings.py), the reading of a replayed run's options, and what a
package needs of the cluster (`requires`: a lossy data directory, faketime, iptables, signals),
checked before the run.

Built-in packages are found by importing every module of this folder that defines `PACKAGES`;
`register()` adds one at any time (a test registers a toy package this way).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from harness.errors import HarnessError

if TYPE_CHECKING:
    from nemesis.base import Nemesis

# What a package may require of a cluster (harness/cluster/kafka_cluster.py: `capabilities`).
CAPABILITIES = {
    "signals": "send signals to a broker's JVM (kill -9, SIGSTOP/SIGCONT)",
    "restart": "start a broker's JVM again on its data directory",
    "iptables": "add and remove iptables rules on a broker's host",
    "faketime": "shift a broker JVM's wall clock (libfaketime)",
    "lossy_data": "a broker's data directory on the lossy filesystem (power loss, disk faults)",
    "log_files": "read a broker's server.log",
    # Only on clusters the harness made itself: a target's data and tools are its operator's.
    "own_data": "remove a broker's data directory (a cluster the harness started itself)",
    "kafka_tools": "run Kafka's command-line tools inside a node, from the harness's own jars",
    "dynamic_quorum": "a controller quorum formatted dynamic (KIP-853: 3.9 or later, 3 or more dedicated controllers)",
}


@dataclass(frozen=True)
class Setting:
    """One run setting that shapes a package's faults. It is the option `--partition-targets`,
    the TOML key `partition-targets` (or `partition_targets`) and a key of RunConfig.nemesis_settings.

    kind: "list" (comma-separated on the command line, an array or a string in TOML; parsed to a
    tuple), "float" or "bool" (a flag). `recorded` names the key of the nemesis's `options()` in
    config.json that gives the setting back when that run is replayed."""

    name: str
    default: Any
    help: str
    kind: str = "list"
    recorded: str | None = None
    choices: tuple[str, ...] = ()  # a list's allowed items, checked for every run (refused: exit 2)

    def __post_init__(self) -> None:
        if self.kind not in ("list", "float", "bool"):
            raise ValueError(f"setting {self.name}: kind {self.kind!r} is not list, float or bool")

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def parse(self, value: Any) -> Any:
        """The value as a nemesis takes it: a tuple of items for a list, a float, a bool."""
        if self.kind == "list":
            items = value if isinstance(value, (list, tuple)) else str(value).split(",")
            return tuple(dict.fromkeys(str(i).strip() for i in items if str(i).strip()))
        if self.kind == "float":
            return float(value)
        return bool(value)

    def text(self, value: Any) -> Any:
        """The value as a setting holds it (a list as 'a,b', as the command line gives it)."""
        return ",".join(self.parse(value)) if self.kind == "list" else self.parse(value)


@dataclass(frozen=True)
class Package:
    """One fault package. `make(settings)` builds its nemesis from the parsed values of its
    `settings` (name -> value). `heal_rank` orders the heal: lower ranks are undone first (resume
    and restart before the network heals, clocks last). `requires` are CAPABILITIES the cluster
    must have; `needs_lossy_data` packages get a cluster whose data directories are lossy."""

    name: str
    make: Callable[[Mapping[str, Any]], "Nemesis"]
    settings: tuple[Setting, ...] = ()
    heal_rank: int = 50
    requires: frozenset[str] = field(default_factory=frozenset)
    summary: str = ""
    # What the run must make its own cluster with (`dynamic_quorum`), beyond what `requires` asks of any
    # cluster: a cluster made otherwise still serves the package, which then skips, saying why.
    makes: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.requires | self.makes) - set(CAPABILITIES))
        if unknown:
            raise ValueError(f"package {self.name}: unknown capabilities {unknown}; known: {sorted(CAPABILITIES)}")


_REGISTRY: dict[str, Package] = {}
_loaded = False


def _load_builtins() -> None:
    """Import every module of nemesis/ once; those that define PACKAGES register them."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    import nemesis

    for info in sorted(pkgutil.iter_modules(nemesis.__path__), key=lambda m: m.name):
        if info.name in ("registry", "runner", "schedule", "base"):
            continue
        module = importlib.import_module(f"nemesis.{info.name}")
        for package in getattr(module, "PACKAGES", ()):
            if isinstance(package, Package) and package.name not in _REGISTRY:
                register(package)


def register(package: Package) -> Package:
    """Add a package. Its name must be new; a setting it shares with another package (kill and
    pause share --db-targets) must be the same declaration."""
    if package.name in _REGISTRY or package.name == "none":
        raise ValueError(f"a nemesis package named {package.name!r} is already registered")
    known = {s.name: s for p in _REGISTRY.values() for s in p.settings}
    clash = [s.name for s in package.settings if s.name in known and known[s.name] != s]
    if clash:
        raise ValueError(f"package {package.name}: settings {clash} are declared differently by another package")
    _REGISTRY[package.name] = package
    return package


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def packages() -> dict[str, Package]:
    """Every registered package by name, built-in ones first."""
    _load_builtins()
    return dict(_REGISTRY)


def names() -> tuple[str, ...]:
    return tuple(packages())


def package(name: str) -> Package:
    found = packages()
    if name not in found:
        raise HarnessError(f"unknown nemesis {[name]}", hint=f"use 'none' or any of: {', '.join(found)}")
    return found[name]


def settings() -> dict[str, Setting]:
    """Every package's settings by name, in the order the packages declare them (shared ones once)."""
    found: dict[str, Setting] = {}
    for p in packages().values():
        for s in p.settings:
            found.setdefault(s.name, s)
    return found


def defaults() -> dict[str, Any]:
    return {name: s.text(s.default) if s.kind == "list" else s.default for name, s in settings().items()}


def registered(names_: Any) -> list[str]:
    """Those of `names_` that are registered packages (a run may hold a nemesis built by hand)."""
    found = packages()
    return [n for n in names_ if n in found]


def heal_order(names_: list[str] | tuple[str, ...]) -> list[str]:
    """The given packages in the order the heal undoes them (by heal_rank, then name)."""
    return sorted(names_, key=lambda n: (package(n).heal_rank, n))


def build(names_: list[str] | tuple[str, ...], values: Mapping[str, Any] | None = None) -> dict[str, "Nemesis"]:
    """The nemesis of each named package, made from the settings `values` (name -> value as the
    command line or TOML gives it; a setting left out takes its default). `[]` or `["none"]`: no faults.
    An unknown package or setting is a HarnessError (exit 2) naming what is known."""
    chosen = [n for n in names_ if n != "none"]
    found = packages()
    unknown = [n for n in chosen if n not in found]
    if unknown:
        raise HarnessError(f"unknown nemesis {unknown}", hint=f"use 'none' or any of: {', '.join(found)}")
    known = settings()
    extra = sorted(set(values or {}) - set(known))
    if extra:
        raise HarnessError(f"unknown nemesis setting(s) {extra}", hint=f"known: {', '.join(known)}")
    given = {k: v for k, v in (values or {}).items() if v is not None}
    parsed = {name: s.parse(given.get(name, s.default)) for name, s in known.items()}
    for name, s in known.items():
        bad = [item for item in parsed[name] if item not in s.choices] if s.choices else []
        if bad:
            raise HarnessError(f"unknown target(s) {bad} for {s.flag}", hint=f"use any of: {', '.join(s.choices)}")
    return {n: found[n].make({s.name: parsed[s.name] for s in found[n].settings}) for n in chosen}


def requirements(names_: list[str] | tuple[str, ...]) -> frozenset[str]:
    """What the named packages need of a cluster, together, and what the run must make it with."""
    return frozenset().union(*(package(n).requires | package(n).makes for n in names_ if n != "none"))


def refuse_unserved(names_: list[str] | tuple[str, ...], capabilities: frozenset[str] | set[str], where: str) -> None:
    """HarnessError (exit 2) naming each package the cluster cannot serve and what it lacks."""
    lacking = {n: sorted(package(n).requires - set(capabilities)) for n in names_ if n != "none"}
    lacking = {n: missing for n, missing in lacking.items() if missing}
    if lacking:
        said = "; ".join(f"{n} needs {', '.join(CAPABILITIES[m] for m in missing)}" for n, missing in lacking.items())
        raise HarnessError(f"{where} cannot serve the nemesis package(s) {', '.join(lacking)}: {said}.",
                           hint="leave those packages out of --nemesis, or run against a cluster that has them")


def replayed_settings(options: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The settings that a run's recorded nemesis options (config.json nemesis_config.options,
    package -> its nemesis's options()) give back, for `run --replay`."""
    values: dict[str, Any] = {}
    for name, recorded in options.items():
        found = packages().get(name)
        if found is None or not isinstance(recorded, Mapping):
            continue
        for s in found.settings:
            if s.recorded is None or recorded.get(s.recorded) is None:
                continue
            value = recorded[s.recorded]
            if s.kind == "list" and not value:
                continue  # an empty list recorded: the default stands, as before the registry
            values[s.name] = s.text(value)
    return values
