"""Design 6's second reward: acknowledged writes at risk (nemesis/guided/state.py AtRisk), seen by
the watch and paid by the scheduler, without a cluster: facts and looks are fed by hand."""

from __future__ import annotations

from nemesis.guided.loglines import Fact, classify
from nemesis.guided.scheduler import GuidedScheduler
from nemesis.guided.state import AtRisk, Look
from nemesis.guided.watch import StateWatch

NEMESES = {"kill": type("K", (), {"targets": ("one", "leader")})()}
# 0.10.2.2's follower truncation on becoming a follower after a restart (tests/test_observer_loglines.py)
TRUNCATION = "[2026-11-26 01:58:12,511] INFO Truncating log queue-3 to offset 1875. (kafka.log.Log)"


def _look(leader: int) -> Look:
    return Look(leaders={3: leader, 4: 1}, isrs={3: [1, 2, 3], 4: [1, 2, 3]}, controller=1)


def test_a_new_leader_that_just_truncated_while_writes_were_acknowledged_puts_them_at_risk() -> None:
    risk = AtRisk()
    assert risk.look(_look(1), 100.0) == []  # the first look names leaders; nothing changed yet
    fact = classify(TRUNCATION, "queue", broker=2)
    assert fact == Fact("truncate", 3, 2)
    risk.add([fact], {3: 12}, 101.0)
    assert risk.look(_look(2), 103.0) == [(3, 2)]  # broker 2 truncated queue-3 2 s ago and now leads it
    assert risk.look(_look(2), 104.0) == []  # the same election is counted once
    assert risk.events == [(3, 2)]


def test_no_risk_without_each_of_its_three_parts() -> None:
    # another broker truncated: the new leader's log was not cut
    risk = AtRisk()
    risk.look(_look(1), 100.0)
    risk.add([Fact("truncate", 3, 3)], {3: 5}, 101.0)
    assert risk.look(_look(2), 102.0) == []
    # the truncation is older than the window
    risk = AtRisk()
    risk.look(_look(1), 100.0)
    risk.add([Fact("truncate-hw", 3, 2)], {3: 5}, 101.0)
    assert risk.look(_look(2), 107.0) == []
    # no write acknowledged to the partition lately: nothing acknowledged can be lost
    risk = AtRisk()
    risk.look(_look(1), 100.0)
    risk.add([Fact("truncate-epoch", 3, 2)], {4: 5, 3: 0}, 101.0)
    assert risk.look(_look(2), 102.0) == []
    # an unanswered look and a leaderless partition change nothing, and the leader before them is kept
    risk = AtRisk()
    risk.look(_look(1), 100.0)
    risk.add([Fact("truncate", 3, 2)], {3: 5}, 101.0)
    assert risk.look(Look(answered=False), 101.5) == [] and risk.look(_look(-1), 102.0) == []
    assert risk.look(_look(2), 103.0) == [(3, 2)]  # 1 -> none -> 2 is a new leader


def test_the_watch_counts_risks_once_per_look_and_hands_them_to_the_scheduler_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    class Broker:
        node_id = 2

        def __init__(self) -> None:
            self.text = ""

        def read_log(self, offset: int, name: str) -> tuple[str, int]:
            return self.text[offset:], len(self.text)

    broker = Broker()
    history = tmp_path / "history.jsonl"
    history.write_text("")
    recorder = type("R", (), {"path": history, "nemesis": lambda self, *a: None})()
    watch = StateWatch(type("C", (), {"brokers": [broker]})(), recorder, "queue", looker=lambda: None)
    for _, tail in watch._tails:
        tail.start_at_end()
    watch._acks.start_at_end()  # type: ignore[union-attr]
    watch.look = _look(1)
    watch.tick()
    broker.text += TRUNCATION + "\n"
    with open(history, "a") as f:
        f.write('{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":{"key":3,"value":7,"offset":9,"epoch":null}}\n')
    watch.tick()
    watch.look = _look(2)
    watch.tick()
    watch.tick()  # the same look again: not a second risk
    assert watch.take_risky() == 1 and watch.take_risky() == 0
    summary = watch.summary()
    assert summary["writes_at_risk_count"] == 1 and summary["writes_at_risk"] == [{"partition": "queue-3", "leader": 2}]


def test_a_risk_is_worth_half_the_reward_whatever_the_novelty_and_is_credited_to_each_action_once() -> None:
    class Watch:
        def __init__(self, fresh: list[str], risky: int) -> None:
            self.fresh, self.risky = fresh, risky

        def decision_state(self) -> str:
            return "-|isr3|-"

        def take_fresh(self) -> list[str]:
            return self.fresh

        def take_risky(self) -> int:
            return self.risky

    s = GuidedScheduler(NEMESES, 120.0, 10.0, 1, version="x")
    s.decide("kill", 0.0, Watch([], 0))
    s.decide("kill", 1.0, Watch([f"s{i}" for i in range(9)], 0))  # n = 9: 0.9 / 2
    s.decide("kill", 2.0, Watch([f"t{i}" for i in range(9)], 2))  # the same novelty and two risks
    s.decide("kill", 3.0, Watch([], 0))
    rewards = [d["reward_of_previous"] for d in s.decisions]
    assert rewards[1:] == [0.45, 0.95, 0.0]
    assert [d["at_risk_since_previous"] for d in s.decisions] == [0, 0, 2, 0]
    assert s.describe()["writes_at_risk"] == 2 and s.describe()["design"] == "q-learning 6"
