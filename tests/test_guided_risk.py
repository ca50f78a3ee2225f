"""The guided scheduler's second reward: acknowledged writes at risk (nemesis/guided/risk.py, design
7's rule), seen by the watch and paid by the scheduler, without a cluster: log lines, faults and
acknowledgements are fed by hand."""

from __future__ import annotations

from typing import Any

from nemesis.guided.loglines import Fact, classify, elected, fetch_sources, isr_joined, truncated_to
from nemesis.guided.scheduler import DESIGN, GuidedScheduler
from nemesis.guided.risk import AtRisk, cut
from nemesis.guided.watch import StateWatch
from nemesis.holds import Holds

NEMESES = {"kill": type("K", (), {"targets": ("one", "leader")})()}
# Real 0.10.2.2 lines (run 20261127T232258-e1ea20, seed 2 of design 4's quiet sweep, the run whose
# queue-3 diverged at offset 209): broker 3 truncated queue-3 to 209 at 23:23:18.2, fetching it from
# broker 2, which a kill held down, and the controller elected it, alone in the ISR, 5.8 s later.
TRUNCATION = "[2026-11-27 23:23:18,246] INFO Truncating log queue-3 to offset 209. (kafka.log.Log)"
FETCHER = ("[2026-11-27 23:23:18,254] INFO [ReplicaFetcherManager on broker 3] Added fetcher for partitions List("
           "[__consumer_offsets-22, initOffset 0 to broker BrokerEndPoint(2,kafka-2,9092)] , [queue-3, initOffset 209 to "
           "broker BrokerEndPoint(2,kafka-2,9092)] ) (kafka.server.ReplicaFetcherManager)")
# Real 0.10.2.2 line (run 20261128T021943-8004a9, seed 5 guided of design 6): broker 2 truncated
# queue-5 to 4551 at 02:21:33.9 and was back in the ISR 0.1 s later; its election at 02:21:42 lost nothing.
REJOINED = ("[2026-11-28 02:21:34,041] INFO Partition [queue,5] on broker 1: Expanding ISR for partition queue-5 from "
            "3,1 to 3,1,2 (kafka.cluster.Partition)")
ELECTION = ('[2026-11-27 23:23:24,081] INFO [OfflinePartitionLeaderSelector]: Selected new leader and ISR {"leader":3,'
            '"leader_epoch":2,"isr":[3]} for offline partition [queue,3] (kafka.controller.OfflinePartitionLeaderSelector)')


def test_the_elected_broker_is_read_from_each_version_s_leader_line() -> None:
    assert elected(ELECTION, Fact("leader", 3, 1)) == 3  # the controller's log names it
    kraft = ("[2026-11-25T19:03:27,659] INFO [Broker id=1] Leader queue-5 with topic id Some(ikw7Pg2SRaaMKzEU04dSZg) starts at "
             "leader epoch 0 from offset 0 with partition epoch 0, high watermark 0, ISR [1,3,2] (state.change.logger)")
    assert elected(kraft, Fact("leader", 5, 1)) == 1
    old = "[2026-11-25 00:05:31,337] INFO [Partition queue-1 broker=3] queue-1 starts at Leader Epoch 2 from offset 581. (kafka.cluster.Partition)"
    assert elected(old, Fact("leader", 1, 3)) == 3


def test_the_lines_the_risk_reads() -> None:
    assert fetch_sources(FETCHER, "queue") == {3: 2} and fetch_sources(TRUNCATION, "queue") == {}
    assert truncated_to(TRUNCATION) == 209
    assert truncated_to("[Log partition=queue-5, dir=/d] Truncating to 4551 has no effect as the largest offset") == 4551
    assert truncated_to("Truncating partition queue-3 with TruncationState(offset=77, completed=true) due to leader") == 77
    assert isr_joined(REJOINED) == {2} and isr_joined("Shrinking ISR for partition queue-5 from 3,1,2 to 3,1") == set()


def kip101(risk: AtRisk, held: dict[str, set[int]], acked_top: int = 213) -> None:
    """Seed 2's queue-3: acks up to `acked_top`, broker 3 truncates to 209 fetching from 2, the faults are `held`."""
    risk.acked({3: acked_top})
    risk.truncated(3, 3, 209, 100.0, look_leader=1)
    risk.fetches(3, 3, 2, 100.0)  # 0.10.2.2 names the source just after the truncation: it wins over the look
    risk.look(held, 100.0)


def test_a_follower_elected_after_it_truncated_while_a_fault_kept_it_from_its_leader_puts_acked_writes_at_risk() -> None:
    risk = AtRisk()
    kip101(risk, {"kill": {2}})
    assert risk.elected(3, 3, 105.8) is True
    assert risk.events == [(3, 3)]
    assert risk.elected(3, 3, 106.0) is False  # one risk per truncation


def test_no_risk_without_each_of_its_parts() -> None:
    def election(held: dict[str, set[int]], then: Any = None, at: float = 105.8, who: int = 3, acked_top: int = 213) -> bool:
        risk = AtRisk()
        kip101(risk, held, acked_top)
        if then is not None:
            then(risk)
        return risk.elected(3, who, at)

    assert election({}) is False  # nothing kept it from its leader: it fetched back what was acknowledged
    assert election({"kill": {1}}) is False  # a fault on another broker than the one it fetched from
    back = "Partition [queue,3] on broker 1: Expanding ISR for partition queue-3 from 1 to 1,3 (kafka.cluster.Partition)"
    assert election({"kill": {2}}, lambda r: r.rejoined(3, isr_joined(back))) is False  # back in the ISR: it had fetched
    assert election({"kill": {2}}, acked_top=208) is False  # nothing acknowledged above 209: nothing it lacks
    assert election({"kill": {2}}, at=131.0) is False  # later than 30 s
    assert election({"kill": {2}}, who=2) is False  # another broker: its log was not cut
    late = AtRisk()
    kip101(late, {})
    late.look({"pause": {2}}, 101.5)  # the fault came 1.5 s after the truncation: time enough to fetch
    assert late.elected(3, 3, 105.8) is False
    soon = AtRisk()
    kip101(soon, {})
    soon.look({"pause": {2}}, 100.9)
    assert soon.elected(3, 3, 105.8) is True


def test_a_cut_below_an_acknowledged_offset_is_counted_once_with_its_cutters_before_any_election() -> None:
    risk = AtRisk()
    kip101(risk, {"kill": {2}, "partition": {3}})
    risk.look({"kill": {2}}, 100.5)  # looked at again: the same truncation, no second cut
    assert risk.cuts == [("kill", "partition")] and risk.events == []  # the step before a risk, no risk yet
    for held, acked_top in (({}, 213), ({"kill": {1}}, 213), ({"kill": {2}}, 208)):
        other = AtRisk()
        kip101(other, held, acked_top)  # not cut, or nothing acknowledged above 209
        assert other.cuts == []


def test_a_partition_cuts_only_across_its_sides() -> None:
    assert cut({"partition": {3}}, 3, 2) and cut({"partition": {2}}, 3, 2)
    assert not cut({"partition": {2, 3}}, 3, 2) and not cut({"partition": {1}}, 3, 2)
    assert cut({"pause": {2}}, 3, 2) and not cut({"pause": {3}}, 3, 2)  # a paused follower comes back where it was
    assert not cut({"clock": {2}}, 3, 2)


def test_the_watch_reads_risks_from_the_logs_and_hands_them_to_the_scheduler_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    class Broker:
        def __init__(self, node_id: int) -> None:
            self.node_id, self.text = node_id, ""

        def read_log(self, offset: int, name: str) -> tuple[str, int]:
            return self.text[offset:], len(self.text)

    controller, follower = Broker(1), Broker(3)
    holds = Holds()
    holds.fault("kill", "start", {"targets": [2]})
    history = tmp_path / "history.jsonl"
    history.write_text("")
    recorder = type("R", (), {"path": history, "nemesis": lambda self, *a: None})()
    watch = StateWatch(type("C", (), {"brokers": [controller, follower]})(), recorder, "queue", looker=lambda: None, holds=holds)
    for _, tail in watch._tails:
        tail.start_at_end()
    watch._acks.start_at_end()  # type: ignore[union-attr]
    with open(history, "a") as f:
        f.write('{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":{"key":3,"value":7,"offset":210,"epoch":null}}\n')
    watch.tick()
    follower.text += TRUNCATION + "\n" + FETCHER + "\n"
    watch.tick()
    controller.text += ELECTION + "\n"
    watch.tick()
    watch.tick()  # nothing new: no second risk
    assert watch.take_risky() == [("kill",)] and watch.take_risky() == []  # the packages that cut the follower off
    assert watch.take_cuts() == [("kill",)] and watch.take_cuts() == []  # the cut before it, handed over once
    summary = watch.summary()
    assert summary["writes_at_risk_count"] == 1 and summary["cuts_count"] == 1
    assert summary["writes_at_risk"] == [{"partition": "queue-3", "leader": 3, "cut_by": ["kill"]}]


def test_a_risk_is_worth_half_the_reward_whatever_the_novelty_and_is_credited_to_each_action_once() -> None:
    class Watch:
        def __init__(self, fresh: list[str], risky: int) -> None:
            self.fresh, self.risky = fresh, risky

        def decision_state(self) -> str:
            return "-|isr3|-"

        def take_fresh(self) -> list[str]:
            return self.fresh

        def take_risky(self) -> list:
            return [("kill",)] * self.risky

    s = GuidedScheduler(NEMESES, 120.0, 10.0, 1, version="x")
    s.decide("kill", 0.0, Watch([], 0))
    s.decide("kill", 1.0, Watch([f"s{i}" for i in range(9)], 0))  # n = 9: 0.9 / 2
    s.decide("kill", 2.0, Watch([f"t{i}" for i in range(9)], 2))  # the same novelty and two risks
    s.decide("kill", 3.0, Watch([], 0))
    rewards = [d["reward_of_previous"] for d in s.decisions]
    assert rewards[1:] == [0.45, 0.95, 0.0]
    assert [d["at_risk_since_previous"] for d in s.decisions] == [0, 0, 2, 0]
    assert s.describe()["writes_at_risk"] == 2 and s.describe()["design"] == f"q-learning {DESIGN}"


def test_a_cut_pays_the_action_of_the_package_whose_fault_made_it_and_a_risk_outweighs_it() -> None:
    class Watch:
        def __init__(self, cuts: list[tuple[str, ...]], risky: int = 0) -> None:
            self.cuts, self.risky = cuts, risky

        def decision_state(self) -> str:
            return "-|isr3|-"

        def take_fresh(self) -> list[str]:
            return []

        def take_risky(self) -> list:
            return [("pause",)] * self.risky

        def take_cuts(self) -> list[tuple[str, ...]]:
            return self.cuts

    two = {"kill": NEMESES["kill"], "pause": type("P", (), {"targets": ("leader",)})()}
    s = GuidedScheduler(two, 120.0, 10.0, 1, version="x")
    s.decide("kill", 0.0, Watch([]))
    s.decide("pause", 0.5, Watch([]))
    s.decide("kill", 1.0, Watch([("pause",), ("pause",)]))  # pause's fault made two cuts: none of kill's
    s.decide("pause", 2.0, Watch([]))  # they pay pause's last action, once
    s.decide("pause", 3.0, Watch([("pause", "kill")], risky=1))  # a risk as well: the risk's share, not the cut's
    s.decide("kill", 4.0, Watch([]))  # kill's fault made the last cut too, and the risk came since its action
    got = [(d["package"], d["reward_of_previous"], d["cuts_since_previous"]) for d in s.decisions[2:]]
    assert got == [("kill", 0.0, 0), ("pause", 0.25, 2), ("pause", 0.5, 1), ("kill", 0.5, 1)]
    s.decide("kill", 5.0, Watch([("pause",)]))
    assert s.decisions[-1]["reward_of_previous"] == 0.0  # another package's cut pays nothing


def test_the_report_names_the_writes_at_risk_and_says_nothing_for_runs_before_them(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from analysis.report.page import _facts

    observed = {"ticks": 119, "distinct_states": 110, "distinct_transitions": 132, "log_facts": {"truncate": 60},
                "writes_at_risk_count": 1, "writes_at_risk": [{"partition": "queue-3", "leader": 3}]}
    facts = dict(_facts(tmp_path, {"nemesis_config": {"scheduler": "guided", "observed": observed}}, None, None))
    assert facts["writes at risk"] == ("1 time(s) a broker was elected leader soon after it truncated that partition, cut off "
                                       "from its leader and not back in the ISR, acknowledged writes above its truncation: "
                                       "queue-3 (leader 3)")
    observed["writes_at_risk"] = [{"partition": "queue-3", "leader": 3, "cut_by": ["pause", "partition"]}]
    assert dict(_facts(tmp_path, {"nemesis_config": {"observed": observed}}, None, None))["writes at risk"].endswith(
        "queue-3 (leader 3, cut off by pause+partition)")
    del observed["writes_at_risk_count"], observed["writes_at_risk"]
    assert "writes at risk" not in dict(_facts(tmp_path, {"nemesis_config": {"observed": observed}}, None, None))
