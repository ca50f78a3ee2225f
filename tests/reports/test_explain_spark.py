"""The explanation from the Spark checker's own examples (issue 19 item 7, done-when): `check`
writes each lost write's explanation into results.json and prints the first one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from analysis.cli import main
from tests.reports.lost_runs import make_lost_run


@pytest.mark.slow
@pytest.mark.parametrize("seed,lost,recorded", [(4, 4, False)])  # a recorded start: the fast tests
def test_check_explains_every_lost_write(spark, tmp_path: Path, seed: int, lost: int, recorded: bool) -> None:
    run_dir, truth = make_lost_run(tmp_path, f"20260302T120300-s{seed}", seed=seed, lost=lost, recorded_start=recorded)
    r = CliRunner().invoke(main, ["check", str(run_dir)], catch_exceptions=False)
    assert r.exit_code == 1, r.output
    results = json.loads((run_dir / "results.json").read_text())
    explained = {x["value"]: x for x in results["explanations"]["examples"]["lost-write"]}
    assert sorted(explained) == sorted(t["value"] for t in truth)
    for t in truth:
        s = explained[t["value"]]["sentence"]
        assert f"value {t['value']} was acknowledged at offset {t['offset']} of queue-0" in s
        assert f"they read value {t['instead']}" in s and re.search(r"\d\d:\d\d:\d\d\.\d{3} UTC", s)
    first = next(line for line in r.output.splitlines() if line.startswith("first lost-write: "))
    assert first.removeprefix("first lost-write: ") == results["explanations"]["examples"]["lost-write"][0]["sentence"]
