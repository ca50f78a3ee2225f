"""`compare-clients` (issue 35 item 2): the second client replays the schedule the first one
executed, the ledger resumes a stopped comparison, and the table sums per client. The runs here
are stand-ins that write what a run writes (config.json, results); the real runs are the README's."""

from __future__ import annotations

import json
from pathlib import Path

from harness.errors import HarnessError
from harness.experiments.clients import compare_clients, read_ledger, table

SETTINGS = {"kafka_version": "4.4.0", "profile": "safe", "time_limit_s": 60.0, "interval_s": 10.0, "rate": 1000.0,
            "nemesis": ["kill"]}


class Runs:
    """An `execute` that writes a run directory per call and remembers the schedule it was given."""

    def __init__(self, store: Path, fail: set[tuple[str, int]] = frozenset()) -> None:
        self.store, self.fail, self.calls = store, fail, []

    def __call__(self, client: str, seed: int, schedule):
        self.calls.append((client, seed, schedule))
        run_dir = self.store / f"{client}-{seed}-{len(self.calls)}"
        run_dir.mkdir(parents=True)
        executed = schedule or [{"at_s": 3.0 + seed, "package": "kill", "action": "start", "params": {"targets": [seed % 3 + 1]}}]
        (run_dir / "config.json").write_text(json.dumps({
            "config_format": 2, "seed": seed, "workload": "queue", "seconds": {"workload": 50.0},
            "client": {"name": client, "versions": {client: "1.0"}},
            "nemesis_config": {"packages": ["kill"], "interval_s": 10.0, "schedule": executed, "options": {}}}))
        if (client, seed) in self.fail:
            raise HarnessError("node 2 exited during start-up", run_dir=run_dir)
        lost = 3 if client == "b" else 0
        return run_dir, {"verdict": "invalid" if lost else "valid", "headline": {"lost": lost, "duplicated": 1},
                         "op_stats": {"send": {"invoke": 1000, "ok": 990, "info": 10}}}


def test_the_second_client_replays_the_schedule_the_first_executed(tmp_path):
    runs = Runs(tmp_path / "runs")
    result = compare_clients(tmp_path, ["a", "b"], [1, 2], SETTINGS, runs)
    assert [(c, s) for c, s, _ in runs.calls] == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert runs.calls[0][2] is None and runs.calls[2][2] is None  # the first client draws from the seed
    assert runs.calls[1][2] == [{"at_s": 4.0, "package": "kill", "action": "start", "params": {"targets": [2]}}]
    assert runs.calls[3][2][0]["params"]["targets"] == [3]  # seed 2's own schedule, not seed 1's
    b = [r for r in result if r.client == "b"]
    assert all(r.replayed_from for r in b) and (b[0].lost, b[0].sends_per_s, b[0].info_share) == (3, 19.8, 0.01)


def test_a_stopped_comparison_resumes_and_a_failed_run_is_run_again(tmp_path):
    first = Runs(tmp_path / "runs1", fail={("b", 1)})
    compare_clients(tmp_path, ["a", "b"], [1], SETTINGS, first)
    assert [r.failed is not None for r in read_ledger(tmp_path)] == [False, True]
    again = Runs(tmp_path / "runs2")
    result = compare_clients(tmp_path, ["a", "b"], [1], SETTINGS, again)
    assert [(c, s) for c, s, _ in again.calls] == [("b", 1)]  # a's run had a verdict; b's FAILED one runs again
    assert again.calls[0][2] is not None  # and it still replays a's recorded schedule
    text = table(result)
    assert "| a | a 1.0 | 1 | 20 | 0 | 1 | 0 | 0 | 1.00% | 1 | 0 | 0 | 0 |" in text
    assert "| b | b 1.0 | 1 | 20 | 3 | 1 | 0 | 0 | 1.00% | 0 | 1 | 0 | 0 |" in text


def test_sends_per_second_divide_by_the_time_the_clients_sent_heal_included(tmp_path):
    """The clients send until the heal is over (they stop before the drain): a 60 s workload whose
    heal took 8 s sent for 68 s, and dividing by 60 read 13 % high (the README's 1,126/s of 2026-11-25)."""
    from harness.experiments.clients import measured

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps({
        "config_format": 2, "seed": 1, "workload": "queue", "seconds": {"workload": 60.0, "heal": 8.0},
        "phases_s": {"workload": 2.0, "heal": 62.0, "drain": 70.0}}))
    results = {"verdict": "valid", "op_stats": {"send": {"invoke": 68_000, "ok": 68_000}}}
    assert measured("a", 1, SETTINGS, run_dir, results, None).sends_per_s == 1000.0
    (run_dir / "config.json").write_text(json.dumps({  # an older record: no phases, the steps' seconds
        "config_format": 2, "seed": 1, "workload": "queue", "seconds": {"workload": 60.0, "heal": 8.0}}))
    assert measured("a", 1, SETTINGS, run_dir, results, None).sends_per_s == 1000.0
