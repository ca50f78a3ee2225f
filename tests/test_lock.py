"""The installed packages are requirements.lock's (issue 34): a fresh install cannot drift to another
confluent-kafka/librdkafka than the one the findings were made with. `./chaos` installs the lock; a
venv installed otherwise, or a lock not re-resolved after pyproject.toml changed, fails here."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")
HINT = "run `./chaos test` (it installs requirements.lock), or `./chaos lock` after changing pyproject.toml"


def locked() -> dict[str, str]:
    """name -> version of every pin whose marker holds on this interpreter and platform."""
    pins: dict[str, str] = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if match := PIN.match(line):
            name, version, marker = match.groups()
            if marker is None or Marker(marker).evaluate():
                pins[canonicalize_name(name)] = version
    return pins


def test_the_lock_pins_every_package_with_hashes():
    text = (REPO / "requirements.lock").read_text()
    pins = [line for line in text.splitlines() if PIN.match(line)]
    assert len(pins) > 20 and "confluent-kafka" in locked()
    assert text.count("--hash=sha256:") >= len(pins), "every pin carries its hashes (pip --require-hashes)"


def test_every_installed_package_is_the_locked_version():
    wrong = {}
    for name, version in locked().items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[name] = f"locked {version}, installed {installed}"
    assert not wrong, f"{wrong}; {HINT}"


def test_nothing_is_installed_that_the_lock_does_not_name():
    # pip itself is pinned by ./chaos; the checkout is installed on top (editable, --no-deps).
    extra = {canonicalize_name(d.metadata["Name"]) for d in importlib.metadata.distributions()}
    extra -= {*locked(), "pip", "kafka-chaos-harness"}
    assert not extra, f"installed but not locked: {sorted(extra)}; add them to pyproject.toml and run `./chaos lock`"


def test_the_lock_satisfies_pyproject():
    # A dependency added or narrowed in pyproject.toml without `./chaos lock` would not be installed.
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = [*project["project"]["dependencies"], *project["project"]["optional-dependencies"]["dev"],
              *project["build-system"]["requires"]]
    pins = locked()
    unmet = [spec for spec in wanted
             if (r := Requirement(spec)).marker is None or r.marker.evaluate()
             if not r.specifier.contains(pins.get(canonicalize_name(r.name), "0+missing"), prereleases=True)]
    assert not unmet, f"requirements.lock does not satisfy {unmet}; {HINT}"
