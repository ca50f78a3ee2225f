"""Finders claim their anomaly where they are written: `@finds("lost-write")` over the function
that finds it. The name is resolved against the registry (analysis/rules/registry.py) when the
finder's module is imported, so a misspelt name, or a second finder for one anomaly, fails at once
and names both, instead of a check that silently counts nothing. analysis/checking/finders.py
gathers every claim and checks that each registry entry has exactly one.

Why not names in the registry: they were strings (`finder`, `module`) resolved with importlib at
check time, and a finder's parameters were found through inspect.signature; a renamed function
only failed when a check reached it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from pyspark.sql import DataFrame

from analysis.rules.registry import BY_NAME, Anomaly


class ClaimError(Exception):
    """A finder names an anomaly the registry does not have, or one another finder claimed."""


@dataclass(frozen=True)
class Finder:
    """The function that finds one anomaly: `(d)` over derive()'s tables, or `(d, pairs)` when it
    also takes the read pairs that two finders share (computed once by the checker)."""

    anomaly: Anomaly
    function: Callable[..., DataFrame]
    takes_pairs: bool

    def __call__(self, d: Any, pairs: DataFrame) -> DataFrame:
        return self.function(d, pairs) if self.takes_pairs else self.function(d)


CLAIMS: dict[Anomaly, Finder] = {}


def finds(name: str, *, pairs: bool = False) -> Callable[[Callable[..., DataFrame]], Callable[..., DataFrame]]:
    """Claim the registry entry `name` for the decorated finder (returned unchanged). `pairs`: it
    takes the shared read pairs as its second argument."""
    anomaly = BY_NAME.get(name)
    if anomaly is None:
        raise ClaimError(f"a finder claims {name!r}, which analysis/rules/registry.py does not list")

    def claim(function: Callable[..., DataFrame]) -> Callable[..., DataFrame]:
        held = CLAIMS.get(anomaly)
        if held is not None and _where(held.function) != _where(function):  # the same one re-imported is no second claim
            raise ClaimError(f"{name!r} is claimed twice: by {_where(held.function)} and by {_where(function)}")
        CLAIMS[anomaly] = Finder(anomaly, function, pairs)
        return function

    return claim


def _where(function: Callable[..., Any]) -> str:
    return f"{function.__module__}.{function.__qualname__}"
