"""The campaign page and replay-find (issue 38, docs/guided.md) on a synthetic detect store: ledger
rows as detect appends them and run directories whose `observed` events are written by the real
recorder, the way the state watch writes them (only the partitions that changed at a tick)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.experiments.campaign import REPLAYS, load_campaign, observed_sets
from harness.experiments.replays import replay_find
from harness.experiments.campaign_page import render_campaign
from harness.experiments.detection import LEDGER, DetectionRun
from harness.history.files import write_json
from harness.history.format import OBSERVED
from harness.history.recorder import Recorder
from nemesis.guided.state import Seen

VERSION = "0.10.2.2"


def settings(schedule: str) -> dict:
    return {"time_limit_s": 120.0, "interval_s": 10.0, "rate": 500.0, "nemesis": ["kill"], "schedule": schedule}


def write_run(store: Path, run_id: str, seed: int, ticks: list[dict[str, str]], schedule: str = "random",
              lost: int = 0, workload_s: float = 120.0, parquet: bool = True, at_s: list[float] | None = None) -> DetectionRun:
    """A run directory with config.json, results.json and a history whose observed events are what
    StateWatch.tick records for `ticks` (each tick: every partition's state), and its ledger row.
    The recorder stamps its own times; with `at_s` the events are written with those times instead
    (seconds on the history's clock), in the recorder's line format."""
    run_dir = store / VERSION / run_id
    run_dir.mkdir(parents=True)
    seen = Seen()
    recorder = Recorder(run_dir / "history.jsonl")
    values = []
    for states in ticks:
        changed = seen.update(states)
        values.append({"states": {f"queue-{p}": new for p, (_, new) in sorted(changed.items())},
                       "distinct_states": len(seen.states), "distinct_transitions": len(seen.transitions)})
        if at_s is None:
            recorder.nemesis(OBSERVED, values[-1])
    recorder.close(parquet=parquet)
    if at_s is not None:
        (run_dir / "history.jsonl").write_text("".join(
            json.dumps({"index": i, "time": int(t * 1e9), "process": "nemesis", "type": "info", "f": OBSERVED, "value": v},
                       separators=(",", ":")) + "\n" for i, (t, v) in enumerate(zip(at_s, values))))
    write_json(run_dir / "config.json", {"config_format": 2, "run_id": run_id, "seed": seed, "workload": "queue",
                                         "kafka_version": VERSION, "profile": {"name": "no-idempotence"},
                                         "seconds": {"workload": workload_s}, "phases_s": {"workload": 6.0},
                                         "nemesis_config": {"observed": {"distinct_states": len(seen.states)}}})
    found = lost > 0
    examples = {"lost-write": [{"at": {"from_s": 40.0, "to_s": 46.5}, "sentence": "value 7 was acknowledged and never read"},
                               {"at": {"from_s": 80.0, "to_s": 81.0}, "sentence": "a later one"}]} if found else {}
    write_json(run_dir / "results.json", {"verdict": "invalid" if found else "valid", "forbidden": ["lost-write"] if found else [],
                                          "headline": {"lost": lost, "diverged": 0, "duplicated": 3},
                                          "checked_at": "2026-11-26T02:00:00+00:00", "explanations": {"examples": examples}})
    (run_dir / "report.html").write_text("<html></html>")
    row = DetectionRun(VERSION, "no-idempotence", seed, settings(schedule), str(run_dir), "invalid" if found else "valid",
                       lost, 0, 3, ["lost-write"] if found else [], states=len(seen.states), transitions=len(seen.transitions))
    with (store / LEDGER).open("a") as out:
        out.write(json.dumps(asdict(row), sort_keys=True) + "\n")
    return row


@pytest.fixture
def store(tmp_path: Path) -> Path:
    s = tmp_path / "campaign"
    # random: run 1 sees a, b (a -> b); run 2 sees b, c (b -> c, c -> b) and finds a loss.
    write_run(s, "20261126T010000-aaaaaa", 1, [{0: "a", 1: "a"}, {0: "b", 1: "a"}])
    write_run(s, "20261126T020000-bbbbbb", 2, [{0: "b"}, {0: "c"}, {0: "b"}], lost=6, parquet=False)
    # guided: one run seeing a, d; 60 s of workload.
    write_run(s, "20261126T013000-cccccc", 1, [{0: "a"}, {0: "d"}], schedule="guided", workload_s=60.0,
              parquet=False, at_s=[10.0, 40.0])
    return s


def test_a_runs_states_are_counted_as_the_watch_counted_them(store: Path) -> None:
    states, transitions, watched = observed_sets(store / VERSION / "20261126T020000-bbbbbb")  # JSON Lines only
    assert watched and states == {"b", "c"} and transitions == {"b -> c", "c -> b"}
    states, transitions, _ = observed_sets(store / VERSION / "20261126T010000-aaaaaa")  # the Parquet twin
    assert states == {"a", "b"} and transitions == {"a -> b"}


def test_coverage_over_time_is_the_union_in_the_order_the_runs_started(store: Path) -> None:
    groups = {g.schedule: g for g in load_campaign(store)}
    random, guided = groups["random"], groups["guided"]
    assert [r.run_id for r in random.runs] == ["20261126T010000-aaaaaa", "20261126T020000-bbbbbb"]
    assert random.curve == [(0.0, 0, 0), (120.0, 2, 1), (240.0, 3, 3)]
    assert guided.curve == [(0.0, 0, 0), (60.0, 2, 1)]
    assert [r.run_id for r in random.finds] == ["20261126T020000-bbbbbb"] and not guided.finds
    # The first find: after one earlier run of 120 s, its first loss example complete at 46.5 s on the
    # history's clock, the workload having begun at 6.0 s.
    assert random.first_find() == (2, 120.0, 40.5)


def test_the_page_shows_the_numbers_finds_and_replay_commands(store: Path, tmp_path: Path) -> None:
    out = render_campaign(store, tmp_path / "elsewhere" / "page.html")
    text = out.read_text()
    found = store / VERSION / "20261126T020000-bbbbbb"
    assert f"python -m harness run --replay {found}/config.json" in text
    assert f"python -m harness replay-find {found} --times 5" in text
    assert "python -m harness run --replay " + str(store / VERSION / "20261126T010000-aaaaaa") not in text  # not a find
    assert 'href="../campaign/0.10.2.2/20261126T020000-bbbbbb/report.html"' in text  # relative to the page
    summary = re.findall(r"<tr><td>0\.10\.2\.2</td><td>no-idempotence</td><td>(\w+)</td>(.*?)</tr>", text)
    cells = {name: re.findall(r"<td class=n>([^<]*)</td>", row) for name, row in summary}
    # runs, failed, finds, rate, mean states, mean transitions, union states, union transitions, workload
    assert cells["random"] == ["2", "0", "1", "50%", "2.0", "1.5", "3", "3", "240"]
    assert cells["guided"] == ["1", "0", "0", "0%", "2.0", "1.0", "2", "1", "60"]
    assert "160 s (120 s of earlier runs + 40.5 s into run 2)" in text
    # each find's why, shown under its row (not only as a tooltip); no why for a run that found nothing
    assert text.count("<b>Why:</b>") == 1 and "<b>Why:</b> lost-write: value 7 was acknowledged and never read" in text
    assert "<svg" in text and "<script src" not in text  # static SVG, nothing fetched


def test_replay_find_is_resumable_and_the_page_counts_reproductions(store: Path) -> None:
    found = store / VERSION / "20261126T020000-bbbbbb"
    calls = []

    def execute(run_dir: Path, target: Path, finisher: object) -> tuple[Path, dict]:
        calls.append(run_dir)
        n = len(calls)
        if n == 2:  # the second replay's cluster never came up: recorded as FAILED, retried later
            raise HarnessError("broker 2 never started", run_dir=target / f"r{n}")
        lost = 4 if n in (1, 4) else 0
        return target / f"r{n}", {"verdict": "invalid" if lost else "valid", "headline": {"lost": lost, "diverged": 0},
                                  "forbidden": ["lost-write"] if lost else []}

    first = replay_find(found, 2, execute=execute)
    assert calls == [found] * 2 and [r.found for r in first] == [True]
    again = replay_find(found, 3, execute=execute)  # replay 1 is kept; 2 (FAILED) and 3 run
    assert len(calls) == 4 and [r.settings["replay"] for r in again] == [1, 2, 3]
    assert [r.found for r in again] == [True, False, True]
    assert len((store / REPLAYS).read_text().splitlines()) == 4
    text = render_campaign(store).read_text()
    assert "reproduced 2 of 3" in text and all(f"r{n} (" in text for n in (1, 3, 4))


def test_replays_recorded_in_another_store_are_read_with_replays(store: Path, tmp_path: Path) -> None:
    found = store / VERSION / "20261126T020000-bbbbbb"
    elsewhere = tmp_path / "try"
    replay_find(found, 1, elsewhere, execute=lambda c, t, f: (t / "x", {"verdict": "valid", "headline": {}}))
    assert not (store / REPLAYS).exists() and (elsewhere / REPLAYS).exists()
    assert "reproduced 0 of 1" in render_campaign(store, replay_ledgers=[elsewhere / REPLAYS]).read_text()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, timeout=120)


def test_bad_input_exits_2_naming_the_problem_and_the_fix(store: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for args, named in ((["replay-find", str(tmp_path / "nope")], "no such run directory"),
                        (["replay-find", str(tmp_path / "empty")], "no readable config.json"),
                        (["replay-find", str(store / VERSION / "20261126T010000-aaaaaa")], "is not a find"),
                        (["campaign", str(tmp_path / "empty")], "no detect ledger")):
        done = _cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        said = " ".join(done.stderr.split())  # rich wraps long lines
        assert named in said and "hint:" in said
    assert not (store / REPLAYS).exists()


def test_the_campaign_command_prints_the_page_as_its_last_line(store: Path) -> None:
    done = _cli("campaign", str(store))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(store / "campaign.html")


def test_a_campaign_runs_seeds_until_its_hours_are_spent_and_counts_recorded_runs(tmp_path: Path) -> None:
    import datetime as dt
    import os

    from harness.experiments.campaign import campaign_seeds, run_wall_s

    recorded = tmp_path / "20261126T010000-aaaaaa"
    recorded.mkdir()
    write_json(recorded / "results.json", {})
    start = dt.datetime(2026, 11, 26, 1, 0, tzinfo=dt.timezone.utc).timestamp()
    os.utime(recorded / "results.json", (start + 400, start + 400))
    row = DetectionRun(VERSION, "no-idempotence", 1, {}, str(recorded), "valid")
    assert run_wall_s(row) == pytest.approx(400)
    now = [0.0]
    seeds = []

    def sweep(given: list[int]) -> list[DetectionRun]:
        seeds.append(given)
        if given == [1]:
            return [row]  # recorded by an earlier invocation: no time passes now, its 400 s count
        now[0] += 700.0  # a fresh seed takes 700 s
        return [DetectionRun(VERSION, "no-idempotence", given[0], {}, str(tmp_path / "gone"), "valid")]

    runs = campaign_seeds(0.5, sweep, clock=lambda: now[0])  # 1800 s: 400 + 700 + 700 then stop
    assert seeds == [[1], [2], [3]] and len(runs) == 3


def test_a_run_checked_again_later_still_counts_its_own_time(tmp_path: Path) -> None:
    """The run's record (config.json) marks its end; the check adds its own time. A check run again
    hours later (results.json rewritten then) must not add those hours: the 4.4.0 campaign's first
    17 runs counted 5.58 h instead of about 1.1 after three of them were checked again."""
    import datetime as dt
    import os

    from harness.experiments.campaign import run_wall_s

    run = tmp_path / "20261126T010000-aaaaaa"
    run.mkdir()
    start = dt.datetime(2026, 11, 26, 1, 0, tzinfo=dt.timezone.utc).timestamp()
    write_json(run / "config.json", {"config_format": 2, "run_id": run.name})
    os.utime(run / "config.json", (start + 300, start + 300))
    write_json(run / "results.json", {"timings": {"total_s": 45.5}})
    os.utime(run / "results.json", (start + 4 * 3600, start + 4 * 3600))  # re-checked four hours later
    assert run_wall_s(DetectionRun(VERSION, "no-idempotence", 1, {}, str(run), "valid")) == pytest.approx(345.5)


def test_detect_campaign_refuses_seeds(tmp_path: Path) -> None:
    done = _cli("detect", "--campaign", "1", "--seeds", "3", "--store", str(tmp_path / "s"))
    assert done.returncode == 2 and "drop --seeds" in done.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_the_page_opens_offline_in_chromium_and_draws_its_charts(store: Path, tmp_path: Path) -> None:
    from tests.browser import load_page

    page = render_campaign(store, tmp_path / "alone" / "campaign.html")  # away from the store, as if mailed
    check = re.search(r'<div id="kh-selfcheck"[^>]*>', load_page(page).dom)
    assert check is not None
    attrs = dict(re.findall(r'data-(\w+)="([^"]*)"', check.group(0).replace("&quot;", '"')))
    assert attrs["errors"] == "[]" and attrs["resources"] == "[]"
    assert attrs["plots"] == attrs["drawn"] == "1"


def test_coverage_grows_within_a_run_at_its_observed_events(store: Path) -> None:
    guided = {g.schedule: g for g in load_campaign(store)}["guided"]
    # Events at 10 s and 40 s on the history's clock, the workload having begun at 6.0 s.
    assert guided.growth == [(0.0, 0, 0), (4.0, 1, 0), (34.0, 2, 1), (60.0, 2, 1)]
    random = {g.schedule: g for g in load_campaign(store)}["random"]
    # The recorder's events come microseconds after it opened, before the workload began: drawn at
    # their run's start (clamped); the second run's start at 120 s.
    assert [x for x, _, _ in random.growth] == [0.0, 0.0, 0.0, 120.0, 120.0, 120.0, 120.0, 240.0]
    assert random.growth[-1] == random.curve[-1] == (240.0, 3, 3)


def test_detect_campaign_runs_seeds_in_order_on_every_version_until_the_budget_is_spent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from click.testing import CliRunner

    import harness.experiments.detection
    from harness.experiments.commands import detect
    from harness.experiments.detection import read_ledger

    def fake(store, version, profile, seed, settings, finisher):  # type: ignore[no-untyped-def]
        time.sleep(0.25)  # a run takes time: a budget of 0.0003 h (1.08 s) holds two or three seeds of two versions
        return DetectionRun(version, profile, seed, settings, f"{store}/{version}/{seed}", "valid")

    monkeypatch.setattr(harness.experiments.detection, "_execute", fake)
    monkeypatch.setattr("harness.run.finish.Finisher", lambda **kw: None)
    done = CliRunner().invoke(detect, ["--campaign", "0.0003", "--kafka-versions", "0.10.2.2,4.4.0", "--store", str(tmp_path / "s")])
    assert done.exit_code == 0, done.output
    rows = [(r.version, r.seed) for r in read_ledger(tmp_path / "s")]
    seeds = len(rows) // 2
    assert 2 <= seeds <= 4 and rows == [(v, s) for s in range(1, seeds + 1) for v in ("0.10.2.2", "4.4.0")]
    assert "seeds 1, 2, ... for 0.0003 h" in " ".join(done.output.split())


def test_an_invalid_run_that_is_not_a_find_says_why_in_the_runs_table(store: Path, tmp_path: Path) -> None:
    """The 4.4.0 campaign's seed 19 was invalid for librdkafka's epoch-bump duplicates only: the
    table says so, from results.json; an invalid run the checker cannot lay to the client names its
    forbidden kinds instead."""
    client = write_run(store, "20261126T030000-dddddd", 3, [{0: "a"}])
    other = write_run(store, "20261126T040000-eeeeee", 4, [{0: "a"}])
    rows = [asdict(client) | {"verdict": "invalid", "duplicated": 5, "forbidden": ["duplicate"]},
            asdict(other) | {"verdict": "invalid", "duplicated": 2, "forbidden": ["duplicate"]}]
    explained = {"duplicates": 5, "explained": 5, "refused_batch": 0, "message_timeout": 5, "epoch_bumped": 5}
    for row, client_duplicates in zip(rows, (explained, {**explained, "duplicates": 2, "explained": 0})):
        write_json(Path(row["run_dir"]) / "results.json", {"verdict": "invalid", "forbidden": ["duplicate"],
                                                           "counts": {"duplicate": row["duplicated"]},
                                                           "client_duplicates": client_duplicates})
    ledger = store / LEDGER
    kept = [line for line in ledger.read_text().splitlines() if "dddddd" not in line and "eeeeee" not in line]
    ledger.write_text("\n".join(kept + [json.dumps(r, sort_keys=True) for r in rows]) + "\n")
    text = render_campaign(store, tmp_path / "page.html").read_text()
    assert "invalid (known client bug: librdkafka&#39;s epoch bump, duplicates only)" in text
    assert "<td>invalid (duplicate)</td>" in text and "invalid (FIND)" in text
