"""Every registry entry and the finder that claimed it (analysis/checking/claims.py): importing
this module imports every finder module, and fails loudly when an entry has no finder."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

# The finder modules: importing them makes their claims.
from analysis.checking import anomalies, cycles, eos_anomalies, read_order, txn_anomalies  # noqa: F401
from analysis.checking.claims import CLAIMS, ClaimError, Finder
from analysis.rules.registry import BY_NAME, REGISTRY, Anomaly

MODULES = (anomalies, read_order, txn_anomalies, cycles, eos_anomalies)


def _complete() -> Mapping[Anomaly, Finder]:
    unclaimed = [a.name for a in REGISTRY if a not in CLAIMS]
    if unclaimed:
        raise ClaimError(f"no finder claims {', '.join(unclaimed)}: mark the function that finds each with "
                         f"@finds(NAME) (analysis/checking/claims.py) in one of {', '.join(m.__name__ for m in MODULES)}")
    return MappingProxyType({a: CLAIMS[a] for a in REGISTRY})  # in the registry's order


FINDERS: Mapping[Anomaly, Finder] = _complete()


class Findings(dict):
    """Each anomaly's finding frame, built on first use. A finder's frame is lazy, but building it
    is not free on a classic session (every step is analysed as it is written): a history without
    txns never counts the ten txns-only anomalies, and building them took 0.9 s of a warm check of
    a 30 s run's 87,243 events (2026-12-02, embedded; on Spark Connect a frame is built on the client)."""

    def __init__(self, d: object, pairs: object) -> None:
        super().__init__()
        self._d, self._pairs = d, pairs

    def __missing__(self, name: str):
        frame = self[name] = FINDERS[BY_NAME[name]](self._d, self._pairs)
        return frame
