"""Each anomaly example explained (issue 19 item 7): synthetic runs with lost writes must get an
explanation that names the lost value, its offset, the value read there instead, and a UTC time;
from the plain-Python reference's findings here, from the Spark checker in test_explain_spark."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from analysis.explain import explanations as explain

from analysis.reference import checker as reference
from analysis.explain.text import first_examples
from analysis.report.page import render_report
from analysis.report.explanations import clip
from tests.reports.lost_runs import make_lost_run

TIME = re.compile(r"\d\d:\d\d:\d\d\.\d{3} UTC")


def _explained(run_dir: Path) -> dict:
    events = reference.read_jsonl(run_dir / "history.jsonl")
    config = json.loads((run_dir / "config.json").read_text())
    return explain.explain(run_dir, explain.examples_from_findings(reference.findings(events)), config)


def _lost_sentences(got: dict) -> dict[int, str]:
    return {x["value"]: x["sentence"] for x in got["examples"]["lost-write"]}


@pytest.mark.parametrize("seed,lost", [(1, 1), (2, 3), (7, 5)])
def test_each_lost_write_names_value_offset_replacement_and_utc(tmp_path: Path, seed: int, lost: int) -> None:
    run_dir, truth = make_lost_run(tmp_path, f"run-{seed}", seed=seed, lost=lost)
    got = _explained(run_dir)
    sentences = _lost_sentences(got)
    assert sorted(sentences) == sorted(t["value"] for t in truth)
    for t in truth:
        s = sentences[t["value"]]
        assert f"value {t['value']} was acknowledged at offset {t['offset']} of queue-0" in s
        assert f"at offset {t['offset']} they read value {t['instead']}, written in epoch 6" in s
        assert TIME.search(s) and "≈" not in s  # the recorded start: an exact time
        assert "broker 2 (leader when struck) was being killed" in s
        assert "leader epoch 5" in s  # the write acknowledged just before it was read back in epoch 5
        ctx = next(x for x in got["examples"]["lost-write"] if x["value"] == t["value"])
        assert [r["value"] for r in ctx["read_instead"]] == [t["instead"]]
        assert ctx["faults_at_completion"][0]["targets"] == [2]
        assert ctx["completion"]["utc"].startswith("2026-03-02 12:03:0")


def test_utc_without_a_recorded_start_is_estimated_and_marked(tmp_path: Path) -> None:
    run_dir, truth = make_lost_run(tmp_path, "20260302T120300-abcdef", recorded_start=False, logs=False, lost=1)
    got = _explained(run_dir)
    s = _lost_sentences(got)[truth[0]["value"]]
    assert "≈12:03:0" in s and got["clock"]["exact"] is False and "run id" in got["clock"]["source"]
    # No timestamped name either: the history file's modification time still places it.
    other, truth = make_lost_run(tmp_path, "plain-name", recorded_start=False, lost=1)
    got = _explained(other)
    assert TIME.search(_lost_sentences(got)[truth[0]["value"]]) and "modification" in got["clock"]["source"]


def test_no_epochs_and_no_logs_still_name_the_facts(tmp_path: Path) -> None:
    run_dir, truth = make_lost_run(tmp_path, "bare", epochs=False, logs=False, lost=2)
    for t in truth:
        s = _lost_sentences(_explained(run_dir))[t["value"]]
        assert f"offset {t['offset']}" in s and f"value {t['instead']}, epoch not reported" in s and TIME.search(s)


def test_broker_log_lines_about_the_partition_within_two_seconds_quoted_whole(tmp_path: Path) -> None:
    run_dir, truth = make_lost_run(tmp_path, "logs", lost=1)
    ctx = _explained(run_dir)["examples"]["lost-write"][0]
    texts = [x["text"] for x in ctx["log_lines"]]
    server3 = (run_dir / "brokers/3/server.log").read_text().splitlines()
    starts = next(line for line in server3 if "starts at leader epoch 6" in line)
    assert starts in texts  # whole, as written
    assert not any("queue-1 " in x for x in texts)  # another partition
    assert not any("version updated to 11" in x for x in texts)  # 9 s later: outside the window
    assert not any(x.startswith(("java.io", "\tat ")) for x in texts)  # continuation lines are not lines about it
    assert ctx["leader"]["epoch"] == 5 and ctx["leader"]["broker"] == 2  # as the kill struck, before the change


def test_spark_and_reference_examples_get_the_same_sentences(tmp_path: Path) -> None:
    """The Spark checker's examples carry key, offset and ops; the reference's only the value:
    both must be explained alike (the Spark example's shape, built by hand here)."""
    run_dir, truth = make_lost_run(tmp_path, "same", lost=2)
    config = json.loads((run_dir / "config.json").read_text())
    spark_like = {"lost-write": [{"key": 0, "offset": t["offset"], "value": t["value"], "max_read_offset": 999,
                                  "ops": [{"index": 1, "time": 1, "process": "1", "f": "send", "type": "ok"}]} for t in truth]}
    a = explain.explain(run_dir, spark_like, config)["examples"]["lost-write"]
    b = _lost_sentences(_explained(run_dir))
    assert {x["value"]: x["sentence"] for x in a} == b


def test_parquet_only_history_is_explained(tmp_path: Path) -> None:
    from harness.history import write_parquet

    run_dir, truth = make_lost_run(tmp_path, "pq", lost=1)
    events = reference.read_jsonl(run_dir / "history.jsonl")
    write_parquet(run_dir / "history.jsonl", run_dir / "history.parquet")
    (run_dir / "history.jsonl").unlink()
    got = explain.explain(run_dir, explain.examples_from_findings(reference.findings(events)),
                          json.loads((run_dir / "config.json").read_text()))
    assert f"they read value {truth[0]['instead']}" in got["examples"]["lost-write"][0]["sentence"]


def test_check_prints_the_first_example_of_each_anomaly(tmp_path: Path) -> None:
    run_dir, truth = make_lost_run(tmp_path, "cli", lost=2)
    results = {"explanations": _explained(run_dir)}
    text = first_examples(results)
    assert text.startswith("first lost-write: value ") and text.count("first lost-write") == 1
    assert first_examples({}) == ""


def test_report_shows_the_explanation_and_clips_long_log_lines(tmp_path: Path) -> None:
    run_dir, truth = make_lost_run(tmp_path, "report", lost=2)
    events = reference.read_jsonl(run_dir / "history.jsonl")
    counts = reference.counts(events)
    results = {"verdict": "invalid", "counts": counts, "headline": {"lost": counts["lost-write"]}, "reasons": [],
               "forbidden": ["lost-write"], "allowed": [], "allowed_by": [],
               "examples": explain.examples_from_findings(reference.findings(events)), "history": {"events": len(events)}}
    (run_dir / "results.json").write_text(json.dumps(results))
    page = render_report(run_dir).read_text()
    own = re.sub(r"<script>.*?</script>", "", page, flags=re.S)
    t = truth[0]
    assert f"value {t['value']} was acknowledged at offset {t['offset']} of queue-0" in own
    assert 'id="explain-lost-write-1"' in own and "starts at leader epoch 6" in own
    assert "rest of the line" in own  # the fetcher's long line: cut, the rest in a <details>
    assert "zoomed on the anomaly" in page


def test_clip_cuts_at_a_word_and_keeps_the_rest() -> None:
    text = "alpha beta gamma delta epsilon"
    head, rest = clip(text, 13)
    assert head == "alpha beta" and rest == "gamma delta epsilon" and f"{head} {rest}" == text
    assert clip("short", 13) == ("short", "")
    long_token = "x" * 40
    head, rest = clip(long_token, 13)
    assert head + rest == long_token and len(head) == 13


def test_explanation_failure_never_costs_the_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir, _ = make_lost_run(tmp_path, "broken", lost=1)
    shutil.rmtree(run_dir / "brokers")
    (run_dir / "brokers").write_text("not a folder")  # no broker logs to quote: still explained
    results = explain.attach(run_dir, {"verdict": "invalid", "examples": {"lost-write": [{"value": 1}]}}, None)
    assert results["verdict"] == "invalid" and "error" not in results["explanations"]

    def boom(*a: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(explain, "scan", boom)
    results = explain.attach(run_dir, {"verdict": "invalid", "examples": {"lost-write": [{"value": 1}]}}, None)
    assert results["verdict"] == "invalid" and "disk on fire" in results["explanations"]["error"]


def test_a_backward_read_is_placed_at_the_read_that_went_back(tmp_path: Path) -> None:
    """0.10.2.2, detection seed 6: a consumer read queue-4's offsets 0..1 at 1 µs, 2 at 3 µs, then,
    its position out of range after a truncation, offset 0 again: the sentence names the last read."""
    from tests.analysis.histories import Builder, write_run

    b = Builder()
    b.assign(2, [4])
    b.poll(2, [(4, 0, 10), (4, 1, 11)])
    b.poll(2, [(4, 2, 12)])
    b.poll(2, [(4, 0, 10)])  # back to offset 0 without any assign
    run_dir = write_run(tmp_path, b.events, {"profile": {"name": "safe"}, "drain": {"complete": True},
                                             "history_start_utc": "2026-11-24T00:57:33.000000+00:00"})
    events = reference.read_jsonl(run_dir / "history.jsonl")
    found = explain.examples_from_findings(reference.findings(events))
    assert found.get("nonmonotonic-poll") == [{"process": 2, "key": 4, "offsets": [2, 0]}]
    got = explain.explain(run_dir, found, json.loads((run_dir / "config.json").read_text()))["examples"]["nonmonotonic-poll"][0]
    last_read_s = b.events[-1]["time"] / 1e9
    assert got["at"]["from_s"] == got["at"]["to_s"] == round(last_read_s, 3)
    assert "read queue-4 at offset 2 then, not after it, at offset 0" in got["sentence"]


def test_a_followers_start_line_names_the_current_leader_not_the_follower(tmp_path: Path) -> None:
    """4.x logs "Follower T-K starts at leader epoch E ... Current leader is L." on the follower: the
    leader is L, not the broker that wrote the line (a kafka17754 explanation named follower 2)."""
    from analysis.explain.logs import LogView

    for broker, text in (("2", "INFO [Broker id=2] Follower scenario-0 starts at leader epoch 0 from offset 0 with "
                               "partition epoch 0 and high watermark 0. Current leader is 1. Previous leader None and "
                               "previous leader epoch was -1. (state.change.logger)"),
                         ("1", "INFO [Broker id=1] Leader scenario-0 starts at leader epoch 0 from offset 0 with "
                               "partition epoch 0, high watermark 0, ISR [1,3,2]. (state.change.logger)")):
        (tmp_path / "brokers" / broker).mkdir(parents=True)
        (tmp_path / "brokers" / broker / "server.log").write_text(f"[2026-11-24T08:27:20,548] {text}\n")
    view = LogView(tmp_path, "scenario", {0})
    follower_first = view.leader_at(0, 1795508840548000000)
    assert follower_first is not None and follower_first["leader"] == 1 and follower_first["epoch"] == 0
    (tmp_path / "brokers" / "1" / "server.log").unlink()
    alone = LogView(tmp_path, "scenario", {0}).leader_at(0, 1795508840548000000)
    assert alone is not None and alone["leader"] == 1 and alone["file"] == "brokers/2/server.log"


def test_a_torn_txns_unread_record_is_explained_as_proven_and_lost_after_a_full_drain(tmp_path: Path) -> None:
    """KAFKA-17754's shape: a txn of b1, b2 ends info (the client saw it fail), a read_committed
    reader returned b1, so the txn committed; b2 was never read. The sentence says why the write
    counts although it was never acknowledged, and that a complete drain makes it lost."""
    from analysis.explain import explanations as explain
    from analysis.reference import checker as reference
    from tests.analysis.histories import Builder, _txn, write_run

    b = Builder()
    _txn(b, 0, "info", [(0, 2, None), (0, 3, None)])
    b.events[-1]["error"] = "INVALID_TXN_STATE: Failed to end transaction"
    b.poll(1, [(0, 2, 2)])
    run_dir = write_run(tmp_path / "torn", b.events, {"topic": "scenario"})
    examples = explain.examples_from_findings(reference.findings(b.events))
    assert [e["value"] for e in examples["unseen"]] == [3]
    drained = explain.explain(run_dir, examples, {"topic": "scenario"}, drain={"complete": True})
    text = drained["examples"]["unseen"][0]["sentence"]
    assert "value 3 was sent to scenario-0 in a txn that ended with an unknown outcome" in text
    assert "INVALID_TXN_STATE" in text and "proved committed" in text and "offset None" not in text
    assert text.endswith("it is lost.")
    undrained = explain.explain(run_dir, examples, {"topic": "scenario"}, drain={"complete": False})
    assert undrained["examples"]["unseen"][0]["sentence"].endswith("only if the final drain reached the high watermark.")


def test_a_fault_on_two_brokers_takes_the_plural() -> None:
    from analysis.explain.text import faults_phrase

    cut = {"fault": "start-partition", "label": "partition → brokers 3,2", "targets": [3, 2], "roles": {}}
    kill = {"fault": "kill", "label": "kill → broker 2", "targets": [2], "roles": {}}
    assert faults_phrase({"faults_at_completion": [cut, kill], "partition": "queue-7"}) == (
        "while broker 3 and broker 2 were partitioned off; and broker 2 was being killed")


def test_report_says_why_replicas_diverged(tmp_path: Path) -> None:
    from analysis.explain.replica_evidence import read_replica_divergence

    run_dir, _ = make_lost_run(tmp_path, "replicas", lost=0, errors=False)
    same = {"diverged": False, "first_offset": None, "diverged_offsets": 0, "log_end_offsets": {"1": 4, "2": 4}, "differences": []}
    odd = {"diverged": True, "first_offset": 4, "last_offset": 5, "diverged_offsets": 2, "log_end_offsets": {"1": 6, "2": 6},
           "differences": [{"offset": 4, "values": {"1": 40, "2": 41}}]}
    reps = {"1": {"leader_epochs": [[1, 0], [3, 6]]}, "2": {"leader_epochs": [[1, 0], [2, 4], [3, 6]]}}
    (run_dir / "replicas.json").write_text(json.dumps({"topic": "queue", "tool": "kafka.tools.DumpLogSegments", "partitions": {
        "0": {"replicas": reps, "divergence": same}, "1": {"replicas": reps, "divergence": odd}}}))
    events = reference.read_jsonl(run_dir / "history.jsonl")
    results = {"verdict": "invalid", "counts": reference.counts(events), "headline": {}, "reasons": [], "forbidden": [],
               "allowed": [], "allowed_by": [], "examples": {}, "history": {"events": len(events)},
               "replica_divergence": read_replica_divergence(run_dir)}
    (run_dir / "results.json").write_text(json.dumps(results))
    own = re.sub(r"<script>.*?</script>", "", render_report(run_dir).read_text(), flags=re.S)
    assert "queue-1: 2 offset(s) differ (offsets 4-5)" in own and "epoch 2 from offset 4, which broker 1 never had" in own


def test_a_duplicate_re_sent_under_a_bumped_epoch_says_so(tmp_path: Path) -> None:
    """4.4.0 campaign seed 19 (2026-11-27): the checker found, for each duplicated value, its
    producer's local message timeout and its epoch rising while it was in flight (the example's
    `client`, analysis/checking/checker.py). The sentence says both and names librdkafka's re-send;
    an example without that evidence says nothing of the kind."""
    from tests.analysis.histories import Builder, write_run

    b = Builder()
    b.assign(5, [0])
    b.send(0, 0, 10, 0)
    b.send(0, 0, 10, 7)
    b.add(5, "invoke", "poll", None)
    b.add(5, "ok", "poll", {"records": [{"key": 0, "offset": 0, "value": 10, "epoch": 1},
                                        {"key": 0, "offset": 7, "value": 10, "epoch": 1}]})
    run_dir = write_run(tmp_path, b.events, {"history_start_utc": "2026-11-25T03:07:19.000000+00:00"})
    config = {"topic": "queue", "history_start_utc": "2026-11-25T03:07:19.000000+00:00"}
    client = {"timed_out_s": 343.104, "epoch_bump": {"from": 0, "to": 89, "at_s": 343.7}}
    got = explain.explain(run_dir, {"duplicate": [{"value": 10, "client": client}, {"value": 10}]}, config)["examples"]["duplicate"]
    assert got[0]["client"] == client
    assert ("; while it was in flight its producer's messages timed out locally (_MSG_TIMED_OUT, first at t=343.104 s) and "
            "its producer's epoch rose from 0 to 89 (first seen at t=343.700 s): librdkafka then re-sends") in got[0]["sentence"]
    assert "librdkafka" not in got[1]["sentence"]


def test_a_very_long_log_line_is_shown_to_a_bound_and_says_where_the_rest_is() -> None:
    """The 4.4.0 campaign's seed 5 quoted a 3,809-character fetcher line about 200 times, whole and
    twice each: 1.17 MB of report (issue 34: at most 1 MB). Its <details> now holds the rest up to
    REST_MAX characters, once, and names the file and line for the remainder."""
    from analysis.report.explanations import CLIP, REST_MAX, render

    text = "[2026-11-27T12:20:19,610] WARN Error in response for fetch request " + " ".join(f"part{i}" for i in range(700))
    line = {"broker": "1", "file": "brokers/1/server.log", "line": 77, "text": text}
    page = str(render("inconsistent-offsets", [{"sentence": "s", "log_lines": [line] * 3, "partition": "queue-0"}], None))
    assert page.count("part699") == 0 and page.count("part1 ") == 3  # the head, once per quote
    assert page.count(" more characters in brokers/1/server.log line 77") == 3
    assert len(page) < 3 * (CLIP + REST_MAX) + 6_000 < 3 * len(text)
    short = {**line, "text": text[:600]}
    page = str(render("inconsistent-offsets", [{"sentence": "s", "log_lines": [short], "partition": "queue-0"}], None))
    assert "more characters in" not in page and "rest of the line" in page
