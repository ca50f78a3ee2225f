"""A long run's report stays small and readable: hundreds of faults are drawn as one path per kind,
the fault table keeps the faults clients felt most, and every fault is still listed on the page.
The 2-hour soak of 2026-11-26 (917 faults) wrote a 1.73 MB report; the bound is 1 MB."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from analysis.report.page import FAULT_ROWS, render_report
from harness.history import write_parquet
from tests.reports.synth import make_results, make_run

SECONDS, FAULTS = 600, 600  # a kill and a partition every 2 s, each 1 s long


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = make_run(tmp_path_factory.mktemp("long"), "20260105T070000-long", "duplicate", seconds=SECONDS, rate=40)
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    extra = []
    for i in range(FAULTS // 2):
        t = 30.0 + i * (SECONDS - 40) / (FAULTS // 2)
        extra += [(t, {"process": "nemesis", "type": "info", "f": "kill", "value": {"targets": [1 + i % 3], "pids": {}}}),
                  (t + 0.5, {"process": "nemesis", "type": "info", "f": "restart", "value": {"targets": [1 + i % 3], "pids": {}}}),
                  (t + 1.0, {"process": "nemesis", "type": "info", "f": "start-partition",
                             "value": {"shape": "one", "targets": [1 + i % 3], "grudge": {}}}),
                  (t + 1.6, {"process": "nemesis", "type": "info", "f": "stop-partition", "value": {"healed": True}})]
    merged = sorted([(e["time"], 0, e) for e in events] + [(int(t * 1e9), 1, e) for t, e in extra], key=lambda x: (x[0], x[1]))
    with open(run_dir / "history.jsonl", "w") as fh:
        for i, (t, _, e) in enumerate(merged):
            fh.write(json.dumps({**e, "index": i, "time": t}, separators=(",", ":")) + "\n")
    write_parquet(run_dir / "history.jsonl", run_dir / "history.parquet")
    results = make_results(run_dir, "duplicate")
    felt = [{"f": "kill", "start_s": 30.0 + i * (SECONDS - 40) / (FAULTS // 2), "no_write_s": 9.0 + i / 100, "no_read_s": 1.0}
            for i in (7, 77, 177)]  # three kills whose clients noticed: the table must keep them
    results["unavailability"] = {"bands": felt}
    (run_dir / "results.json").write_text(json.dumps(results))
    return run_dir


def test_a_long_runs_report_is_small_lists_every_fault_and_keeps_the_felt_ones_in_its_table(long_run: Path) -> None:
    page = render_report(long_run).read_text()
    assert len(page.encode()) < 400_000, len(page.encode())
    table = page[page.index('id="fault-bands"'):page.index("</table>", page.index('id="fault-bands"'))]
    rows = table.count("<tr>") - 1
    assert rows == FAULT_ROWS
    for row in ("9.1", "9.8", "10.8"):  # the three felt kills' no-ok-write figures
        assert f'<td class="n">{row}</td>' in table, row
    listed = page[page.index('id="all-faults"'):page.index("</details>", page.index('id="all-faults"'))]
    each = FAULTS // 2 + 1  # the synthetic run's own kill and partition besides
    assert len(re.findall(r"kill → broker", listed)) == each and len(re.findall(r"partition one → broker", listed)) == each
    timeline = re.search(r"<svg.*?</svg>", page, re.S).group(0)
    assert timeline.count("<rect") < 100  # the bands are paths, one per kind and panel, not a rect each
    assert f"kill: {each} faults" in timeline
