"""The transactional anomalies (int-*, precommitted-read, G0, G1c) on Jepsen's published test
histories (tests/analysis/jepsen_histories.py) and on injections, by the reference checker and the
Spark checker, and what Kafka's transaction model permits of them."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from analysis.reference import checker as reference
from analysis.checking.cycles import _components
from analysis.rules.permissions import model_permitted
from analysis.rules.registry import REGISTRY
from tests.analysis.histories import ZERO, Builder, _txn, inject, valid_history, write_run
from tests.analysis.jepsen_histories import HISTORIES

TXN_KINDS = [a.name for a in REGISTRY if a.txns_only and not a.name.startswith("eos-")]  # eos: test_eos_anomalies.py


@pytest.mark.parametrize("name", HISTORIES)
def test_reference_reports_what_jepsen_reports(name):
    history, kind, n = HISTORIES[name]
    assert reference.counts(history())[kind] == n


def test_g1c_of_wr_edges_alone_is_forbidden_and_through_a_ww_edge_permitted():
    assert model_permitted({"G1c": 1}, g1c_wr_only=1)[0] == set()
    allowed, rules = model_permitted({"G1c": 1, "G0": 2}, g1c_wr_only=0)
    assert allowed == {"G1c", "G0"} and "needs a ww edge" in rules[0]
    assert model_permitted({"int-send-skip": 3})[0] == {"int-send-skip"}
    assert model_permitted(dict(ZERO)) == (set(), [])  # nothing found: nothing named


def test_a_component_example_is_a_cycle_its_edges_explain():
    edges = pd.DataFrame([(5, 9, "wr", 0, 1, None), (9, 7, "ww", 1, 2, 3), (7, 5, "ww", 0, 4, 5), (9, 5, "ww", 1, 6, 7)],
                         columns=["src", "dst", "type", "key", "value", "next_value"])
    rows = _components(edges).to_dict("records")
    g0 = [r for r in rows if r["kind"] == "G0"]
    g1c = [r for r in rows if r["kind"] == "G1c"]
    assert g0 == [] and len(g1c) == 1
    (c,) = g1c
    assert c["nodes"] == [5, 7, 9] and c["cycle"][0] == c["cycle"][-1] and not c["wr_only"]
    assert [(e["src"], e["dst"]) for e in c["edges"]] == list(zip(c["cycle"], c["cycle"][1:]))
    assert c["edges"][0]["type"] == "wr"  # the cycle is taken through a wr edge


def _disjoint(histories: list[list[dict]]) -> list[dict]:
    """Several histories in one: keys, values and processes moved apart, indexes renumbered."""
    out: list[dict] = []
    for i, events in enumerate(histories):
        shift_key = lambda k: k + 10 * i  # noqa: E731
        for e in events:
            e = {**e, "index": len(out), "time": len(out) * 1000, "process": e["process"] + 100 * i}
            v = e["value"]
            if isinstance(v, dict):
                v = dict(v)
                if e["f"] == "send":
                    v["key"], v["value"] = shift_key(v["key"]), v["value"] + 1000 * i
                if "keys" in v:
                    v["keys"] = [shift_key(k) for k in v["keys"]]
                for field in ("sends", "records"):
                    if field in v:
                        v[field] = [{**r, "key": shift_key(r["key"]), "value": r["value"] + 1000 * i} for r in v[field]]
                e["value"] = v
            out.append(e)
    return out


def random_txn_history(seed: int, keys: int = 3, n: int = 40) -> list[dict]:
    """Transactions with sends and reads at random, overlapping offsets: for the two checkers to
    agree on (cycles through several ops, skips, reorders), not a realistic run."""
    rnd = random.Random(seed)
    b = Builder()
    written: list[tuple[int, int, int]] = []  # (key, offset, value)
    for i in range(n):
        sends = []
        for _ in range(rnd.randrange(0, 3)):
            k = rnd.randrange(keys)
            sends.append((k, 10 * i + len(sends) + 1, rnd.choice([None, rnd.randrange(12)])))
        records = [rnd.choice(written)[:3] for _ in range(rnd.randrange(0, 3)) if written]
        records = [(k, o, v) for k, o, v in records]
        _txn(b, 1 + i % 4, rnd.choice(["ok", "ok", "ok", "info", "fail"]), sends, records)
        written += [(k, o if o is not None else rnd.randrange(12), v) for k, v, o in sends]
        if rnd.random() < 0.3 and written:
            b.poll(50 + i % 2, [rnd.choice(written) for _ in range(2)])
    return b.events


def test_random_txn_histories_do_hold_findings():
    # So that the agreement test below is not vacuous.
    totals = {k: sum(reference.counts(random_txn_history(s))[k] for s in range(30)) for k in TXN_KINDS}
    assert totals["G0"] and totals["G1c"] and totals["int-nonmonotonic-send"], totals


@pytest.mark.slow
def test_spark_reports_what_jepsen_reports(spark, tmp_path):
    from analysis.checking.checker import check_history

    events = _disjoint([h() for h, _, _ in HISTORIES.values()])
    results = check_history(spark, write_run(tmp_path / "jepsen", events), None)
    assert results["counts"] == reference.counts(events)
    want: dict[str, int] = {}
    for _, kind, n in HISTORIES.values():
        want[kind] = want.get(kind, 0) + n
    for kind, n in want.items():
        assert results["counts"][kind] >= n, kind  # the histories also hold other kinds' findings
    for example in results["examples"]["G1c"]:
        assert example["edges"] and example["ops"][0]["index"] == example["ops"][-1]["index"]
    # g1c-pure-wr closes a cycle of wr edges alone: forbidden; G0 and int-send-skip are permitted.
    assert "G1c" in results["forbidden"]
    assert {"G0", "int-send-skip"} <= set(results["allowed"]) and not {"G0", "int-send-skip"} & set(results["forbidden"])


@pytest.mark.slow
def test_spark_finds_each_txn_injection_exactly(spark, tmp_path):
    from analysis.checking.checker import check_history

    # One history per kind, side by side on their own keys: one Spark check for all seven.
    events = _disjoint([inject(valid_history(20 + i, keys=2), kind).events for i, kind in enumerate(TXN_KINDS)])
    want = {**ZERO, **dict.fromkeys(TXN_KINDS, 1)}
    assert reference.counts(events) == want
    assert check_history(spark, write_run(tmp_path / "inj", events), None)["counts"] == want


@pytest.mark.slow
def test_spark_and_reference_agree_on_random_txn_histories(spark, tmp_path):
    from analysis.checking.checker import check_history

    events = _disjoint([random_txn_history(s) for s in range(6)])
    assert check_history(spark, write_run(tmp_path / "rnd", events), None)["counts"] == reference.counts(events)


def _read_across(reset: tuple[str, list[int], str | None] | None) -> list[dict]:
    """Jepsen's nonmonotonic-poll-test shape: process 0 reads x 1 2 3, then 2 3 4, with an assign
    or subscribe of `reset` = (f, keys, seek) between."""
    b = Builder()
    for o in range(5):
        b.send(9, 0, o + 1, o)
    b.poll(0, [(0, 1, 2), (0, 2, 3), (0, 3, 4)])
    if reset:
        f, keys, seek = reset
        b.add(0, "invoke", f, {"keys": keys, "seek": seek})
        b.add(0, "ok", f, {"keys": keys, "seek": seek})
    b.poll(0, [(0, 2, 3), (0, 3, 4), (0, 4, 5)])
    b.poll(1, [(0, o, o + 1) for o in range(5)])
    return b.events


@pytest.mark.parametrize("reset, found", [
    (None, 1),
    (("assign", [0, 1], None), 1),  # still covers key 0 and seeks nothing: the sequence goes on
    (("subscribe", [0, 1], None), 1),
    (("assign", [1], None), 0),  # drops key 0: its sequence starts over
    # Seeking the committed offsets keeps it too (issue 35 item 7): a re-read from the committed
    # offset is counted (and permitted only across a group rebalance), not hidden by a reset.
    (("assign", [0, 1], "committed"), 1),
    (("subscribe", [0, 1], "committed"), 1),
    (("assign", [0, 1], "beginning"), 0),  # the client asked to read again from the start
])
def test_an_assign_that_covers_the_key_keeps_its_reads_unless_it_seeks_the_beginning(reset, found):
    assert reference.counts(_read_across(reset))["nonmonotonic-poll"] == found


# Spark on the same cases: tests/analysis/test_read_sequence.py (one check with Jepsen's read-sequence cases).
