"""Every page opened in headless Chromium (fresh profile, no network): no JavaScript error, every
chart drew its SVG, no request left the file, and a 100-run dashboard loads in under 2 s. Screenshots go to a temporary folder whose path is
printed (run with -s to see it)."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from analysis.report.dashboard import render_dashboard
from analysis.report.page import render_report
from tests.browser import ensure_chromium, load_page
from tests.reports.conftest import run_of
from tests.reports.synth import clone_store, injectable, make_results, make_run

pytestmark = pytest.mark.slow
SHOTS = Path(tempfile.mkdtemp(prefix="kh-report-shots-"))


def selfcheck(dom: str) -> dict[str, str]:
    m = re.search(r'<div id="kh-selfcheck"([^>]*)>', dom)
    assert m, "the page's self-check did not run"
    return dict(re.findall(r'data-([a-z]+)="([^"]*)"', m.group(1).replace("&quot;", '"')))


def check_page(page: Path, shot: str | None = None) -> dict[str, str]:
    result = load_page(page, SHOTS / shot if shot else None, height=3000, budget_ms=5000)
    s = selfcheck(result.dom)
    assert s.get("done") == "1"
    assert json.loads(s["errors"]) == [], f"JavaScript errors in {page}"
    assert int(s["plots"]) > 0 and s["drawn"] == s["plots"], f"plots not drawn in {page}: {s}"
    assert json.loads(s["resources"]) == [], f"{page} requested {s['resources']}"
    if shot:
        print(f"screenshot: {SHOTS / shot}")
    return s


@pytest.fixture(scope="module")
def chromium() -> str:
    return ensure_chromium()


def test_every_report_and_the_dashboard_in_chromium(store: Path, chromium: str) -> None:
    pages = [(render_report(run_of(store, a)), f"report-{a}.png" if a in ("lost-write", "duplicate") else None)
             for a in injectable()]
    pages.append((render_report(run_of(store, "unchecked")), "report-unchecked.png"))
    pages.append((render_dashboard(store), "dashboard.png"))
    with ThreadPoolExecutor(2) as pool:  # two browsers at a time on a 2-core machine
        results = list(pool.map(lambda p: check_page(*p), pages))
    assert int(results[0]["plots"]) >= 2


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 10 s checked run with a lost write and its report (a few seconds to make)."""
    template = make_run(tmp_path_factory.mktemp("small-run"), "20251231T070000-template", "lost-write", seconds=10)
    make_results(template, "lost-write")
    render_report(template)
    return template


def test_a_report_copied_on_its_own_opens_and_draws(tmp_path: Path, small_run: Path, chromium: str) -> None:
    """Issue 34: report.html alone in an empty folder (mailed, or copied to another machine): every
    chart draws, nothing is requested, and the charts are in the page's own markup (static SVG:
    drawn with scripts blocked too)."""
    alone = tmp_path / "elsewhere" / "report.html"
    alone.parent.mkdir()
    shutil.copy(small_run / "report.html", alone)
    page = alone.read_text()
    assert len(page.encode()) < 1_000_000 and page.count("<svg") >= 2
    s = check_page(alone, "report-copied-alone.png")
    assert int(s["plots"]) >= 2


def test_a_100_run_dashboard_opens_in_chromium_in_under_2_s(tmp_path: Path, small_run: Path, chromium: str) -> None:
    """Issue 34: the dashboard of a 100-run store opens in under 2 s in a real browser (the page's
    own navigation timing, start of navigation to the end of the load event, read from the DOM)."""
    store = tmp_path / "store100"
    runs = clone_store(small_run, store, 100)
    page = render_dashboard(store)
    text = page.read_text()
    assert text.count("<tr data-verdict=") == 100 and "Plotly" not in text
    assert len(text.encode()) < 500_000
    s = check_page(page, "dashboard-100.png")
    assert int(s["plots"]) == 2
    assert int(s["loadms"]) < 2000, f"the 100-run dashboard took {s['loadms']} ms to load"
    print(f"100-run dashboard: {len(text.encode()) / 1e3:.0f} KB, loaded in {s['loadms']} ms; "
          f"a report: {(runs[0] / 'report.html').stat().st_size / 1e3:.0f} KB")


def test_the_inline_report_draws_its_plotly_charts(tmp_path: Path, small_run: Path, chromium: str) -> None:
    """`report --inline`: the interactive page (Plotly inlined once) draws every chart, offline."""
    page = render_report(small_run, tmp_path, inline=True)
    assert page.read_text().count("Plotly.newPlot") >= 2
    s = check_page(page, "report-inline.png")
    assert int(s["plots"]) >= 2
