"""Report and dashboard rendering without a browser: content, robustness, CLI exit codes."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from analysis.explain import timeline
from analysis.report.dashboard import render_dashboard
from analysis.rules.registry import ANOMALIES
from analysis.report.page import render_report
from analysis.report.commands import dashboard, report
from harness.errors import HarnessError
from tests.reports.conftest import run_of
from tests.reports.synth import injectable

MAX_BYTES = 1_000_000  # issue 34: a run's report is at most 1 MB (charts as static SVG, no chart library)


def _own_markup(page: str) -> str:
    """The page without inline <script> bodies (an --inline page's Plotly bundle holds URL strings in code)."""
    return re.sub(r"<script>.*?</script>", "", page, flags=re.S)


def _charts(page: str) -> int:
    return page.count('<figure class="kh-chart"')


@pytest.mark.parametrize("anomaly", injectable())
def test_report_shows_each_anomaly(store: Path, anomaly: str) -> None:
    page = render_report(run_of(store, anomaly)).read_text()
    assert len(page.encode()) < MAX_BYTES
    own = _own_markup(page)
    assert not re.search(r"(src|href)=\"(https?:)?//", own), "no external resource"
    assert "<script src" not in page and "<link " not in page
    # The charts are static SVG in the page, drawn with no script: no chart library at all.
    assert "Plotly" not in page and _charts(page) >= 2  # timeline + offset plot of the affected partition
    assert f'id="anomaly-{anomaly}"' in own and 'class="badge invalid"' in own
    assert own.index("sec-verdict") < own.index("sec-facts") < own.index("sec-timeline")
    assert "kill → broker 2" in page and "partition one → broker 1" in page
    assert 'href="brokers/1/server.log"' in own


def test_unchecked_run_says_so(store: Path) -> None:
    own = _own_markup(render_report(run_of(store, "unchecked")).read_text())
    assert "not checked yet" in own and "python -m analysis check" in own


def test_the_clients_own_log_is_linked_when_the_run_kept_one(tmp_path: Path, store: Path) -> None:
    d = tmp_path / "run"
    shutil.copytree(run_of(store, "lost-write"), d)
    assert 'href="librdkafka.log"' not in _own_markup(render_report(d).read_text())
    (d / "librdkafka.log").write_text("2026-11-27 02:17:31,606 librdkafka.producer CRITICAL: FATAL ... fenced\n")
    assert 'href="librdkafka.log"' in _own_markup(render_report(d).read_text())


def test_missing_history_and_config_still_render(tmp_path: Path, store: Path) -> None:
    d = tmp_path / "bare"
    d.mkdir()
    shutil.copy(run_of(store, "lost-write") / "results.json", d / "results.json")
    own = _own_markup(render_report(d).read_text())
    assert "no timeline" in own and "config.json is missing" in own


def test_a_folder_without_a_run_is_refused_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a run")
    result = CliRunner().invoke(report, [str(tmp_path)])
    assert result.exit_code == 2
    assert "holds no run" in result.output and "history.jsonl" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_malformed_results_is_an_error(tmp_path: Path, store: Path) -> None:
    d = tmp_path / "bad"
    shutil.copytree(run_of(store, "clean"), d)
    (d / "results.json").write_text('{"verdict": ')
    with pytest.raises(HarnessError, match="results.json"):
        render_report(d)
    r = CliRunner().invoke(report, [str(d)])
    assert r.exit_code == 2 and "python -m analysis check" in r.output
    assert CliRunner().invoke(report, [str(tmp_path / "nope")]).exit_code == 2
    assert CliRunner().invoke(dashboard, [str(tmp_path / "nope")]).exit_code == 2


def test_report_never_touches_results(store: Path) -> None:
    d = run_of(store, "duplicate")
    before = (d / "results.json").read_bytes()
    CliRunner().invoke(report, [str(d)], catch_exceptions=False)
    assert (d / "results.json").read_bytes() == before


def test_timeline_figures(store: Path) -> None:
    d = run_of(store, "clean")
    tl = timeline.build(d, json.loads((d / "config.json").read_text()))
    s = tl.seconds
    assert [f.f for f in tl.faults] == ["kill", "start-partition"]
    assert (tl.faults[0].start_s, tl.faults[0].end_s) == (8.0, 13.0)
    calm, faulty = s[s["t"].between(2, 6)], s[s["t"].between(9, 12)]
    assert calm["fail"].sum() == 0 and faulty["fail"].sum() > 0
    assert faulty["p50_ms"].median() > 5 * calm["p50_ms"].median()
    assert tl.drain_start_s is not None and tl.drain_start_s > 29
    assert (s["lag_max"].dropna() >= 0).all()


def test_unmatched_fault_runs_to_heal() -> None:
    nem = [{"t": 1.0, "f": "pause", "value": {"targets": [3]}},
           {"t": 2.0, "f": "start-loss", "value": {"targets": [1, 2]}},
           {"t": 3.0, "f": "stop-loss", "value": {}},
           {"t": 4.0, "f": "nemesis-error", "value": {"error": "x"}},
           {"t": 5.0, "f": "heal", "value": {}},
           {"t": 6.0, "f": "kill", "value": {"targets": [1]}}]
    faults, markers = timeline.faults_from(nem, end_s=9.0)
    got = {(f.f, f.start_s, f.end_s, f.ended_by) for f in faults}
    assert got == {("pause", 1.0, 5.0, "heal"), ("start-loss", 2.0, 3.0, "stop-loss"), ("kill", 6.0, 9.0, "end of history")}
    assert [m["f"] for m in markers] == ["nemesis-error", "heal"]
    assert "brokers 1,2" in next(f.label for f in faults if f.f == "start-loss")


def test_jsonl_only_history(tmp_path: Path, store: Path) -> None:
    d = tmp_path / "jsonl"
    shutil.copytree(run_of(store, "poll-skip"), d)
    (d / "history.parquet").unlink()
    a = timeline.build(d)
    b = timeline.build(run_of(store, "poll-skip"))
    assert a.events == b.events and len(a.reads) == len(b.reads) and len(a.writes) == len(b.writes)


def test_dashboard_rows_and_trends(store: Path) -> None:
    page = render_dashboard(store, render_reports=True).read_text()
    own = _own_markup(page)
    assert own.count('<tr data-verdict="invalid"') == len(injectable())
    assert '<tr data-verdict="unchecked"' in own and '<tr data-verdict="valid"' in own
    assert "computed from each run" in own and _charts(page) == 2 and "Plotly" not in page
    assert all((p / "report.html").exists() for p in store.iterdir() if p.is_dir())


def test_dashboard_prefers_trends_summary(tmp_path: Path, store: Path) -> None:
    s = tmp_path / "s"
    shutil.copytree(store, s)
    (s / "_trends").mkdir()
    row = {"day": "2026-01-01", "kafka_version": "4.3.1", "nemesis": "kill", "workload": "queue", "profile": "safe",
           "runs": 4, "valid": 3, "invalid": 1, "unknown": 0, "events": 1000, **{a.replace("-", "_"): 1 for a in ANOMALIES}}
    (s / "_trends" / "summary.json").write_text(json.dumps({"runs": 4, "groups": [], "daily": [row]}))
    own = _own_markup(render_dashboard(s).read_text())
    assert "written by python -m analysis trends" in own


def test_inline_report_is_one_interactive_file(tmp_path: Path, store: Path) -> None:
    """`report --inline`: Plotly's JavaScript inlined once, the same charts interactive, no other file."""
    d = run_of(store, "lost-write")
    r = CliRunner().invoke(report, ["--inline", "--output", str(tmp_path), str(d)], catch_exceptions=False)
    assert r.exit_code == 0
    page = (tmp_path / "report.html").read_text()
    assert page.count("Plotly.newPlot") >= 2 and "<script src" not in page
    assert 'id="plot-timeline"' in page and 'id="anomaly-lost-write"' in page
    small = render_report(d).read_text()
    assert len(small.encode()) * 5 < len(page.encode())  # the default page is a fraction of it


def test_report_stays_small_with_a_long_timeline(tmp_path: Path, store: Path) -> None:
    """A soak's thousands of bins are drawn in at most report_svg.MAX_COLUMNS columns."""
    from analysis.report import charts as report_charts
    from analysis.report.svg import MAX_COLUMNS

    d = run_of(store, "clean")
    tl = timeline.build(d, json.loads((d / "config.json").read_text()))
    s = tl.seconds
    long = s.loc[s.index.repeat(240)].reset_index(drop=True)  # ~7,400 one-second bins
    long["t"] = range(len(long))
    tl.seconds, tl.duration_s = long, float(len(long))
    svg = report_charts.timeline_chart(tl)
    assert len(svg.encode()) < 250_000
    assert report_charts.rebin(long, 1)[0].shape[0] <= MAX_COLUMNS


def test_the_dashboard_files_an_upgrade_run_under_both_versions(tmp_path: Path) -> None:
    """An upgrade run (--kafka-version 4.1.1 --upgrade-to 4.4.0) was filed under 4.1.1 alone."""
    from analysis.report.dashboard import collect_runs

    for name, config in (("20261126T053927-388c88", {"kafka_version": "4.1.1", "upgrade_to": "4.4.0", "nemesis": ["upgrade"]}),
                         ("20261126T014609-acbcc6", {"kafka_version": "4.4.0", "nemesis": ["roll"]})):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"workload": "queue", "seed": 1, **config}))
    assert sorted(r["version"] for r in collect_runs(tmp_path)) == ["4.1.1→4.4.0", "4.4.0"]
