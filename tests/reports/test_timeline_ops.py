"""A timeline an SRE can read (issue 19 item 8): operations split by kind and outcome, the client
errors table, the cluster-start gap, and "no faults were injected" beside the verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path

from analysis.explain import timeline
from analysis.report.page import render_report
from tests.reports.lost_runs import make_lost_run


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]


def test_throughput_and_latency_per_operation_and_outcome(tmp_path: Path) -> None:
    run_dir, _ = make_lost_run(tmp_path, "ops", lost=2)
    events = _events(run_dir)
    tl = timeline.build(run_dir, json.loads((run_dir / "config.json").read_text()))
    table = {(r["op"], r["outcome"]): r for r in tl.op_table}
    for (op, outcome), row in table.items():
        assert row["count"] == sum(1 for e in events if e["f"] == op and e["type"] == outcome)
    assert {("send", "ok"), ("send", "info"), ("poll", "ok")} <= set(table)
    # info sends waited 300 ms for their timeout, ok sends 4 ms: the split shows it, a mix would not.
    assert table[("send", "info")]["p50_ms"] > 250 and table[("send", "ok")]["p50_ms"] < 10
    s = tl.seconds
    for col in ("send_ok", "send_info", "send_fail", "poll_ok", "send_p50_ms", "poll_p50_ms"):
        assert col in s
    assert s["send_info"].sum() == table[("send", "info")]["count"]  # per-second bins of 1 s


def test_client_errors_table_counts_names_and_first_last_time(tmp_path: Path) -> None:
    run_dir, _ = make_lost_run(tmp_path, "errors", lost=1)
    events = _events(run_dir)
    timed_out = [e["time"] / 1e9 for e in events if (e.get("error") or "").startswith("REQUEST_TIMED_OUT")]
    tl = timeline.build(run_dir)
    row = next(r for r in tl.errors if r["name"] == "REQUEST_TIMED_OUT")
    assert row["count"] == len(timed_out) > 0
    assert abs(row["first_s"] - min(timed_out)) < 1e-6 and abs(row["last_s"] - max(timed_out)) < 1e-6
    assert row["ops"] == "send info"
    own = re.sub(r"<script>.*?</script>", "", render_report(run_dir).read_text(), flags=re.S)
    assert 'id="sec-errors"' in own and "REQUEST_TIMED_OUT" in own and "12:03:0" in own  # first time in UTC


def test_cluster_start_gap_and_no_faults_label(tmp_path: Path) -> None:
    run_dir, _ = make_lost_run(tmp_path, "calm", lost=0, errors=False)
    kept = [e for e in _events(run_dir) if e["process"] != "nemesis"]
    (run_dir / "history.jsonl").write_text("".join(json.dumps({**e, "index": i}) + "\n" for i, e in enumerate(kept)))
    config = json.loads((run_dir / "config.json").read_text())
    config["nemesis"] = []
    (run_dir / "config.json").write_text(json.dumps(config))
    tl = timeline.build(run_dir, config)
    assert tl.start_gap_s == 1.0 and tl.errors == []
    page = render_report(run_dir).read_text()
    own = re.sub(r"<script>.*?</script>", "", page, flags=re.S)
    assert 'id="no-faults"' in own and "no faults were injected" in own
    assert "cluster starting" in page  # the band's label in the timeline figure
    faulty, _ = make_lost_run(tmp_path, "faulty", lost=1)
    assert 'id="no-faults"' not in render_report(faulty).read_text()
