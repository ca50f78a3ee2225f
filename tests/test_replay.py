"""Exact replay (`run --replay`): the faults of a replayed run hit the same brokers at the same
offsets in time as the original's; and the report's bands end where their faults end."""

from __future__ import annotations

import json

import pytest

from analysis.explain.timeline import faults_from
from harness.history import read_history
from harness.run.steps import run
from harness.run.settings import make_faults, read_replay, run_config

STARTS = {"kill", "start-partition"}


def fault_starts(run_dir) -> list[tuple[str, list[int], float]]:
    """(f, targets, seconds after the fault schedule began) of every fault that started. The
    schedule begins once the workload's first write is acknowledged, which takes longer in one run
    than in another: its own clock is what a replay repeats."""
    config = json.loads((run_dir / "config.json").read_text())
    began = config["phases_s"]["faults"]
    return [(e["f"], e["value"]["targets"], e["time"] / 1e9 - began)
            for e in read_history(run_dir / "history.jsonl") if e["process"] == "nemesis" and e["f"] in STARTS]


@pytest.mark.docker
@pytest.mark.slow
def test_a_replayed_run_hits_the_same_brokers_at_the_same_times(prepared, tmp_path, report_figure):
    # Leader targets: chosen from the roles at the moment, so a replay that chose afresh would
    # likely pick other brokers (the new cluster's leaders are placed anew).
    values = {"store": str(tmp_path), "time_limit": 24, "rate": 200, "seed": 5, "partitions": 4, "nemesis": "kill,partition",
              "nemesis_interval": 4, "db_targets": "leader,one", "partition_targets": "leader,one"}
    config = run_config(values, command_line=[])
    original = run(config, faults=make_faults(config)).run_dir
    replay_values = read_replay(original / "config.json")
    assert replay_values["schedule"], "config.json holds the executed schedule"
    replay_config = run_config(replay_values, command_line=[])
    replayed = run(replay_config, faults=make_faults(replay_config)).run_dir

    first, second = fault_starts(original), fault_starts(replayed)
    # The schedule really fired, one fault of each kind at least. Each package alternates strike and
    # heal, and a killed broker's restart paces the next kill: CI under load saw 2 starts in 24 s.
    assert {f for f, _, _ in first} == STARTS, first
    # Every fault the original started within the time limit is repeated. One it started past the
    # limit is not: the replay heals on time. A package can strike late once (its target is
    # resolved, a partition's rules set, after the event is due), so two can be: CI saw a
    # start-partition at 24.59 s and a kill at 24.73 s of a 24 s run, neither replayed. The
    # half second keeps a fault due at the very end, in a replay whose workload stops a little
    # sooner, from counting.
    # The schedule's clock starts when the first write is acknowledged, so the workload ends that
    # much sooner on it.
    phases = json.loads((original / "config.json").read_text())["phases_s"]
    ends = values["time_limit"] - (phases["faults"] - phases["workload"])
    within = [e for e in first if e[2] <= ends - 0.5]
    assert len(within) <= len(second) <= len(first), (first, second)
    # Compared per fault kind: the kill and partition packages run on their own clocks, so two
    # faults due within the drift of each other may be recorded in either order. CI saw exactly
    # that: kill [2] and start-partition [2] were due 0.0x s apart and swapped places in the replay.
    pairs = []
    for kind in STARTS:
        mine = [e for e in first if e[0] == kind]
        theirs = [e for e in second if e[0] == kind]
        both = min(len(mine), len(theirs))
        assert [t for _, t, _ in mine[:both]] == [t for _, t, _ in theirs[:both]], (kind, first, second)
        pairs += zip(mine[:both], theirs[:both])
    both = len(pairs)
    drift = [round(b - a, 3) for (_, _, a), (_, _, b) in pairs]
    recorded = json.loads((replayed / "config.json").read_text())
    assert recorded["replay_of"] == str((original / "config.json").resolve())
    assert all(e.get("replay") == "recorded targets" for e in (ev["value"] for ev in read_history(replayed / "history.jsonl")
                                                                 if ev["process"] == "nemesis" and ev["f"] in STARTS))
    # Each fault is recorded as it strikes, and a replay strikes at the recorded moment. Measured:
    # max drift 0.16, 0.55, 0.39 and 1.19 s in four full-suite runs while the record waited for a
    # `ps` exec per victim; 0.05 s alone and 0.05 s beside two busy loops once it read the PID file.
    assert all(abs(d) <= 1.0 for d in drift), (drift, first, second)
    report_figure(f"replay: {both} faults on the same brokers, event time drift {min(drift):+.2f}..{max(drift):+.2f} s")


def test_a_scenario_kill_band_ends_at_its_restart_not_at_the_heal():
    """Scenarios record kill/restart as the kill nemesis does, naming the broker."""
    nemesis = [
        {"t": 1.0, "f": "kill", "value": {"node": 1, "targets": [1]}},
        {"t": 2.0, "f": "kill", "value": {"node": 2, "targets": [2]}},
        {"t": 3.0, "f": "restart", "value": {"node": 1, "targets": [1]}},
        {"t": 5.0, "f": "restart", "value": {"node": 2, "targets": [2]}},
        {"t": 6.0, "f": "cut", "value": {"targets": [1, 2]}},
        {"t": 9.0, "f": "heal", "value": {}},
    ]
    bands, _ = faults_from(nemesis, end_s=20.0)
    ends = {(b.f, tuple(b.targets)): (b.start_s, b.end_s, b.ended_by) for b in bands}
    assert ends[("kill", (1,))] == (1.0, 3.0, "restart")
    assert ends[("kill", (2,))] == (2.0, 5.0, "restart")
    assert ends[("cut", (1, 2))] == (6.0, 9.0, "heal")


def test_an_older_record_replays_its_settings_but_not_its_schedule(tmp_path):
    """A record of version 1 (no config_format) gives back its settings; its schedule, which did not
    record the targets each fault resolved, is chosen afresh (harness/history/record.py)."""
    path = tmp_path / "store" / "r" / "config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"seed": 4, "workload": "queue", "profile": {"name": "acks1", "enable_idempotence": False},
                                "rate": 300.0, "nemesis": ["kill"],
                                "nemesis_config": {"packages": ["kill"], "interval_s": 6.0,
                                                   "schedule": [{"at_s": 1.0, "package": "kill", "action": "start"}]}}))
    values = read_replay(path)
    assert (values["seed"], values["profile"], values["rate"], values["nemesis"], values["nemesis_interval"]) == (4, "acks1", 300.0, "kill", 6.0)
    assert "schedule" not in values and values["store"] == str((tmp_path / "store").resolve())
    assert read_replay(path.parent) == values  # the run directory names its record


def test_a_record_with_a_bad_value_is_refused_naming_it(tmp_path):
    from harness.errors import HarnessError

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"seed": 4, "workload": "queue", "rate": "fast"}))
    with pytest.raises(HarnessError, match="rate should be a number") as refused:
        read_replay(path)
    assert refused.value.exit_code == 2 and refused.value.hint
