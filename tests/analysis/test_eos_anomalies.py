"""The exactly-once pipeline's checks (eos-lost, eos-duplicate, eos-G1c, and aborted-read of the
output) on synthetic eos histories: one clean pipeline, then one injection per anomaly. The
reference checker must find exactly the injected finding, and the Spark checker the same counts."""

from __future__ import annotations

import pytest

from analysis.reference import checker as reference
from analysis.rules.permissions import allowed
from analysis.rules.verdict import decide, headline
from harness.history.eos import OUTPUT_KEY_BASE as OUT, VALUE_STRIDE as S
from harness.history.format import validate_events
from tests.analysis.histories import ZERO, Builder, _txn, write_run

FEED, WORKER, ZOMBIE, READER, DRAIN = 0, 10, 11, 20, 30


def pipeline(b: Builder, p: int, type_: str, attempt: int, records: list[tuple[int, int, int]],
             out_offsets: list[int | None]) -> list[tuple[int, int, int]]:
    """A pipeline txn: input records (key, offset, value) -> output sends at these offsets;
    returns the output records (key, offset, value) it wrote."""
    sends = [(OUT + k, v + S * attempt, o) for (k, _, v), o in zip(records, out_offsets)]
    _txn(b, p, type_, sends, records)
    return [(k, o, v) for k, v, o in sends]


def clean(inject: str | None = None) -> list[dict]:
    """Six input values on key 0; T1 commits three, T2 aborts two (the worker rewinds), T3 commits
    the last three; a read_committed reader reads the committed output, a drain the input."""
    b = Builder()
    for i in range(6):
        b.send(FEED, 0, i + 1, i)
    b.assign(WORKER, [0], "committed")
    inp = [(0, i, i + 1) for i in range(6)]
    out = pipeline(b, WORKER, "ok", 1, inp[:3], [0, 1, 2])
    aborted = pipeline(b, WORKER, "fail", 2, inp[3:5], [3, 4])  # its marker at 5
    b.assign(WORKER, [0], "committed")
    if inject == "eos-lost":  # T3 skips input offset 4 and commits past it
        out += pipeline(b, WORKER, "ok", 3, [inp[3], inp[5]], [6, 7])
    else:
        out += pipeline(b, WORKER, "ok", 3, inp[3:], [6, 7, 8])
    if inject == "eos-duplicate":  # a zombie worker processes input 6 again and commits
        out += pipeline(b, ZOMBIE, "ok", 4, inp[5:], [9])
    b.assign(READER, [OUT], "beginning")
    b.poll(READER, sorted(out + (aborted[:1] if inject == "aborted-read" else [])))
    b.assign(DRAIN, [0], "beginning")
    b.poll(DRAIN, inp)
    return b.events


def cycle() -> list[dict]:
    """Two ok pipeline txns on input keys 0 and 1, each starting where the other committed on one
    key: A reads key 0 at 0-1 and key 1 at 2-3, B key 0 at 2-3 and key 1 at 0-1."""
    b = Builder()
    for k in (0, 1):
        for i in range(4):
            b.send(FEED, k, 10 * k + i, i)
    b.assign(WORKER, [0, 1], "committed")
    b.assign(ZOMBIE, [0, 1], "committed")
    a = pipeline(b, WORKER, "ok", 1, [(0, 0, 0), (0, 1, 1), (1, 2, 12), (1, 3, 13)], [0, 1, 0, 1])
    c = pipeline(b, ZOMBIE, "ok", 2, [(0, 2, 2), (0, 3, 3), (1, 0, 10), (1, 1, 11)], [2, 3, 2, 3])
    b.assign(READER, [OUT, OUT + 1], "beginning")
    b.poll(READER, sorted(a + c))
    return b.events


CASES = {"clean": (clean, {}), "eos-lost": (lambda: clean("eos-lost"), {"eos-lost": 1, "unseen": 0}),
         "eos-duplicate": (lambda: clean("eos-duplicate"), {"eos-duplicate": 1}),
         "aborted-read": (lambda: clean("aborted-read"), {"aborted-read": 1, "eos-duplicate": 1}),
         "eos-G1c": (cycle, {"eos-G1c": 1})}


@pytest.mark.parametrize("name", CASES)
def test_the_histories_are_valid_v1(name):
    assert validate_events(CASES[name][0]()) == []


def test_reference_finds_exactly_the_injected_anomaly():
    assert reference.counts(clean()) == ZERO
    lost = reference.counts(clean("eos-lost"))
    # Skipping input offset 4 is also a skip inside the txn and in the worker's read sequence.
    assert lost["eos-lost"] == 1 and lost["int-poll-skip"] == 1 and lost["poll-skip"] == 1
    assert reference.findings(clean("eos-lost"))["eos-lost"] == {5}  # input value 5, at offset 4
    assert reference.counts(clean("eos-duplicate")) == {**ZERO, "eos-duplicate": 1}
    assert reference.findings(clean("eos-duplicate"))["eos-duplicate"] == {6}
    # Input 4 made twice (aborted, then committed) and both read: a duplicate in the output too.
    assert reference.counts(clean("aborted-read")) == {**ZERO, "aborted-read": 1, "eos-duplicate": 1}
    c = reference.counts(cycle())
    assert c["eos-G1c"] == 1 and c["G1c"] == 0  # only the committed input offsets close it


def test_histories_of_other_workloads_have_no_pipeline():
    # A txn that reads and sends on small keys (Jepsen's shape) is no pipeline txn: nothing eos.
    b = Builder()
    b.send(FEED, 0, 1, 0)
    _txn(b, WORKER, "ok", [(1, 2, 0)], [(0, 0, 1)])
    _txn(b, ZOMBIE, "ok", [(1, 3, 1)], [(0, 1, 9)])
    counts = reference.counts(b.events)
    assert counts["eos-lost"] == counts["eos-duplicate"] == counts["eos-G1c"] == 0


def test_eos_lost_waits_for_the_drain_and_counts_as_lost():
    counts = {**ZERO, "eos-lost": 2, "eos-duplicate": 1}
    assert decide(counts, set(), drain_complete=False).verdict == "invalid"  # eos-duplicate
    v = decide({**ZERO, "eos-lost": 2}, set(), drain_complete=False)
    assert v.verdict == "unknown" and "pipeline committed past" in v.reasons[0]
    assert decide({**ZERO, "eos-lost": 2}, set(), drain_complete=True).forbidden == ["eos-lost"]
    head = headline(counts, True, ["eos-lost", "eos-duplicate"])
    assert head["lost"] == 2 and head["duplicated"] == 1 and head["other"] == 0


def test_input_loss_and_duplication_permits_theirs_in_the_pipeline():
    assert "eos-lost" in allowed({"profile": {"acks": "1"}, "workload": "eos"})[0]
    assert "eos-duplicate" in allowed({"profile": {"enable.idempotence": False, "retries": 5}, "workload": "eos"})[0]
    assert not {"eos-lost", "eos-duplicate", "eos-G1c"} & allowed({"workload": "eos"})[0]


@pytest.mark.slow
def test_spark_agrees_with_the_reference_on_every_case(spark, tmp_path):
    from analysis.checking.checker import check_history
    from tests.analysis.test_txn_anomalies import _disjoint

    # Every case side by side on its own keys (output keys stay at 1000 + k): one Spark check.
    events = _disjoint([make() for make, _ in CASES.values()])
    want = reference.counts(events)
    assert want == {**ZERO, "eos-lost": 1, "int-poll-skip": 1, "poll-skip": 1, "eos-duplicate": 2,
                    "aborted-read": 1, "eos-G1c": 1}
    config = {"workload": "eos", "drain": {"complete": True}}
    results = check_history(spark, write_run(tmp_path / "eos", events, config), config)
    assert results["counts"] == want
    assert {"eos-lost", "eos-duplicate", "eos-G1c", "aborted-read"} <= set(results["forbidden"])
    (g1c,) = results["examples"]["eos-G1c"]
    assert g1c["size"] == 2 and g1c["wr_only"] and g1c["ops"][0]["index"] == g1c["ops"][-1]["index"]
    (lost,) = results["examples"]["eos-lost"]
    assert (lost["key"], lost["offset"], lost["value"]) == (10, 4, 1005)  # case 1's input value 5, moved


@pytest.mark.slow
def test_a_history_without_a_pipeline_skips_the_eos_finders_with_their_own_columns(spark, tmp_path):
    from analysis.checking import anomalies as A
    from analysis.checking import eos_anomalies as E
    from analysis.checking.history_load import load_history

    def derived(name, events):
        h = load_history(spark, write_run(tmp_path / name, events))
        d = A.derive(h.events, h.op_stats, read_committed=True)
        d.op_stats = h.op_stats
        return d

    with_pipeline, without = derived("eos", clean()), derived("queue", _queue_only())
    assert E._has_pipeline(with_pipeline) and not E._has_pipeline(without)
    for finder in (E.eos_lost, E.eos_duplicate, E.eos_g1c):
        empty, real = finder(without), finder(with_pipeline)
        assert empty.schema.simpleString() == real.schema.simpleString()
        assert empty.count() == 0
    with_pipeline.unpersist()
    without.unpersist()


def _queue_only() -> list[dict]:
    """Sends and a read on input keys only, one txn among them: txns, but no pipeline."""
    b = Builder()
    b.send(FEED, 0, 1, 0)
    _txn(b, WORKER, "ok", [(0, 2, 1)], [])
    b.assign(READER, [0], "beginning")
    b.poll(READER, [(0, 0, 1), (0, 1, 2)])
    return b.events
