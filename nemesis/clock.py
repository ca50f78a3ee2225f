"""Wall-clock skew per broker through libfaketime.

Each broker JVM was started with LD_PRELOAD=libfaketime reading
`brokers/<id>/clock/offset`; rewriting that file shifts the JVM's wall clock
within about a second (FAKETIME_CACHE_DURATION=1). The monotonic clock is
left alone, so timeouts keep working while timestamps, retention and
LogAppendTime see the skew.
- `bump`: add an offset between 100 ms and 5 minutes, either sign, to some brokers.
- `strobe`: flip some brokers between their offset and zero every second, for a while.
- `reset`: every offset back to zero.
"""

from __future__ import annotations

import math
import random
import threading
from typing import Any

from harness.history.faults import CLOCK_BUMP, CLOCK_STROBE
from nemesis.base import Nemesis
from nemesis.registry import Package
from nemesis.targets import choose_nodes

MODES = ("bump", "strobe")


def offset_spec(ms: int) -> str:
    """libfaketime's relative offset for `ms` milliseconds, e.g. "+1.250" or "-300.000"."""
    return f"{'+' if ms >= 0 else '-'}{abs(ms) / 1000:.3f}"


def random_offset_ms(rng: random.Random, low_ms: int = 100, high_ms: int = 300_000) -> int:
    """Log-uniform magnitude between low and high, random sign: small skews as likely as large ones."""
    magnitude = math.exp(rng.uniform(math.log(low_ms), math.log(high_ms)))
    return int(magnitude) * rng.choice((-1, 1))


class ClockNemesis(Nemesis):

    option_names = ("modes", "strobe_period_s", "strobe_duration_s")
    name, faults = "clock", (CLOCK_BUMP, CLOCK_STROBE)
    replay_keys = ("mode", "targets", "offsets_ms")

    def __init__(self, modes: tuple[str, ...] = MODES, strobe_period_s: float = 1.0, strobe_duration_s: float = 10.0) -> None:
        super().__init__()
        self.modes = modes
        self.strobe_period_s, self.strobe_duration_s = strobe_period_s, strobe_duration_s
        self.offsets: dict[int, int] = {}  # node id -> ms applied now
        self._strobe_stop = threading.Event()
        self._strobe: threading.Thread | None = None

    def shift(self, node_id: int, ms: int) -> None:
        assert self.cluster is not None
        self.cluster.node(node_id).set_clock_offset(offset_spec(ms))
        self.offsets[node_id] = ms

    def plan(self, params: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        """The mode, the brokers and each one's offset: the recorded ones on replay, else drawn."""
        assert self.cluster is not None
        mode = params.get("mode") or rng.choice(self.modes)
        self.look()
        nodes, note = self.replay_nodes(params)
        recorded = params.get("offsets_ms") or {}
        if nodes is None:
            nodes = choose_nodes(self.cluster, rng.choice(("one", "minority", "all")), rng, self.topic)
        offsets = {str(n.node_id): int(recorded.get(str(n.node_id)) or params.get("ms") or random_offset_ms(rng)) for n in nodes}
        return {"mode": mode, "targets": [n.node_id for n in nodes], "offsets_ms": offsets,
                **({"replay": note} if note is not None else {})}

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        mode, nodes = plan["mode"], [self.cluster.node(i) for i in plan["targets"]]
        planned = {int(k): int(v) for k, v in plan["offsets_ms"].items()}
        for node_id, ms in planned.items():
            self.shift(node_id, ms)
        if mode == "strobe":
            self._start_strobe(planned)
        value = {"mode": mode, "targets": sorted(planned), "roles": self.roles(nodes), "offsets_ms": {str(k): v for k, v in planned.items()}}
        if plan.get("replay") is not None:
            value["replay"] = plan["replay"]
        if mode == "strobe":
            value.update(period_s=self.strobe_period_s, duration_s=self.strobe_duration_s)
        self.record((CLOCK_STROBE if mode == "strobe" else CLOCK_BUMP).start, value)
        return value

    def _start_strobe(self, planned: dict[int, int]) -> None:
        self._stop_strobe()
        self._strobe_stop.clear()

        def flip() -> None:  # bounded: at most duration/period flips, stops early on reset
            flips = int(self.strobe_duration_s / self.strobe_period_s)
            for i in range(flips):
                if self._strobe_stop.wait(self.strobe_period_s):
                    return
                for node_id, ms in planned.items():
                    self.shift(node_id, 0 if i % 2 == 0 else ms)

        self._strobe = threading.Thread(target=flip, name="clock-strobe", daemon=True)
        self._strobe.start()

    def _stop_strobe(self) -> None:
        self._strobe_stop.set()
        if self._strobe is not None:
            self._strobe.join(timeout=5)
            self._strobe = None

    def teardown(self) -> dict[str, Any]:
        self._stop_strobe()
        for node in self.nodes:
            node.set_clock_offset("+0")
        value = {"reset": {str(k): 0 for k in sorted(self.offsets)}, "were_ms": {str(k): v for k, v in sorted(self.offsets.items())}}
        self.offsets.clear()
        self.record(CLOCK_BUMP.stop, value)
        return value


PACKAGES = (Package("clock", make=lambda s: ClockNemesis(), heal_rank=90, requires=frozenset({"faketime"}),
                    summary="skew brokers' wall clocks (bump or strobe); reset on stop"),)
