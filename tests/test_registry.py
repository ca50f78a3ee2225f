"""The nemesis registry (nemesis/registry.py): a package declared in one place reaches the run
command's options, TOML settings, a replay's reading and the heal; and the heal undoes every
registered package, in its declared order."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.errors import HarnessError
from harness.history.faults import FaultKind
from nemesis import registry
from nemesis.base import Nemesis
from nemesis.registry import Package, Setting
from nemesis.runner import FaultRunner, build_nemeses
from tests.chaos.test_cli import captured  # noqa: F401  the fixture: `harness run` captured, not run

TOY = FaultKind("toy", "start-toy", "stop-toy")


class ToyNemesis(Nemesis):
    """A package that touches nothing: it records its start and stop, and remembers its teardown."""

    name, faults = "toy", (TOY,)
    option_names = ("levels",)

    def __init__(self, levels: tuple[str, ...]) -> None:
        super().__init__()
        self.levels, self.torn_down = levels, 0

    def invoke(self, action: str, params: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        value = {"targets": [], "level": params.get("level") or rng.choice(self.levels)}
        self.record(TOY.start if action == "start" else TOY.stop, value)
        return value

    def teardown(self) -> dict[str, Any]:
        self.torn_down += 1
        return {}


TOY_LEVEL = Setting("toy_level", ("low",), "Toy levels to draw from: low, high.", recorded="levels", choices=("low", "high"))


@pytest.fixture
def toy():
    """The toy package, registered for one test and gone after it."""
    registry.packages()  # the built-in ones first
    package = registry.register(Package("toy", make=lambda s: ToyNemesis(s["toy_level"]), settings=(TOY_LEVEL,),
                                        heal_rank=35, summary="a toy fault that touches nothing"))
    yield package
    registry.unregister("toy")


def test_a_package_registered_at_test_time_shows_in_run_help(toy):
    out = CliRunner().invoke(cli, ["run", "--help"]).output
    assert "--toy-level" in out and "a toy fault that touches nothing" in out
    assert "toy" in registry.names()
    from nemesis.schedule import PACKAGES

    assert "toy" in PACKAGES


def test_a_registered_package_takes_its_settings_from_flags_and_toml(toy, captured, tmp_path):
    _, faults = captured("--nemesis", "toy,kill", "--toy-level", "high", "--store", str(tmp_path / "s"))
    assert list(faults.nemeses) == ["toy", "kill"] and faults.nemeses["toy"].levels == ("high",)
    toml = tmp_path / "run.toml"
    toml.write_text('nemesis = ["toy"]\ntoy-level = ["high", "low"]\nstore = "%s"\n' % (tmp_path / "s"))
    config, faults = captured("--config", str(toml))
    assert config.nemesis_settings["toy_level"] == "high,low" and faults.nemeses["toy"].levels == ("high", "low")


def test_a_registered_package_is_replayed_with_its_settings_and_schedule(toy, captured, tmp_path):
    _, faults = captured("--nemesis", "toy", "--toy-level", "high", "--seed", "3", "--time-limit", "40",
                         "--store", str(tmp_path / "s"))
    for event in faults.schedule[:3]:
        faults.execute(event)  # what the runner resolved is what config.json keeps
    path = tmp_path / "s" / "r1" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"seed": 3, "workload": "queue", "time_limit_s": 40.0, "config_format": 2,
                                "nemesis_config": faults.describe()}))
    from harness.run.settings import read_replay

    assert read_replay(path)["toy_level"] == "high"
    _, replayed = captured("--replay", str(path))
    assert replayed.nemeses["toy"].levels == ("high",)
    assert [(e.at_s, e.action, e.params) for e in replayed.schedule] == [(e.at_s, e.action, e.params) for e in faults.executed]


def test_a_bad_setting_of_a_registered_package_is_refused(toy):
    with pytest.raises(HarnessError, match="unknown target"):
        build_nemeses(["toy"], toy_level="medium")
    with pytest.raises(HarnessError, match="unknown nemesis setting"):
        build_nemeses(["toy"], toy_colour="red")


def test_the_heal_order_is_each_package_s_declared_rank(toy):
    # Resume and restart before the network heals, clocks last (as the hard-coded tuple had it).
    assert registry.heal_order(["clock", "partition", "kill", "pause", "toy", "power"]) == \
        ["pause", "kill", "toy", "power", "partition", "clock"]


def test_heal_and_stop_tears_down_every_registered_package_in_heal_order(toy, monkeypatch):
    """Every registered package, the toy one too, is torn down once by the heal, in rank order."""
    faults = FaultRunner(build_nemeses(list(registry.names())), 30, seed=1)
    torn: list[str] = []
    for name, nemesis in faults.nemeses.items():
        monkeypatch.setattr(nemesis, "teardown", lambda name=name: torn.append(name) or {})
    monkeypatch.setattr(faults, "revive", lambda: {})
    monkeypatch.setattr(faults, "wait_for_full_isr", lambda: {"isr_full": True, "waited_s": 0.0, "errors": faults.errors})
    outcome = faults.heal_and_stop()
    assert outcome["isr_full"] and not faults.errors
    assert torn == registry.heal_order(list(registry.names())) and set(torn) == set(registry.names())


def test_a_cluster_that_lacks_a_capability_is_refused_before_any_fault(toy):
    class BareCluster:
        capabilities = frozenset({"signals"})
        brokers: list[Any] = []

    faults = FaultRunner(build_nemeses(["pause", "partition"]), 30, seed=1)
    with pytest.raises(HarnessError, match="partition needs add and remove iptables rules"):
        faults.setup(BareCluster())  # type: ignore[arg-type]


def test_every_package_declares_fault_kinds_and_known_needs():
    for name, package in registry.packages().items():
        nemesis = build_nemeses([name])[name]
        assert nemesis.faults, f"{name} declares the fault kinds it records"
        assert package.requires <= set(registry.CAPABILITIES), name
    assert registry.requirements(["power", "disk"]) >= {"lossy_data"}
    assert "lossy_data" not in registry.requirements(["kill", "partition", "pause", "clock", "loss"])
