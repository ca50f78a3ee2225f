"""The anomaly registry (analysis/rules/registry.py) is the one list: the docs' table, the finders, the
report's meanings and the stable order all come from it (fast, no Spark). Each finder claims its
entry (@finds, analysis/checking/claims.py); the checker calls the claimed finders
(analysis/checking/finders.py)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
from markupsafe import escape  # as the report's Jinja environment escapes

from analysis.checking import anomalies
from analysis.checking.claims import CLAIMS, ClaimError, finds
from analysis.checking.finders import FINDERS, MODULES

from analysis.rules import registry
from analysis.rules.registry import ANOMALIES, BY_NAME, END, REGISTRY, START

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "checker.md"


def _docs_block(text: str) -> str:
    return text[text.index(START) + len(START):text.index(END)].strip("\n")


def test_docs_table_is_the_rendered_registry() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1
    assert _docs_block(text) == registry.docs_table()
    rows = [line for line in registry.docs_table().splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == list(ANOMALIES)


def test_check_flags_stale_docs_and_the_rewrite_fixes_them(tmp_path: Path) -> None:
    doc = tmp_path / "checker.md"
    doc.write_text(DOCS.read_text(encoding="utf-8").replace("| `duplicate` |", "| `duplicate` | stale |"))
    cmd = [sys.executable, "-m", "analysis.rules.registry"]
    assert subprocess.run([*cmd, "--check", str(doc)], cwd=ROOT, capture_output=True).returncode == 1
    assert subprocess.run([*cmd, str(doc)], cwd=ROOT, capture_output=True).returncode == 0
    assert doc.read_text(encoding="utf-8") == DOCS.read_text(encoding="utf-8")
    assert subprocess.run([*cmd, "--check", str(doc)], cwd=ROOT, capture_output=True).returncode == 0
    doc.write_text("no markers here\n")
    assert subprocess.run([*cmd, "--check", str(doc)], cwd=ROOT, capture_output=True).returncode == 2


def test_order_is_the_stable_results_order() -> None:
    # results.json, the reports, trends' Parquet columns and the tests key on this order.
    assert ANOMALIES == ("inconsistent-offsets", "duplicate", "lost-write", "unseen", "nonmonotonic-send",
                         "nonmonotonic-poll", "poll-skip", "aborted-read",
                         # Jepsen's names for the transactional anomalies (issue 20)
                         "int-nonmonotonic-send", "int-send-skip", "int-nonmonotonic-poll", "int-poll-skip",
                         "precommitted-read", "G0", "G1c",
                         # the exactly-once pipeline (issue 20 item 4)
                         "eos-lost", "eos-duplicate", "eos-G1c")
    assert list(BY_NAME) == list(ANOMALIES) and len(set(ANOMALIES)) == len(ANOMALIES)


def _claimed(anomaly: registry.Anomaly):
    """The finder module and the function that claimed `anomaly` (StopIteration: a claim made
    outside the finder modules)."""
    finder = FINDERS[anomaly].function
    return next(m for m in MODULES if m.__name__ == finder.__module__), finder


def _claimed_in(module) -> set[str]:
    return {f.function.__name__ for f in FINDERS.values() if f.function.__module__ == module.__name__}


@pytest.mark.parametrize("anomaly", REGISTRY, ids=lambda a: a.name)
def test_every_entry_is_complete_and_its_finder_exists(anomaly: registry.Anomaly) -> None:
    module, finder = _claimed(anomaly)
    assert inspect.isfunction(finder) and finder.__module__ == module.__name__, finder
    assert getattr(module, finder.__name__) is finder  # a module-level function, under its own name
    assert list(inspect.signature(finder).parameters)[0] == "d"  # takes derive()'s tables
    assert ("pairs" in inspect.signature(finder).parameters) == FINDERS[anomaly].takes_pairs
    assert anomaly.name in (finder.__doc__ or ""), "the finder's docstring names its anomaly"
    assert anomaly.definition.strip() and anomaly.definition.endswith(".")
    assert anomaly.counted_per.strip() and anomaly.example_order


def test_every_finder_in_anomalies_has_an_entry() -> None:
    # Public functions over derive()'s tables that are not finders: the shared read pairs and
    # the one-pass tally of the value-level anomalies.
    helpers = {"read_pairs", "value_findings"}
    finders = {name for name, fn in inspect.getmembers(anomalies, inspect.isfunction)
               if fn.__module__ == "analysis.checking.anomalies" and not name.startswith("_") and name not in helpers
               and list(inspect.signature(fn).parameters)[:1] == ["d"]}
    assert finders == _claimed_in(anomalies)
    assert set(anomalies.VALUE_LEVEL) <= set(BY_NAME)


def test_every_entry_has_exactly_one_finder_and_a_bad_claim_fails_at_once() -> None:
    assert list(FINDERS) == list(REGISTRY) and all(FINDERS[a].anomaly is a for a in REGISTRY)
    held = dict(CLAIMS)

    def another(d):  # a second finder for an entry already claimed
        return d

    with pytest.raises(ClaimError, match="claimed twice"):
        finds("lost-write")(another)
    with pytest.raises(ClaimError, match="does not list"):
        finds("lost-writes")
    assert CLAIMS == held


def test_meaning_is_the_definition_in_plain_text() -> None:
    m = registry.meaning("aborted-read")
    assert "`" not in m and not m.endswith(".")
    assert m == BY_NAME["aborted-read"].definition.replace("`", "")[:-1]


def _bare_run(tmp_path: Path) -> Path:
    """A run directory holding only a results.json in which every anomaly was found."""
    counts = dict.fromkeys(ANOMALIES, 1)
    results = {"verdict": "invalid", "counts": counts, "examples": {},
               "headline": {"lost": 2, "duplicated": 1, "reordered": 2, "diverged": 1}}
    (tmp_path / "results.json").write_text(json.dumps(results))
    return tmp_path


def test_report_meanings_come_from_the_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from analysis.report.page import render_report

    run = _bare_run(tmp_path)
    page = render_report(run).read_text()
    for name in ANOMALIES:
        # Once in the table of counts, once (with the report's own period) in the anomaly's section.
        text = str(escape(registry.meaning(name)))
        assert page.count(text) == 2 and f"{text}. " in page, name
    # Change one definition in the registry: the report follows (it keeps no copy of its own).
    changed = dataclasses.replace(BY_NAME["poll-skip"], definition="a sentinel meaning for `poll-skip`.")
    monkeypatch.setitem(BY_NAME, "poll-skip", changed)
    page = render_report(run).read_text()
    assert page.count("a sentinel meaning for poll-skip") == 2


# Public functions over derive()'s tables in the txn modules that are not finders: shared steps.
TXN_HELPERS = {"txn_anomalies": {"observed_values"}, "cycles": {"writers", "edges", "components", "possible"},
               "eos_anomalies": {"position_edges"}}


@pytest.mark.parametrize("module", ["txn_anomalies", "cycles", "eos_anomalies"])
def test_every_finder_in_the_txn_modules_has_an_entry(module: str) -> None:
    mod = importlib.import_module(f"analysis.checking.{module}")
    finders = {name for name, fn in inspect.getmembers(mod, inspect.isfunction)
               if fn.__module__ == mod.__name__ and not name.startswith("_") and name not in TXN_HELPERS[module]
               and list(inspect.signature(fn).parameters)[:1] == ["d"]}
    assert finders == _claimed_in(mod)
