"""The scheduler protocol (nemesis/schedule.py): the fault phase asks a scheduler for each
package's next event. The seeded random schedule and the replay are two schedulers; any object
with `planned()` and `next(package, now_s, observer)` drives a FaultRunner the same way."""

from __future__ import annotations

import random
import time

from nemesis.runner import FaultRunner
from nemesis.schedule import EventList, FaultEvent, build_schedule, random_schedule, replay_schedule
from tests.test_registry import ToyNemesis


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []

    def nemesis(self, f: str, value: dict) -> None:
        self.seen.append((f, value))


class EveryTenthOfASecond:
    """A scheduler that decides as it goes: a start then a stop, 0.1 s after whenever it is asked,
    three events in all; it sees the run's observer each time."""

    name = "test"

    def __init__(self) -> None:
        self.asked: list[tuple[str, float, object]] = []

    def planned(self) -> list[FaultEvent]:
        return []

    def next(self, package, now_s, observer):  # type: ignore[no-untyped-def]
        self.asked.append((package, now_s, observer))
        if len(self.asked) > 3:
            return None
        return FaultEvent(round(now_s + 0.1, 3), package, "start" if len(self.asked) % 2 else "stop", {"level": "high"})


def test_a_scheduler_decides_each_next_event_and_the_runner_carries_it_out():
    scheduler, events = EveryTenthOfASecond(), Events()
    faults = FaultRunner({"toy": ToyNemesis(("low",))}, 10, seed=1, scheduler=scheduler)
    faults.setup(object(), events)  # type: ignore[arg-type]  # the toy touches no cluster
    with faults:
        faults.start()
        deadline = time.monotonic() + 10
        while len(faults.executed) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert [e.action for e in faults.executed] == ["start", "stop", "start"]
    assert [f for f, _ in events.seen] == ["start-toy", "stop-toy", "start-toy"]
    assert all(v["level"] == "high" for _, v in events.seen)  # the scheduler's params reach the nemesis
    assert {id(o) for _, _, o in scheduler.asked} == {id(faults.observer)}  # one observer, the run's
    times = [e.at_s for e in faults.executed]
    assert times == sorted(times) and all(b - a >= 0.09 for a, b in zip(times, times[1:]))


def test_the_random_and_replay_schedulers_hand_out_their_events_per_package_in_time_order():
    planned = build_schedule(["kill", "partition"], 60, 10, seed=4)
    drawn = random_schedule(["kill", "partition"], 60, 10, seed=4)
    assert drawn.planned() == planned
    kills = []
    while (event := drawn.next("kill", 0.0, None)) is not None:
        kills.append(event)
    assert kills == [e for e in planned if e.package == "kill"] and drawn.next("partition", 0.0, None) == planned[
        [e.package for e in planned].index("partition")]
    replay = replay_schedule(list(reversed(planned)))
    assert replay.planned() == planned and replay.name == "replay"


def test_a_start_is_planned_apart_from_acting_and_a_replay_applies_the_recorded_plan():
    """kill's plan decides its target from one look and touches nothing; apply acts. A replay's
    recorded plan is applied as it is, on another cluster whose roles differ."""
    from nemesis.process import KillNemesis
    from tests.test_nemesis_flap import Cluster

    events, cluster = Events(), Cluster()
    kill = KillNemesis(("leader",)).setup(cluster, events, "queue")  # type: ignore[arg-type]
    plan = kill.plan({}, random.Random(2))
    assert plan["target"] == "leader" and plan["targets"] == [cluster.leaders[int(plan["partition"].rsplit("-", 1)[1])]]
    assert cluster.hits == [] and events.seen == []  # deciding did nothing
    value = kill.apply(plan)
    assert cluster.hits == [("kill", plan["targets"][0])] and [f for f, _ in events.seen] == ["kill"]
    assert value["targets"] == plan["targets"] and f"leader:{plan['partition']}" in value["roles"][str(plan["targets"][0])]
    other, again = Cluster(leaders={0: 3, 1: 3, 2: 3}), Events()
    replay = KillNemesis(("leader",)).setup(other, again, "queue")  # type: ignore[arg-type]
    replayed = replay.invoke("start", kill.replay_params(value), random.Random(99))
    assert replayed["targets"] == value["targets"] and replayed["replay"] == "recorded targets"



def test_a_package_that_asks_late_keeps_its_drawn_gaps_and_a_replay_never_moves() -> None:
    """An operation that outran its package's next events (a rolling upgrade of 115 s) used to
    leave them all overdue, to fire back to back; the random schedule now moves them by the delay."""
    events = [FaultEvent(1.0, "roll", "start"), FaultEvent(11.0, "roll", "stop"), FaultEvent(21.0, "roll", "start"),
              FaultEvent(5.0, "kill", "start")]
    assert random_schedule(["roll"], 60.0, 10.0, 1).keep_gaps
    sched = EventList("random", events, keep_gaps=True)
    assert sched.next("roll", 0.0).at_s == 1.0
    late = sched.next("roll", 40.0)  # the roll took until 40 s: its stop is 29 s late
    assert (late.action, late.at_s) == ("stop", 40.0)
    assert sched.next("roll", 40.1).at_s == 50.0  # the drawn 10 s gap kept
    assert sched.next("roll", 50.0) is None
    assert sched.next("kill", 5.2).at_s == 5.0  # another package is not moved, nor is a slight delay
    replay = replay_schedule(events)
    assert [replay.next("roll", t).at_s for t in (0.0, 40.0, 40.1)] == [1.0, 11.0, 21.0]


def test_a_moved_event_past_the_time_limit_is_dropped() -> None:
    """Moved past the limit the schedule was drawn for, an event would strike only if the workload
    outlasted its limit, and so not in the replay (CI: 6 starts in a run, 4 in its replay)."""
    events = [FaultEvent(1.0, "kill", "start"), FaultEvent(5.0, "kill", "stop"), FaultEvent(9.0, "kill", "start"),
              FaultEvent(13.0, "kill", "stop"), FaultEvent(3.0, "partition", "start")]
    sched = EventList("random", events, keep_gaps=True, horizon_s=16.0)
    assert sched.next("kill", 0.0).at_s == 1.0
    assert sched.next("kill", 8.0).at_s == 8.0  # 3 s late: 9 s moves to 12 s, 13 s to 16 s, both kept
    assert [sched.next("kill", t).at_s for t in (8.1, 12.5)] == [12.0, 16.0]
    again = EventList("random", events, keep_gaps=True, horizon_s=16.0)
    again.next("kill", 0.0)
    assert again.next("kill", 10.0).at_s == 10.0  # 5 s late: 9 s moves to 14 s, kept; 13 s to 18 s, dropped
    assert again.next("kill", 10.1).at_s == 14.0 and again.next("kill", 14.0) is None
    late = EventList("random", events, keep_gaps=True, horizon_s=16.0)
    late.next("kill", 0.0)
    assert late.next("kill", 17.0) is None and late.next("kill", 17.1) is None  # asked past the limit: nothing left
    assert late.next("partition", 3.0).at_s == 3.0  # another package is not touched
    slightly = EventList("random", [FaultEvent(15.9, "kill", "start"), FaultEvent(15.95, "partition", "start")],
                         keep_gaps=True, horizon_s=16.0)
    assert slightly.next("kill", 16.2) is None  # 0.3 s late, under LATE_S, but past the limit (CI: 24.15 s of 24)
    assert slightly.next("partition", 15.96).at_s == 15.95  # asked within the limit: handed out
