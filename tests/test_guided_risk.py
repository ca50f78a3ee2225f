"""Design 6's second reward: acknowledged writes at risk (nemesis/guided/state.py AtRisk), seen by
the watch and paid by the scheduler, without a cluster: facts and looks are fed by hand."""

from __future__ import annotations

from nemesis.guided.loglines import Fact, classify, elected
from nemesis.guided.scheduler import GuidedScheduler
from nemesis.guided.state import AtRisk
from nemesis.guided.watch import StateWatch

NEMESES = {"kill": type("K", (), {"targets": ("one", "leader")})()}
# Real 0.10.2.2 lines (run 20261127T232258-e1ea20, seed 2 of design 4's quiet sweep, the run whose
# queue-3 diverged at offset 209): broker 3 truncated queue-3 to 209 at 23:23:18.2 and the
# controller elected it, alone in the ISR, 5.8 s later.
TRUNCATION = "[2026-11-27 23:23:18,246] INFO Truncating log queue-3 to offset 209. (kafka.log.Log)"
ELECTION = ('[2026-11-27 23:23:24,081] INFO [OfflinePartitionLeaderSelector]: Selected new leader and ISR {"leader":3,'
            '"leader_epoch":2,"isr":[3]} for offline partition [queue,3] (kafka.controller.OfflinePartitionLeaderSelector)')


def test_the_elected_broker_is_read_from_each_version_s_leader_line() -> None:
    assert elected(ELECTION, Fact("leader", 3, 1)) == 3  # the controller's log names it
    kraft = ("[2026-11-25T19:03:27,659] INFO [Broker id=1] Leader queue-5 with topic id Some(ikw7Pg2SRaaMKzEU04dSZg) starts at "
             "leader epoch 0 from offset 0 with partition epoch 0, high watermark 0, ISR [1,3,2] (state.change.logger)")
    assert elected(kraft, Fact("leader", 5, 1)) == 1
    old = "[2026-11-25 00:05:31,337] INFO [Partition queue-1 broker=3] queue-1 starts at Leader Epoch 2 from offset 581. (kafka.cluster.Partition)"
    assert elected(old, Fact("leader", 1, 3)) == 3


def test_an_election_just_after_the_new_leader_truncated_while_writes_were_acknowledged_puts_them_at_risk() -> None:
    risk = AtRisk()
    risk.add([], {3: 12}, 92.0)  # seed 2's lost write was acknowledged 8.0 s before the truncation
    fact = classify(TRUNCATION, "queue", broker=3)
    assert fact == Fact("truncate", 3, 3)
    risk.add([fact], {}, 100.0)  # no ack since the truncation: seed 2's queue-3 had none either
    assert risk.elected(3, 3, 105.8) is True
    assert risk.events == [(3, 3)]


def test_no_risk_without_each_of_its_parts() -> None:
    risk = AtRisk()
    risk.add([Fact("truncate", 3, 3)], {3: 5}, 100.0)
    assert risk.elected(3, 2, 102.0) is False  # another broker is elected: its log was not cut
    assert risk.elected(4, 3, 102.0) is False  # another partition
    assert risk.elected(3, 3, 108.5) is False  # later than 8 s: design 4's runs that did not diverge
    risk = AtRisk()
    risk.add([Fact("truncate-hw", 3, 3)], {4: 9, 3: 0}, 100.0)  # nothing acknowledged to queue-3: nothing to lose
    assert risk.elected(3, 3, 101.0) is False
    assert risk.events == []


def test_the_watch_reads_risks_from_the_logs_and_hands_them_to_the_scheduler_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    class Broker:
        def __init__(self, node_id: int) -> None:
            self.node_id, self.text = node_id, ""

        def read_log(self, offset: int, name: str) -> tuple[str, int]:
            return self.text[offset:], len(self.text)

    controller, follower = Broker(1), Broker(3)
    history = tmp_path / "history.jsonl"
    history.write_text("")
    recorder = type("R", (), {"path": history, "nemesis": lambda self, *a: None})()
    watch = StateWatch(type("C", (), {"brokers": [controller, follower]})(), recorder, "queue", looker=lambda: None)
    for _, tail in watch._tails:
        tail.start_at_end()
    watch._acks.start_at_end()  # type: ignore[union-attr]
    with open(history, "a") as f:
        f.write('{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":{"key":3,"value":7,"offset":208,"epoch":null}}\n')
    watch.tick()
    follower.text += TRUNCATION + "\n"
    watch.tick()
    controller.text += ELECTION + "\n"
    watch.tick()
    watch.tick()  # nothing new: no second risk
    assert watch.take_risky() == 1 and watch.take_risky() == 0
    summary = watch.summary()
    assert summary["writes_at_risk_count"] == 1 and summary["writes_at_risk"] == [{"partition": "queue-3", "leader": 3}]


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


def test_the_report_names_the_writes_at_risk_and_says_nothing_for_runs_before_them(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from analysis.report.page import _facts

    observed = {"ticks": 119, "distinct_states": 110, "distinct_transitions": 132, "log_facts": {"truncate": 60},
                "writes_at_risk_count": 1, "writes_at_risk": [{"partition": "queue-3", "leader": 3}]}
    facts = dict(_facts(tmp_path, {"nemesis_config": {"scheduler": "guided", "observed": observed}}, None, None))
    assert facts["writes at risk"] == ("1 time(s) a broker was elected leader at most 8 s after it truncated that "
                                       "partition: queue-3 (leader 3)")
    del observed["writes_at_risk_count"], observed["writes_at_risk"]
    assert "writes at risk" not in dict(_facts(tmp_path, {"nemesis_config": {"observed": observed}}, None, None))
