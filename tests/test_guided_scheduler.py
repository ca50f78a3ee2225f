"""The guided schedule (nemesis/guided/scheduler.py), its abstract states (state.py) and the
store's coverage map (coverage.py), without a cluster: observations are fed by hand."""

from __future__ import annotations

import json
import threading
import time

import pytest

from harness.errors import HarnessError
from nemesis.guided import coverage
from nemesis.guided.loglines import Fact
from nemesis.guided.scheduler import DELAY_RANGE, OPTIMISM, GuidedScheduler, refuse_recipes
from nemesis.guided.state import Abstraction, Acks, Look, Seen, decision_state


class _Nemesis:
    def __init__(self, **attrs) -> None:  # type: ignore[no-untyped-def]
        self.__dict__.update(attrs)


NEMESES = {"kill": _Nemesis(targets=("one", "leader", "controller")), "partition": _Nemesis(shapes=("one", "halves")),
           "pause": _Nemesis(targets=("leader",))}


class _Watch:
    """A StateWatch stand-in: each decision sees the next scripted (state, fresh items)."""

    def __init__(self, script: list[tuple[str, list[str]]]) -> None:
        self.script, self.i, self.ticks = script, 0, 1

    def decision_state(self) -> str:
        return self.script[min(self.i, len(self.script) - 1)][0]

    def take_fresh(self) -> list[str]:
        fresh = self.script[min(self.i, len(self.script) - 1)][1]
        self.i += 1
        return fresh

    def snapshot(self):  # type: ignore[no-untyped-def]
        return {"-|L:ok|isr3|-|w": 5, "kill|L:hit|isr2|trunc-hw|w0": 1}, {"-|L:ok|isr3|-|w -> kill|L:hit|isr2|trunc-hw|w0": 1}


SCRIPT = [("-|isr3|-", []), ("kill|isr2|leader-hit|-", ["a", "b"]), ("kill|isr2|trunc", ["c"]), ("-|isr3|-", []),
          ("pause|isr2|-", ["d"]), ("-|isr3|-", [])] * 3


def _decisions(seed: int, path=None) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    s = GuidedScheduler(NEMESES, 120.0, 10.0, seed, coverage_path=path, version="0.10.2.2")
    watch = _Watch(SCRIPT)
    out = []
    packages = sorted(NEMESES)
    for i in range(len(SCRIPT)):
        event = s.decide(packages[i % len(packages)], float(i * 5), watch)
        out.append((event.package, event.action, json.dumps(event.params)))
    return out


def test_the_same_seed_and_observations_give_the_same_choices() -> None:
    assert _decisions(7) == _decisions(7)


def test_another_seed_chooses_otherwise() -> None:
    assert _decisions(7) != _decisions(8)


def test_every_choice_is_recorded_with_its_state_and_the_reward_of_the_one_before() -> None:
    s = GuidedScheduler(NEMESES, 120.0, 10.0, 3, version="x")
    watch = _Watch(SCRIPT)
    for i in range(4):
        s.decide("kill", float(i), watch)
    d = s.describe()["decisions"]
    assert [x["state"] for x in d] == [SCRIPT[i][0] for i in range(4)]
    # two items no earlier run saw, 1/sqrt(1) each: n = 2; no write at risk: r = (n/(1+n) + 0) / 2
    assert d[1]["reward_of_previous"] == round(2 / 3 / 2, 4)
    assert all(x["package"] == "kill" for x in d)
    assert all(x["action"].split(":")[0] in ("start", "stop") for x in d)


def test_untried_actions_come_first_and_rewarded_ones_are_valued() -> None:
    """Optimism: every action is tried somewhere before any is repeated (EPSILON aside)."""
    s = GuidedScheduler({"kill": _Nemesis(targets=("one", "leader", "controller"))}, 1e9, 10.0, 1, version="x")
    watch = _Watch([("one-state", [])])
    tried = []
    for i in range(3):
        s.decide("kill", float(i), watch)
        s.held["kill"] = []  # keep every start available
        tried.append(s.decisions[-1]["action"])
    explored = [d for d in s.decisions if d["why"] == "explore"]
    assert len(set(tried)) >= len(tried) - len(explored)


def test_an_action_untried_in_a_state_is_worth_what_it_was_worth_elsewhere() -> None:
    """Design 10: in a state it has not been tried in, an action is valued at its mean over the
    states where it was, so a run exploits what it learned instead of trying every action of every
    new state first; an action tried nowhere is still worth OPTIMISM."""
    s = GuidedScheduler({"kill": _Nemesis(targets=("one", "leader"))}, 1e9, 10.0, 4, version="x")
    s.q = {"a": {"start:kill:leader": 1.2, "start:kill:one": 0.2}, "b": {"start:kill:leader": 0.8}}
    assert s.value("new", "start:kill:leader") == 1.0
    assert s.value("new", "start:kill:one") == 0.2
    assert s.value("a", "start:kill:one") == 0.2
    assert s.value("new", "stop:kill") == OPTIMISM
    s.decide("kill", 0.0, _Watch([("new", [])]))
    assert s.decisions[0]["action"] == "start:kill:leader" or s.decisions[0]["why"] == "explore"


def test_the_delay_is_drawn_as_the_random_schedule_s_gaps() -> None:
    s = GuidedScheduler({"kill": _Nemesis(targets=("one",))}, 1e9, 10.0, 6, version="x")
    watch = _Watch([("s", [])])
    for i in range(40):
        s.decide("kill", float(i), watch)
    delays = [d["delay_x_interval"] for d in s.decisions]
    assert all(DELAY_RANGE[0] <= x <= DELAY_RANGE[1] for x in delays)
    assert len(set(delays)) > 20  # drawn, not chosen among a few


def test_a_package_holds_at_most_its_limit_and_an_old_fault_is_stopped() -> None:
    s = GuidedScheduler({"partition": _Nemesis(shapes=("halves",))}, 1e9, 10.0, 5, version="x")
    watch = _Watch([("s", [])])
    first = s.decide("partition", 0.0, watch)
    assert (first.action, first.params) == ("start", {"shape": "halves"})
    assert all(a.startswith("stop:") for a in s.actions("partition"))  # a package holds one start at most
    late = s.decide("partition", 31.0, watch)  # held more than HOLD_LIMIT × 10 s
    assert late is not None and late.action == "stop" and s.decisions[-1]["why"] == "held too long"


def test_every_package_alternates_start_and_stop_as_random_does() -> None:
    """Design 9: kill and pause too hold one start at a time; a stop makes every start available again."""
    s = GuidedScheduler({"kill": _Nemesis(targets=("one", "leader")), "pause": _Nemesis(targets=("one",))},
                        1e9, 10.0, 3, version="x")
    watch = _Watch([("s", [])])
    for package in ("kill", "pause"):
        kinds = [s.decide(package, float(i), watch).action for i in range(6)]
        assert kinds == ["start", "stop"] * 3, (package, kinds)
        assert all(a.startswith("start:") for a in s.actions(package))


@pytest.mark.parametrize("package", ["heir", "transfer", "flap", "rejoin"])
def test_recipes_are_refused(package: str) -> None:
    with pytest.raises(HarnessError, match="generic fault packages only"):
        refuse_recipes(["kill", package])
    refuse_recipes(["kill", "partition", "pause", "clock", "power", "disk"])


def test_each_package_thread_gets_its_own_events_at_the_random_cadence() -> None:
    """The runner's threads each ask for their package; each decides its own events, the next one
    its chosen delay (0.5-1.5 intervals) after the last."""
    s = GuidedScheduler(NEMESES, 2.0, 0.05, 11, version="x")
    got: dict[str, list[str]] = {p: [] for p in NEMESES}
    began = time.monotonic()

    def run(package: str) -> None:
        while (e := s.next(package, time.monotonic() - began)) is not None:
            assert e.package == package
            got[package].append(e.action)

    threads = [threading.Thread(target=run, args=(p,)) for p in NEMESES]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert sum(map(len, got.values())) == len(s.decisions) > 5
    for p in NEMESES:
        times = [d["at_s"] for d in s.decisions if d["package"] == p]
        assert all(b - a >= 0.5 * 0.05 - 0.01 for a, b in zip(times, times[1:])), times


def test_close_releases_waiting_threads() -> None:
    s = GuidedScheduler(NEMESES, 1e9, 10.0, 1, version="x")
    s._decide_at["kill"] = 1e6  # not due for a long time
    out = []
    t = threading.Thread(target=lambda: out.append(s.next("kill", 0.0)))
    t.start()
    time.sleep(0.2)
    s.close()
    t.join(2)
    assert not t.is_alive() and out == [None]


def test_the_coverage_map_grows_across_runs_and_feeds_the_next_runs_rewards(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = coverage.path_in(tmp_path)
    first = GuidedScheduler(NEMESES, 120.0, 10.0, 1, coverage_path=path, version="0.10.2.2")
    first.decide("kill", 0.0, _Watch([("s", ["x"])]))
    first.decide("kill", 1.0, _Watch([("s", ["x"])]))
    first.finish(type("O", (), {"watch": _Watch(SCRIPT)})())
    assert first.saved is not None and first.saved["new_states"] == 2 and first.saved["runs_before"] == 0
    entry = coverage.read(path, "0.10.2.2")
    assert entry.runs == 1 and entry.states["-|L:ok|isr3|-|w"] == 5 and entry.q
    second = GuidedScheduler(NEMESES, 120.0, 10.0, 1, coverage_path=path, version="0.10.2.2")
    second.finish(type("O", (), {"watch": _Watch(SCRIPT)})())
    entry = coverage.read(path, "0.10.2.2")
    assert entry.runs == 2 and entry.states["-|L:ok|isr3|-|w"] == 10 and second.saved["new_states"] == 0
    assert coverage.read(path, "4.4.0").runs == 0  # versions are kept apart
    # A state seen by earlier runs is worth less than a new one.
    third = GuidedScheduler(NEMESES, 120.0, 10.0, 1, coverage_path=path, version="0.10.2.2")
    third.decide("kill", 0.0, _Watch([("s", [])]))
    third.decide("kill", 1.0, _Watch([("s", ["-|L:ok|isr3|-|w", "never-seen"])]))
    n = 1 / (1 + 10) ** 0.5 + 1.0
    assert third.decisions[-1]["reward_of_previous"] == round(n / (1 + n) / 2, 4)


def test_no_return_outweighs_an_untried_action_and_another_designs_q_values_are_not_loaded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Design 1's bug: a start that brought 14 new states was worth more than any untried action, and
    a run looped start/stop of one partition for 34 s. Now rewards stay below 1 and an untried action
    is worth 1/(1-GAMMA): after a very rewarding action, the next choice in that state is a new one."""
    from nemesis.guided.scheduler import DESIGN, OPTIMISM

    s = GuidedScheduler({"partition": _Nemesis(shapes=("halves", "one"))}, 1e9, 10.0, 2, version="x")
    s.decide("partition", 0.0, _Watch([("calm", [])]))
    first = s.decisions[-1]["action"]
    s.held["partition"] = []
    s.decide("partition", 1.0, _Watch([("calm", [f"new-{i}" for i in range(14)])]))  # 14 states no run saw
    assert max(s.q["calm"].values()) < OPTIMISM
    assert s.decisions[-1]["action"] != first or s.decisions[-1]["why"] == "explore"
    path = coverage.path_in(tmp_path)
    coverage.add_run(path, "x", {"a": 1}, {}, {"calm": {first: 9.0}}, q_design=DESIGN - 1)
    later = GuidedScheduler({"partition": _Nemesis(shapes=("halves",))}, 1e9, 10.0, 2, coverage_path=path, version="x")
    assert later.q == {} and later.prior.states == {"a": 1}
    coverage.add_run(path, "x", {"a": 1}, {}, {"calm": {first: 0.5}}, q_design=DESIGN)
    entry = coverage.read(path, "x")
    assert entry.q == {"calm": {first: 0.5}} and entry.q_design == DESIGN and entry.states == {"a": 2}


def test_a_file_that_is_not_a_coverage_map_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = coverage.path_in(tmp_path)
    path.write_text('{"something": "else"}')
    with pytest.raises(HarnessError, match="not a coverage map"):
        coverage.read(path, "4.4.0")


def test_partition_states_from_facts_metadata_faults_and_acks() -> None:
    a = Abstraction(range(3))
    look = Look(leaders={0: 1, 1: 3, 2: -1}, isrs={0: [1, 2, 3], 1: [2, 3], 2: []}, controller=1)
    a.add([Fact("truncate-hw", 1, 2), Fact("isr-shrink", 1, 3), Fact("follower", 0, 2)], now=100.0)
    states = a.states(101.0, look, {"kill": 2}, hit={3}, acked={0: 40})
    assert states == {0: "kill×2|L:ctl|isr3|-|w", 1: "kill×2|L:hit|isr2|shrink,trunc-hw|w0", 2: "kill×2|L:none|isr0|-|w0"}
    later = a.states(106.0, look, {}, hit=set(), acked={1: 3})  # the facts are older than the 5 s window
    assert later[1] == "-|L:ok|isr2|-|w"
    a.add([Fact("fenced", None, 1)], now=107.0)  # a cluster-wide fact marks every partition
    assert all("fenced" in s for s in a.states(107.5, look, {}, set(), None).values())
    assert "isr?" in Abstraction([0]).states(0.0, None, {}, set(), None)[0]


def test_seen_counts_distinct_states_and_transitions_and_hands_fresh_ones_once() -> None:
    seen = Seen()
    seen.update({0: "a", 1: "a"})
    assert seen.update({0: "b", 1: "a"}) == {0: ("a", "b")}
    seen.update({0: "a", 1: "a"})
    assert len(seen.states) == 2 and set(seen.transitions) == {"a -> b", "b -> a"}
    assert seen.take_fresh() == ["a", "b", "a -> b", "b -> a"] and seen.take_fresh() == []


def test_the_decision_state_is_coarse() -> None:
    look = Look(leaders={0: 1, 1: -1}, isrs={0: [1, 2, 3], 1: [2]}, controller=1)
    s = decision_state(look, {0: "kill|L:hit|isr3|trunc-hw,restart|w", 1: "kill|L:none|isr1|-|w0"}, {"kill": 1}, {1})
    assert s == "kill|isr1|leaderless|leader-hit|restart,trunc-hw"  # restart since design 4: KIP-101's window opens there


def test_acks_are_counted_per_partition_from_new_history_lines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    h = tmp_path / "history.jsonl"
    h.write_text('{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":{"key":6,"value":0,"offset":0,"epoch":null}}\n')
    acks = Acks(h)
    acks.start_at_end()
    with open(h, "a") as f:
        f.write('{"index":1,"time":2,"process":0,"type":"ok","f":"send","value":{"key":2,"value":1,"offset":0,"epoch":null}}\n'
                '{"index":2,"time":3,"process":0,"type":"invoke","f":"send","value":{"key":2,"value":2}}\n'
                '{"index":3,"time":4,"process":0,"type":"ok","f":"send","value":{"key":2,"val')
    assert acks.read() == {2: 1}
    with open(h, "a") as f:
        f.write('ue":2,"offset":1,"epoch":null}}\n')
    assert acks.read() == {2: 1}


def test_make_faults_builds_the_guided_schedule_and_a_replay_of_it_repeats_the_executed_events(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`run --schedule guided` makes a GuidedScheduler with the store's coverage map and the state
    watch on; a replay of such a run (its config.json) hands back the executed events instead."""
    from harness.history.files import write_json
    from harness.run.settings import make_faults, read_replay, run_config

    config = run_config({"store": str(tmp_path), "nemesis": "kill,partition", "scheduler": "guided", "seed": 4,
                         "kafka_version": "4.4.0"})
    faults = make_faults(config)
    assert faults.scheduler.name == "guided" and faults.observe
    assert faults.scheduler.coverage_path == tmp_path / "guided-coverage.json"
    assert faults.scheduler.version == "4.4.0"
    with pytest.raises(HarnessError, match="generic fault packages only"):
        make_faults(run_config({"store": str(tmp_path), "nemesis": "kill,heir", "scheduler": "guided"}))

    executed = [{"at_s": 3.1, "package": "kill", "action": "start", "params": {"target": "leader", "targets": [2], "partition": "queue-1"}},
                {"at_s": 6.2, "package": "kill", "action": "start", "params": {"target": "leader", "targets": [3], "partition": "queue-4"}},
                {"at_s": 9.0, "package": "kill", "action": "stop", "params": {}}]
    run_dir = tmp_path / "20261126T000000-abcdef"
    run_dir.mkdir()
    record = {"config_format": 2, "seed": 4, "workload": "queue", "kafka_version": "4.4.0", "time_limit_s": 60.0,
              "nemesis": ["kill", "partition"], "profile": {"name": "safe"},
              "nemesis_config": {"packages": ["kill", "partition"], "interval_s": 10.0, "seed": 4, "options": {},
                                 "schedule": executed, "scheduler": "guided", "observed": {"distinct_states": 3}}}
    write_json(run_dir / "config.json", record)
    values = read_replay(run_dir / "config.json")
    assert values["scheduler"] == "guided" and values["observe"] is True
    replay = make_faults(run_config(values))
    assert replay.scheduler.name == "replay" and replay.observe
    assert [(e.at_s, e.action, e.params.get("targets")) for e in replay.schedule] == [(3.1, "start", [2]), (6.2, "start", [3]),
                                                                                       (9.0, "stop", None)]


def test_novelty_is_credited_to_each_package_s_last_action_and_the_first_moments_are_the_random_schedule_s() -> None:
    from nemesis.schedule import build_schedule

    s = GuidedScheduler(NEMESES, 120.0, 10.0, 6, version="x")
    randoms = build_schedule(sorted(NEMESES), 120.0, 10.0, 6)
    for p in NEMESES:
        assert round(s._decide_at[p], 3) == min(e.at_s for e in randoms if e.package == p)
    s.decide("kill", 0.0, _Watch([("s", [])]))
    s.decide("pause", 1.0, _Watch([("s", ["a"])]))  # 'a' first seen after kill's action, before pause's
    s.decide("kill", 2.0, _Watch([("s", ["b"])]))
    s.decide("pause", 3.0, _Watch([("s", [])]))
    rewards = {(d["package"], d["at_s"]): d["reward_of_previous"] for d in s.decisions}
    assert rewards[("kill", 2.0)] == round(2 / 3 / 2, 4)  # a and b, both after kill's first action
    assert rewards[("pause", 3.0)] == 0.25  # b only


def test_a_slow_metadata_look_does_not_slow_the_watch_s_ticks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A look that waits on a paused broker (3 s here, scaled down) must not hold the tick back."""
    from types import SimpleNamespace

    from nemesis.guided.watch import StateWatch

    def slow_look():  # type: ignore[no-untyped-def]
        time.sleep(0.6)
        return SimpleNamespace(leaders={0: 1}, isrs={0: [1, 2, 3]}, controller=1, error=None)

    recorded = []
    (tmp_path / "history.jsonl").write_text("")  # no acknowledged send yet: w0
    recorder = SimpleNamespace(path=tmp_path / "history.jsonl", nemesis=lambda f, v: recorded.append((f, v)))
    watch = StateWatch(SimpleNamespace(brokers=[]), recorder, "queue", tick_s=0.05, looker=slow_look)
    watch.start()
    time.sleep(1.0)
    watch.stop()
    assert watch.ticks >= 10  # at 0.05 s a tick, whatever the look takes
    assert recorded and recorded[-1][1]["states"] == {"queue-0": "-|L:ctl|isr3|-|w0"}


def test_the_operations_packages_are_generic_faults_that_guided_may_choose() -> None:
    """Issue 38 item 3: guided takes the operations packages once they exist (only the recipes are
    refused); one without targets of its own is one start per delay, and a stop once it holds one."""
    from nemesis import registry
    from nemesis.guided.scheduler import GuidedScheduler

    nemeses = registry.build(["kill", "roll", "reassign", "membership", "quorum", "coordinator", "fence"], {})
    guided = GuidedScheduler(nemeses, 120.0, 10.0, 1)
    assert guided.choices["roll"] == (None, ("-",)) and guided.actions("roll") == ["start:roll:-"]
    assert guided.choices["membership"][0] == "target"
    guided.held["roll"].append(0.0)  # roll holds its one start: only a stop is left
    assert guided.actions("roll") == ["stop:roll"]


def test_the_watch_reads_the_faults_in_force_from_the_observer_that_membership_asks() -> None:
    """One record of the faults in force (nemesis/holds.py): what the runner tells the observer is
    what the watch's states show and what membership's question answers."""
    from types import SimpleNamespace

    from nemesis.observer import Observer

    observer = Observer()
    observer.watch_states(SimpleNamespace(brokers=[]), None, "queue")
    watch = observer.watch
    observer.fault("kill", "start", {"targets": [2]})
    observer.fault("kill", "start", {"targets": [3]})
    observer.fault("pause", "start", {"targets": [1], "skipped": "no leader"})  # a skipped start holds nothing
    assert watch.decision_state().startswith("kill×2|")
    assert observer.holders(3, besides="membership") == ["kill"] and observer.holders(1, besides="membership") == []
    watch.look = Look(answered=True, leaders={0: 3}, isrs={0: [3]})
    assert "leader-hit" in watch.decision_state()
    observer.fault("kill", "stop", {})
    assert watch.decision_state().startswith("-|") and observer.holders(3, besides="membership") == []


def test_design_4_reacts_to_a_new_flag_with_one_package_paid_from_its_budget() -> None:
    """A package decides at once when the state gains a log flag it did not have at its last
    decision, if it has a decision to spend (one earned per interval); one package per change."""
    s = GuidedScheduler(NEMESES, 120.0, 10.0, 1, version="x")
    calm, flagged = _Watch([("-|isr3|-", [])]), _Watch([("kill|isr2|restart", ["x"])])
    for i, p in enumerate(sorted(NEMESES)):
        s.decide(p, float(i), calm)  # each spends its first decision in the calm state
    assert s.reactor(3.5, flagged) is None  # no package has a decision left
    for p in NEMESES:
        s.refill(p, 3.0)  # the clock starts for each
        s.refill(p, 13.0)  # one interval later: one decision earned each
    assert s.reactor(13.0, calm) is None  # nothing new in the state
    who = s.reactor(13.0, flagged)
    assert who in NEMESES
    s.decide(who, 13.0, flagged, on="state change")
    assert s.decisions[-1]["on"] == "state change" and s.decisions[-1]["state"] == "kill|isr2|restart"
    assert s.reactor(13.2, flagged) not in (None, who)  # not `who` again; another package, unless the flag is taken
    s._reacted_at["restart"] = 13.0  # as next() marks the flag that made `who` react
    assert s.reactor(13.2, flagged) is None  # one package per flag while it stays in the state
    assert s.reactor(13.0 + 5.0, flagged) not in (None, who)  # the flag's window past, another may react
    s._last = {p: ("kill|isr2|restart", a) for p, (_, a) in s._last.items()}
    assert s.reactor(19.0, flagged) is None  # every package has seen the flag


def test_design_4_decides_at_its_delay_or_earlier_on_a_change_and_never_beyond_its_budget() -> None:
    """next() on a live clock: a package with a token decides at its delay; a change brings it
    forward; spent tokens make it wait."""

    class Live:
        def __init__(self) -> None:
            self.state = "-|isr3|-"

        def decision_state(self) -> str:
            return self.state

        def take_fresh(self) -> list[str]:
            return []

    watch = Live()
    observer = type("O", (), {"watch": watch})()
    s = GuidedScheduler({"kill": NEMESES["kill"]}, 60.0, 1.0, 2, version="x")
    s._decide_at["kill"] = 0.0
    first = s.next("kill", 0.0, observer)
    assert first is not None and s.decisions[-1]["on"] == "its delay"
    s._decide_at["kill"] = 30.0  # its next delay far away
    began = time.monotonic()
    threading.Timer(1.3, lambda: setattr(watch, "state", "kill|isr2|trunc-hw")).start()
    second = s.next("kill", 0.1, observer)
    waited = time.monotonic() - began
    assert second is not None and s.decisions[-1]["on"] == "state change"
    assert 1.2 <= waited <= 2.5, waited  # at the change, not at the delay; and only once a token was earned
    assert s._tokens["kill"] < 1.0


def test_design_10_decides_at_its_delay_without_a_token_so_packages_do_not_strike_in_lockstep() -> None:
    """Designs 4-9 made a decision due at its delay wait for a token, and every package's tokens
    filled on one clock: the packages decided together on the interval's grid. Now the delay is
    kept whatever the tokens (they pay only for reactions); a decision without one leaves a debt, so
    reactions wait it out and the package still decides once per interval on average."""

    class Calm:
        def decision_state(self) -> str:
            return "-|isr3|-"

        def take_fresh(self) -> list[str]:
            return []

    observer = type("O", (), {"watch": Calm()})()
    s = GuidedScheduler({"kill": NEMESES["kill"]}, 60.0, 1.0, 2, version="x")
    s._decide_at["kill"] = 0.0
    assert s.next("kill", 0.0, observer) is not None
    s._decide_at["kill"] = 0.3  # due well before a token is earned (one per 1.0 s)
    began = time.monotonic()
    assert s.next("kill", 0.05, observer) is not None
    assert time.monotonic() - began < 0.9  # at its delay, not at the next token
    assert s._tokens["kill"] < 0.0  # the debt is kept
