"""Unavailability (analysis/checking/unavailability.py, analysis/reference/unavailability.py): the
longest stretch of each fault band with no ok write and with no ok read. A hand-made history with
known gaps gives the reference's figures; Spark's bucketed figures agree within its 0.1 s; the
checker puts them in results.json and never changes a verdict for them."""

from __future__ import annotations

import random

from analysis.reference import unavailability as reference
from tests.analysis.histories import write_run

MS = 1_000_000


def history(seed: int = 0) -> list[dict]:
    """A producer sends every 50 ms and a reader polls every 80 ms for 10 s, except that no send
    succeeds from 3.0 to 5.5 s and no poll from 4.0 to 4.9 s. A roll from 2 to 8 s, with broker 2
    down from 2.5 to 6 s, and a kill of broker 1 at 8.5 s that only the heal at 9.5 s ends."""
    rnd = random.Random(seed)
    timed: list[tuple[int, dict]] = []
    value = 0
    for t in range(0, 10_000, 50):
        if 3000 <= t < 5500:
            continue
        value += 1
        jitter = rnd.randint(0, 10)
        timed.append(((t + jitter) * MS, {"process": 0, "type": "invoke", "f": "send", "value": {"key": 0, "value": value}}))
        timed.append(((t + jitter + 5) * MS, {"process": 0, "type": "ok", "f": "send",
                                              "value": {"key": 0, "value": value, "offset": value - 1, "epoch": 0}}))
    read = 0
    for t in range(0, 10_000, 80):
        if 4000 <= t < 4900:
            continue
        timed.append((t * MS + 1, {"process": 1, "type": "invoke", "f": "poll", "value": None}))
        records = [{"key": 0, "offset": read, "value": read + 1, "epoch": 0}] if read < value else []
        read += len(records)
        timed.append((t * MS + 2, {"process": 1, "type": "ok", "f": "poll", "value": {"records": records}}))
    timed += [(2000 * MS, {"process": "nemesis", "type": "info", "f": "roll", "value": {"targets": [2, 1, 3]}}),
              (2500 * MS, {"process": "nemesis", "type": "info", "f": "node-stop", "value": {"targets": [2], "op": "roll"}}),
              (6000 * MS, {"process": "nemesis", "type": "info", "f": "node-start", "value": {"targets": [2], "op": "roll"}}),
              (8000 * MS, {"process": "nemesis", "type": "info", "f": "rolled", "value": {"targets": [2, 1, 3]}}),
              (8500 * MS, {"process": "nemesis", "type": "info", "f": "kill", "value": {"targets": [1]}}),
              (9500 * MS, {"process": "nemesis", "type": "info", "f": "heal", "value": {"isr_full": True}})]
    timed.sort(key=lambda x: x[0])
    return [{"index": i, "time": t, **e} for i, (t, e) in enumerate(timed)]


def test_the_reference_measures_each_bands_longest_gaps():
    bands = {b["f"]: b for b in reference.measure(history())}
    assert set(bands) == {"roll", "node-stop", "kill"}
    roll, down, kill = bands["roll"], bands["node-stop"], bands["kill"]
    assert (roll["start_s"], roll["end_s"], roll["operation"]) == (2.0, 8.0, True)
    assert (down["start_s"], down["end_s"], down["targets"], down["operation"]) == (2.5, 6.0, [2], False)
    assert kill["end_s"] == 9.5  # ended by the heal
    # No send from the last before 3.0 s to the first from 5.5 s: 2.5 s, give or take the jitter.
    assert 2.44 <= roll["no_write_s"] <= 2.56 and down["no_write_s"] == roll["no_write_s"]
    assert roll["no_read_s"] == 1.04  # polls every 80 ms: the last before 4.0 s at 3.92, the next at 4.96
    assert kill["no_write_s"] < 0.1 and kill["no_read_s"] < 0.1


def test_a_band_with_no_completion_at_all_is_unavailable_throughout():
    events = [e for e in history() if not (e["f"] in ("send", "poll") and 2000 * MS <= e["time"] <= 8000 * MS)]
    for i, e in enumerate(events):
        e["index"] = i
    roll = next(b for b in reference.measure(events) if b["f"] == "roll")
    assert roll["no_write_s"] == 6.0 and roll["no_read_s"] == 6.0


def test_a_run_that_never_reads_has_no_read_figure():
    events = [e for e in history() if e["f"] != "poll"]
    for i, e in enumerate(events):
        e["index"] = i
    assert all(b["no_read_s"] is None for b in reference.measure(events))


def test_spark_agrees_with_the_reference_within_its_resolution_and_the_verdict_stands(spark, tmp_path):
    from analysis.checking.checker import check_history

    for seed in (0, 1):
        events = history(seed)
        run = write_run(tmp_path / f"run{seed}", events)
        results = check_history(spark, run, None)
        got = {b["f"]: b for b in results["unavailability"]["bands"]}
        for want in reference.measure(events):
            b = got[want["f"]]
            assert (b["start_s"], b["end_s"], b["targets"]) == (want["start_s"], want["end_s"], want["targets"])
            assert abs(b["no_write_s"] - want["no_write_s"]) <= 0.1 and abs(b["no_read_s"] - want["no_read_s"]) <= 0.1
        assert results["unavailability"]["by_fault"]["roll"]["operation"] is True
        # No config.json: the drain's status is unknown, hence "unknown" (the reader trails, so some
        # sends are unseen); the long gaps themselves are no anomaly.
        assert results["verdict"] == "unknown" and not results["forbidden"]
