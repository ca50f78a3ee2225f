"""Acknowledged writes at risk: the guided scheduler's second reward (nemesis/guided/scheduler.py),
counted for every watched run, random's too (config.json `nemesis_config.observed.writes_at_risk`).

Design 7's rule (2026-11-28). Writes are at risk when a broker F is elected a partition's leader
at most WINDOW_S after F's own log truncated the partition to offset T, and
- a fault kept F from the leader L it then fetched from (L killed or paused, or F and L on two
  sides of a partition) when the watch read the truncation, or within CUT_AFTER_S after;
- L did not log F's return to the ISR ("Expanding ISR ... to ...,F") between the two: a follower
  put back in the ISR has fetched up to its leader's high watermark, so every acknowledged write;
- some send to the partition was acknowledged at an offset >= T: F's log no longer held it.
That is KIP-101's loss: a follower truncated to its high watermark and was elected before it had
fetched back what its old leader had acknowledged above it.

Why this and not design 6's rule (an election at most 8 s after the new leader's truncation, any
ack on the partition): design 6's fired in runs that diverged and runs that did not at the same
gaps, 3 of 8 runs with a risk diverging and 1 of 12 without. Read offline from 37 runs of 0.10.2.2
(design 4's and 6's measurements and five replays, bench/risk_fetch.py, the runs' broker logs and
histories, replayed through the watch once a second): this rule fired in 13 runs, 7 of which
diverged, and in none of the 24 others; every divergence had it fire on the election of a broker
truncated to the very offset that diverged, 5.8-14.6 s after the truncation. On 20 new runs
(2026-11-28, docs/guided.md "Design 7 against random") it fired live in 8, 1 of which diverged, and
in none of the 12 others: a risk is a precondition of the loss, not the loss (in the one such run
read, nothing was written over the missing offsets before the old leader led again). Offline, L
came from the fetcher line and the faults from the history; live, the watch reads both at its tick
(once a second), so a fault that lands up to a tick after the truncation may count as within
CUT_AFTER_S.
Pure: every call is given `now`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

WINDOW_S = 30.0  # the longest gap from a truncation to the election that lost its writes was 14.6 s
CUT_AFTER_S = 1.0  # a fault that lands this soon after the truncation leaves F no time to fetch
FETCH_LINE_S = 2.0  # 0.10.2.2 names the fetch source just after the truncation, 1.1.1 just before
# Packages whose start keeps a held broker from serving its followers; a partition cuts only
# across its sides (its targets are one side).
DOWN = frozenset({"kill", "pause", "power"})
TRUNCATIONS = frozenset({"truncate", "truncate-hw", "truncate-epoch"})  # loglines kinds that cut a log


@dataclass
class Truncation:
    at: float
    to: int
    leader: int | None  # who the follower then fetches from
    cut: bool = False
    back: bool = False  # put back in the ISR since
    by: tuple[str, ...] = ()  # the packages whose faults cut it (config.json names them with each risk)
    counted: bool = False  # among `cuts` (design 11): once, though an election ends `cut`


def cutters(held: dict[str, set[int]], follower: int, leader: int) -> tuple[str, ...]:
    """The packages whose faults in force (package -> brokers it holds) keep `follower` from `leader`."""
    by = [p for p, nodes in sorted(held.items()) if p in DOWN and leader in nodes]
    side = held.get("partition")
    if side is not None and (follower in side) != (leader in side):
        by.append("partition")
    return tuple(by)


def cut(held: dict[str, set[int]], follower: int, leader: int) -> bool:
    """Did the faults in force (package -> brokers it holds) keep `follower` from `leader`?"""
    return bool(cutters(held, follower, leader))


class AtRisk:
    def __init__(self, window_s: float = WINDOW_S, cut_after_s: float = CUT_AFTER_S) -> None:
        self.window_s, self.cut_after_s = window_s, cut_after_s
        self._truncated: dict[tuple[int, int], Truncation] = {}  # (partition, broker) -> its last truncation
        self._source: dict[tuple[int, int], tuple[int, float]] = {}  # (partition, follower) -> (leader, when read)
        self._acked_top: dict[int, int] = {}  # partition -> the highest offset acknowledged
        self.events: list[tuple[int, int]] = []  # (partition, new leader), in order
        self.causes: list[tuple[str, ...]] = []  # for each event, the packages whose faults cut the follower off
        # Each cut, the step before a risk (a follower truncated below what was acknowledged, kept from
        # its leader by the faults in force): (partition, follower, the leader it was kept from, the
        # packages whose faults cut it). Design 11 pays the packages, design 12 strikes the leader.
        self.cut_sites: list[tuple[int, int, int, tuple[str, ...]]] = []

    @property
    def cuts(self) -> list[tuple[str, ...]]:
        """Each cut as the packages whose faults made it (design 11's credit), in order."""
        return [by for *_, by in self.cut_sites]

    def acked(self, top: dict[int, int]) -> None:
        """The highest offset acknowledged per partition so far (state.py's Acks.top, which only grows)."""
        self._acked_top.update(top)

    def fetches(self, partition: int, follower: int, leader: int, now: float) -> None:
        """A fetcher line: `follower` fetches `partition` from `leader`."""
        self._source[(partition, follower)] = (leader, now)
        t = self._truncated.get((partition, follower))
        if t is not None and now - t.at <= FETCH_LINE_S:
            t.leader = leader

    def truncated(self, partition: int, broker: int, to: int, now: float, look_leader: int | None = None) -> None:
        source = self._source.get((partition, broker))
        leader = source[0] if source is not None and now - source[1] <= FETCH_LINE_S else look_leader
        self._truncated[(partition, broker)] = Truncation(now, to, leader)

    def rejoined(self, partition: int, brokers: Iterable[int]) -> None:
        for b in brokers:
            t = self._truncated.get((partition, b))
            if t is not None:
                t.back = True

    def look(self, held: dict[str, set[int]], now: float) -> None:
        """The faults in force now: a truncation read at most CUT_AFTER_S ago is cut if they cut it;
        a cut below an acknowledged offset is counted (`cuts`) once."""
        for (partition, follower), t in self._truncated.items():
            if not t.cut and t.leader is not None and t.leader != follower and now - t.at <= self.cut_after_s:
                t.by = cutters(held, follower, t.leader)
                t.cut = bool(t.by)
                if t.cut and not t.counted and self._acked_top.get(partition, -1) >= t.to:
                    t.counted = True
                    self.cut_sites.append((partition, follower, t.leader, t.by))

    def elected(self, partition: int, leader: int, now: float) -> bool:
        """A `leader` fact: is this election one that puts acknowledged writes at risk?"""
        t = self._truncated.get((partition, leader))
        if t is None or now - t.at > self.window_s or not t.cut or t.back:
            return False
        if self._acked_top.get(partition, -1) < t.to:
            return False  # nothing acknowledged above the truncation: nothing it lacks
        self.events.append((partition, leader))
        self.causes.append(t.by)
        t.cut = False  # one risk per truncation
        return True
