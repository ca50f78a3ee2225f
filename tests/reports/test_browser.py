"""Every page opened in headless Chromium (fresh profile, no network): no JavaScript error, every
plot drew its SVG, no request left the file. Screenshots go to a temporary folder whose path is
printed (run with -s to see it)."""

from __future__ import annotations

import json
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from analysis.dashboard import render_dashboard
from analysis.report import render_report
from tests.browser import ensure_chromium, load_page
from tests.reports.conftest import run_of
from tests.reports.synth import injectable

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
