"""bench/ops_table.py, issue 36's table: a FAILED run counts under FAILED, one still running or never
checked is no seed of its row, a replay repeats a seed, and a bad source exits 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "ops_table.py"


def line(run: str, seed: int, **kw) -> dict:
    base = {"run": run, "kafka_version": "4.4.0", "upgrade_to": None, "nemesis": ["roll"], "workload": "queue",
            "seed": seed, "variant": "", "replay_of": False, "failed": False, "failed_why": None, "verdict": "valid",
            "counts": {}, "allowed": [], "reasons": [], "worst_band": {"label": "roll", "no_write_s": 2.0 + seed}}
    return {**base, **kw}


def table(tmp_path: Path, lines: list[dict]) -> tuple[int, list[dict] | str]:
    ledger = tmp_path / "ops.jsonl"
    ledger.write_text("".join(json.dumps(x) + "\n" for x in lines))
    p = subprocess.run([sys.executable, str(SCRIPT), str(ledger)], capture_output=True, text=True)
    return p.returncode, json.loads(p.stdout) if p.returncode == 0 else p.stderr


def test_failed_unchecked_and_replayed_runs_each_count_their_own_way(tmp_path):
    code, rows = table(tmp_path, [
        line("a", 1), line("b", 2, verdict="unknown", reasons=["a thread died"]),
        line("c", 3, failed=True, failed_why="cluster did not start", verdict=None, worst_band=None),
        line("d", 4, verdict=None, failed_why="not checked", worst_band=None),  # still running
        line("e", 1, replay_of=True, worst_band={"label": "roll", "no_write_s": 99.0}),
    ])
    assert code == 0
    [row] = rows
    assert (row["seeds"], row["valid"], row["unknown"], row["failed"]) == (3, 1, 1, 1)
    assert row["unchecked"] == ["d"]
    assert row["failed_why"] == ["c: cluster did not start"]
    assert (row["longest_no_write_s"], row["longest_in"]) == (4.0, "b")  # the replay's 99 s is no seed's


def test_a_missing_source_exits_2_and_names_it(tmp_path):
    p = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "nope")], capture_output=True, text=True)
    assert p.returncode == 2 and "nope: no such store or ledger" in p.stderr
