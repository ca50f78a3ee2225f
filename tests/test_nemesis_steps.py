"""The shared steps (nemesis/steps.py) and the kill sequences' plans (nemesis/sequence.py), without
Docker, on test_nemesis_flap's stand-in cluster: a plan touches nothing and draws every coin and
delay; its later steps name a role, which apply resolves; a replay's plan names the brokers the
original resolved; and the scenarios and the nemeses act through the same steps."""

from __future__ import annotations

import random
import time

import pytest

from harness.cluster.broker_config import INTERNAL_PORT
from harness.history.faults import KILL
from nemesis import steps
from nemesis.flap import FlapNemesis, RejoinNemesis
from nemesis.heir import HeirNemesis
from tests.test_nemesis_flap import Cluster, Events, fast
from tests.test_nemesis_transfer import Stand, stand  # noqa: F401 (a fixture)
from tests.test_nemesis_transfer import nemesis as transfer_nemesis


def sequences(cluster: Cluster, events: Events) -> dict:
    made = {"flap": FlapNemesis(window_s=1.0, max_delay_s=0.01),
            "rejoin": RejoinNemesis(max_after_s=0.01, down_range_s=(0.0, 0.01), up_range_s=(0.0, 0.01)),
            "heir": HeirNemesis(gap_range_s=(0.0, 0.01), down_range_s=(0.0, 0.01))}
    return {name: fast(n, cluster).setup(cluster, events, "queue") for name, n in made.items()}  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["flap", "rejoin", "heir"])
def test_a_plan_touches_nothing_and_the_same_seed_plans_the_same(name):
    plans = []
    for _ in range(2):
        cluster, events = Cluster(), Events()
        plans.append(sequences(cluster, events)[name].plan({}, random.Random(5)))
        assert cluster.hits == [] and events == []
    assert plans[0] == plans[1] and plans[0]["targets"]


def test_a_later_step_is_planned_by_its_role_and_apply_records_whom_it_found():
    cluster, events = Cluster(), Events()
    flap = sequences(cluster, events)["flap"]
    plan = flap.plan({"restart_first": False}, random.Random(2))
    assert plan["then"]["who"] == "new-leader" and 0 <= plan["then"]["wait_s"] <= 0.01 and len(plan["targets"]) == 1
    value = flap.apply(plan)
    partition = int(plan["partition"].rsplit("-", 1)[1])
    second = cluster.leaders[partition]  # the stand-in elected it after the first kill
    assert value["targets"] == plan["targets"] + [second]
    kills = [v for f, v in events if f == KILL.start]
    assert kills[1]["target"] == "new-leader" and kills[1]["targets"] == [second]
    # The replay's plan names the broker that apply found, and when it struck: no role left to resolve.
    again = sequences(Cluster(), Events())["flap"].plan(flap.replay_params(value), random.Random(0))
    assert again["then"] == {"who": second, "after_s": value["after_s"]} and again["replay"] == "recorded targets"


def test_rejoin_plans_its_rounds_and_names_the_leader_by_role():
    cluster, events = Cluster(), Events()
    rejoin = sequences(cluster, events)["rejoin"]
    plan = rejoin.plan({}, random.Random(4))
    assert plan["then"]["who"] == "leader" and len(plan["up_s"]) == len(plan["down_s"]) - 1
    value = rejoin.apply(plan)
    again = sequences(Cluster(), Events())["rejoin"].plan(rejoin.replay_params(value), random.Random(0))
    # after_s as struck: the seeded delay, and the look for the leader after it
    assert again["then"] == {"who": value["targets"][1], "after_s": value["after_s"]} and value["after_s"] >= plan["then"]["after_s"]
    assert (again["down_s"], again["up_s"]) == (plan["down_s"], plan["up_s"])


def test_a_transfer_plans_its_pair_and_coins_and_its_value_keeps_the_election_s_answer(stand):
    events = Events()
    trans = transfer_nemesis(stand, events, old_second_probability=1.0, cut_probability=1.0, kill_probability=1.0)
    plan = trans.plan({}, random.Random(4))
    assert stand.cuts == [] and stand.hits == [] and events == []  # the plan touched nothing
    assert plan["old_second"] is plan["cut"] is True and 0 <= plan["kill_after_s"] <= 0.01
    value = trans.apply(plan)
    assert value["elected"] is True and value["answer"] and value["leader"] == plan["targets"][1]
    assert value["next_leader"] == plan["targets"][0] and value["targets"] == plan["targets"]
    again = transfer_nemesis(Stand(), Events()).plan(trans.replay_params(value), random.Random(0))
    assert {k: again[k] for k in ("targets", "partition", "old_second", "cut", "kill_after_s")} == \
        {k: plan[k] for k in ("targets", "partition", "old_second", "cut", "kill_after_s")}


def test_a_replay_whose_brokers_are_gone_chooses_afresh_and_says_so():
    cluster, events = Cluster(), Events()
    value = sequences(cluster, events)["heir"].invoke("start", {"targets": [7, 1], "gap_s": 0.0, "down_s": 0.0}, random.Random(1))
    assert value["targets"] == [1, 2] and "[7] do not exist" in value["replay"]


def test_poll_looks_at_least_once_and_is_bounded_in_tries_and_time():
    seen = []
    late = steps.poll(lambda: seen.append(1) or len(seen), lambda n: n >= 1, 1.0, 0.01, since=time.monotonic() - 5)
    assert late.ok and seen == [1]  # the time was up before it began: one look all the same
    seen.clear()
    bounded = steps.poll(lambda: seen.append(1) or len(seen), lambda n: False, 0.05, 0.01)
    assert not bounded.ok and bounded.value == len(seen) <= 0.05 / 0.01 + 2
    # `due`: a probe as slow as the last one would end after it, so it is not asked.
    seen.clear()
    slow = lambda: seen.append(time.sleep(0.1)) or len(seen)  # noqa: E731
    began = time.monotonic()
    cut = steps.poll(slow, lambda n: False, 10.0, 0.01, due=began + 0.25)
    assert not cut.ok and len(seen) == 2 and time.monotonic() - began < 0.25  # a third would end at ~0.31 s


def test_wait_leader_names_the_leader_last_seen():
    answers = iter([None, -1, 3, 2])
    polled = steps.wait_leader(lambda: next(answers), lambda leader: leader, 2, 1.0, 0.0)
    assert polled.ok and polled.leader == 2
    polled = steps.wait_leader(lambda: -1, lambda leader: leader, lambda leader: leader >= 0, 0.02, 0.0)
    assert not polled.ok and polled.leader == -1


def test_a_scenario_and_a_nemesis_cut_and_heal_through_the_same_step(monkeypatch):
    from harness.scenarios.context import CUT, ScenarioContext
    from nemesis.transfer import TAG, TransferNemesis

    calls: list = []
    monkeypatch.setattr(steps.net, "drop_from", lambda node, peers, tag, port=None: calls.append(("drop", node.node_id, tag, port)))
    monkeypatch.setattr(steps.net, "heal", lambda node, tag: calls.append(("heal", node.node_id, tag)))
    cluster, events = Cluster(), Events()

    class Recorder(Events):
        def elapsed_ns(self) -> int:
            return 0

    ctx = ScenarioContext.__new__(ScenarioContext)  # the steps only: no topic, no clients
    ctx.cluster, ctx.recorder, ctx.steps, ctx.A, ctx.B, ctx.C, ctx.D = cluster, Recorder(), [], *cluster.brokers, None
    ctx.cut(cluster.node(1), cluster.node(2))
    transfer = TransferNemesis().setup(cluster, events, "queue")  # type: ignore[arg-type]
    transfer.cut(cluster.node(1), cluster.node(2), "queue-0")
    assert calls == [("drop", 1, CUT, None), ("drop", 2, CUT, None), ("drop", 1, TAG, INTERNAL_PORT), ("drop", 2, TAG, INTERNAL_PORT)]
    assert events[-1][1]["grudge"] == {"1": [2], "2": [1]}
    calls.clear()
    ctx.heal()
    transfer.heal()
    assert sorted(calls) == sorted([("heal", i, CUT) for i in (1, 2, 3)] + [("heal", 1, TAG), ("heal", 2, TAG)])
