"""realtime-lag (analysis/checking/lag.py, analysis/reference/lag.py): Jepsen's realtime-lag-test history
(kafka_test.clj), written as ours, gives Jepsen's lags; Spark and the reference agree; a
measurement never changes a verdict."""

from __future__ import annotations

import pytest

from analysis.reference import checker as reference

from analysis.reference import lag as reference_lag
from tests.analysis.histories import ZERO, valid_history, write_run

MS = 1_000_000


def jepsen_realtime_lag():
    ev = []
    def o(t, p, type_, f, value):
        ev.append({"index": len(ev), "time": t * 1_000_000, "process": p, "type": type_, "f": f, "value": value})
    X, Y = 0, 1
    a, b, c, d = 1, 2, 3, 4
    rec = lambda *r: {"records": [{"key": X, "offset": off, "value": v, "epoch": 0} for off, v in r]}
    o(0, 0, "invoke", "assign", {"keys": [X], "seek": "beginning"}); o(1, 0, "ok", "assign", {"keys": [X], "seek": "beginning"})
    o(2, 0, "invoke", "poll", None); o(3, 0, "ok", "poll", rec())
    o(4, 0, "invoke", "send", {"key": X, "value": a}); o(5, 0, "ok", "send", {"key": X, "value": a, "offset": 0, "epoch": None})
    o(6, 0, "invoke", "poll", None); o(7, 0, "ok", "poll", rec())
    o(8, 1, "invoke", "txn", {"sends": [{"key": X, "value": c}, {"key": X, "value": d}], "records": []})
    o(9, 1, "ok", "txn", {"sends": [{"key": X, "value": c, "offset": 2, "epoch": None}, {"key": X, "value": d, "offset": 3, "epoch": None}], "records": []})
    o(10, 0, "invoke", "poll", None); o(11, 0, "ok", "poll", rec())
    o(12, 0, "invoke", "poll", None); o(13, 0, "ok", "poll", rec((0, a), (1, b)))
    o(14, 0, "invoke", "assign", {"keys": [X, Y], "seek": None}); o(15, 0, "ok", "assign", {"keys": [X, Y], "seek": None})
    o(16, 0, "invoke", "poll", None); o(17, 0, "ok", "poll", rec())
    o(18, 0, "invoke", "assign", {"keys": [Y], "seek": None}); o(19, 0, "ok", "assign", {"keys": [Y], "seek": None})
    o(20, 0, "invoke", "assign", {"keys": [X], "seek": "beginning"}); o(21, 0, "ok", "assign", {"keys": [X], "seek": "beginning"})
    o(22, 0, "invoke", "poll", None); o(23, 0, "ok", "poll", rec())
    o(24, 0, "invoke", "poll", None); o(25, 0, "ok", "poll", rec((0, a), (1, b), (2, c), (3, d)))
    o(26, 1, "invoke", "send", {"key": X, "value": b}); o(27, 1, "info", "send", {"key": X, "value": b, "offset": None, "epoch": None})
    return ev


def test_reference_gives_jepsens_lags():
    """Jepsen's (time, process, key, lag), in its time units (ms here). Jepsen also reports key y
    at 16 with lag 0: its assign puts new keys at offset -1, ours only with seek "beginning" (our
    client starts other assigns at the group's committed offsets, unknown to the checker)."""
    got = [(e["time"] // MS, e["process"], e["key"], e["lag_ns"] // MS) for e in reference_lag.entries(jepsen_realtime_lag())]
    assert got == [(2, 0, 0, 0), (6, 0, 0, 1), (10, 0, 0, 5), (12, 0, 0, 3), (16, 0, 0, 7), (22, 0, 0, 17), (24, 0, 0, 0)]
    s = reference_lag.summary(reference_lag.entries(jepsen_realtime_lag()))
    assert (s["max_ms"], s["p50_ms"], s["entries"]) == (17, 3.0, 7)
    assert s["worst"] == {"process": 0, "key": 0, "index": 23, "time": 22 * MS, "lag_ms": 17}


def test_reads_after_the_drain_began_are_not_measured():
    events = jepsen_realtime_lag()
    assert len(reference_lag.entries(events, until_index=22)) == 5  # the polls before index 22: invoked at 2 ... 16
    assert reference_lag.summary([]) is None


@pytest.mark.slow
def test_spark_measures_the_lag_the_reference_does(spark, tmp_path):
    from analysis.checking.checker import check_history
    from tests.analysis.test_txn_anomalies import _disjoint

    events = _disjoint([jepsen_realtime_lag(), valid_history(3).events, valid_history(4).events])
    for i, e in enumerate(events):
        e["time"] = i * 7 * MS + (i % 5) * 300_000  # not round: percentiles interpolate
    want = reference_lag.summary(reference_lag.entries(events))
    results = check_history(spark, write_run(tmp_path / "lag", events), None)
    assert results["realtime_lag"] == want and want["max_ms"] > 0
    assert results["counts"] == reference.counts(events) == ZERO and results["verdict"] != "invalid"


def consumers_that_move(seed: int) -> list[dict]:
    """Sends on 3 keys, and 3 consumers that assign (keeping what they still cover, from the
    beginning, or at committed offsets), subscribe, poll and read in txns at random: every way a
    position is set, kept, moved or dropped (analysis/reference/lag.py)."""
    import random

    from tests.analysis.histories import Builder

    rnd = random.Random(seed)
    b = Builder()
    logs: dict[int, int] = {0: 0, 1: 0, 2: 0}
    value = 0
    for _ in range(160):
        action = rnd.random()
        p = 100 + rnd.randrange(3)
        if action < 0.4:
            k = rnd.randrange(3)
            value += 1
            logs[k] += rnd.choice([1, 1, 2])  # now and then a gap, as a transaction marker leaves
            b.send(rnd.randrange(2), k, value, logs[k] - 1)
        elif action < 0.75:
            k = rnd.randrange(3)
            records = [(k, o, 0) for o in sorted(rnd.sample(range(logs[k] + 1), min(logs[k] + 1, rnd.randrange(4))))]
            if rnd.random() < 0.2:
                b.add(p, "invoke", "txn", {"sends": [], "records": []})
                b.add(p, "ok", "txn", {"sends": [], "records": [{"key": a, "offset": o, "value": v, "epoch": 0}
                                                                for a, o, v in records]})
            else:
                b.poll(p, records)
        elif action < 0.9:
            b.assign(p, sorted(rnd.sample(range(3), rnd.randrange(1, 4))), rnd.choice([None, "beginning", "committed"]))
        else:
            sub = {"keys": [0, 1, 2], "seek": "committed"}
            b.add(p, "invoke", "subscribe", sub)
            b.add(p, "ok", "subscribe", sub)
    for i, e in enumerate(b.events):
        e["time"] = i * 3 * MS + (i % 7) * 100_000
    return b.events


@pytest.mark.slow
def test_spark_gives_the_references_lag_entry_for_every_poll_and_key(spark, tmp_path):
    """Entry by entry, not only the summary: each (process, key, op) with its position and lag."""
    from analysis.checking.checker import derive
    from analysis.checking.history_load import load_history
    from analysis.checking.lag import entries
    from harness.history.record import as_record

    for seed in (1, 2, 3):
        events = consumers_that_move(seed)
        until = len(events) - 40  # the last ops as if the drain had begun
        want = sorted((e["process"], e["key"], e["index"], e["time"], e["position"], e["lag_ns"])
                      for e in reference_lag.entries(events, until_index=until))
        history = load_history(spark, write_run(tmp_path / f"moves-{seed}", events))
        d, pairs = derive(history, as_record(None))
        try:
            got = sorted(tuple(r) for r in entries(d, until).select("pid", "key", "index", "time", "position",
                                                                        "lag_ns").collect())
        finally:
            pairs.unpersist()
            d.unpersist()
            history.release()
        assert got == want and len(want) > 50 and any(e[-1] > 0 for e in want), seed
        assert {e[4] for e in want} & {-1} and len({e[0] for e in want}) == 3, seed  # -1 positions and every process
