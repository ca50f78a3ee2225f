"""A replayed fault strikes at its recorded moment even when its look of the roles is slow: the
look begins after the package's previous event, and one that is not back by the moment (plus a
grace) gives way to an empty one, recorded as `roles_unseen`. Without Docker: a stand-in cluster
whose metadata answers late, as a just-killed broker's does (3 s, the views' timeout)."""

from __future__ import annotations

import time

from harness.cluster.metadata_views import BrokerView
from harness.history.faults import KILL
from nemesis.process import KillNemesis
from nemesis.runner import LOOK_GRACE_S, FaultRunner
from nemesis.schedule import FaultEvent
from tests.test_nemesis_flap import Cluster, Events


class SlowCluster(Cluster):
    answer_s = 0.0

    def broker_views(self) -> dict[int, BrokerView]:
        time.sleep(self.answer_s)
        return super().broker_views()


def replay_one_kill(answer_s: float) -> tuple[FaultRunner, Events, float]:
    cluster, events = SlowCluster(), Events()
    cluster.answer_s = answer_s
    schedule = [FaultEvent(0.3, "kill", "start", {"target": "leader", "targets": [2]})]
    runner = FaultRunner({"kill": KillNemesis()}, time_limit_s=5, interval_s=5, schedule=schedule)
    runner.setup(cluster, events, "queue")  # type: ignore[arg-type]
    with runner:
        runner.start()
        deadline = time.monotonic() + 5
        while not runner.executed and time.monotonic() < deadline:
            time.sleep(0.02)
    return runner, events, runner.executed[0].at_s


def test_a_replay_whose_look_is_slow_strikes_on_time_and_says_the_roles_went_unseen():
    runner, events, at_s = replay_one_kill(answer_s=2.0)
    assert 0.3 <= at_s <= 0.3 + LOOK_GRACE_S + 0.2, at_s  # not 2 s late
    (f, value), = events
    assert f == KILL.start and value["targets"] == [2] and value["replay"] == "recorded targets"
    assert value["roles"] == {"2": []}
    assert "not back at the recorded moment" in value["roles_unseen"], value


def test_a_replay_whose_look_is_back_in_time_records_the_roles_as_seen():
    runner, events, at_s = replay_one_kill(answer_s=0.0)
    assert 0.3 <= at_s <= 0.3 + 0.2, at_s
    (f, value), = events
    assert value["roles"] == {"2": ["leader:queue-1"]}, value
    assert "roles_unseen" not in value
    # The next fault of the same nemesis looks afresh: the stand-in left behind no unseen mark.
    assert runner.nemeses["kill"]._unseen is None
