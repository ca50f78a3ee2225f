"""`harness prune` (harness/store_commands.py) and compact_history: a checked run keeps one durable
form of its history, old runs keep only their verdicts, and nothing still running is touched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.history import read_history, write_json, write_parquet
from harness.history.files import compact_history
from harness.store_commands import KEPT, prune_store


def make_run(store: Path, run_id: str, status: str = "completed", checked: bool = True, twin: bool = True) -> Path:
    run = store / run_id
    (run / "brokers" / "1").mkdir(parents=True)
    events = [{"index": i, "time": i * 1000, "process": 0 if i % 3 else "nemesis", "type": "invoke" if i % 2 else "ok",
               "f": "send", "value": [i, i * 10]} for i in range(50)]
    (run / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    if twin:
        write_parquet(run / "history.jsonl", run / "history.parquet")
    write_json(run / "config.json", {"run_id": run_id, "status": status})
    write_json(run / "cluster.json", {"run_id": run_id})
    if checked:
        write_json(run / "results.json", {"verdict": "valid"})
    (run / "report.html").write_text("<html>report</html>")
    (run / "brokers" / "1" / "server.log").write_text("INFO started\n" * 100)
    return run


def test_compaction_keeps_the_parquet_twin_and_the_history_reads_the_same(tmp_path):
    run = make_run(tmp_path, "20261125T100000-aaaaaa")
    before = read_history(run / "history.jsonl")
    done = compact_history(run)
    assert done["compacted"] and done["events"] == 50 and not (run / "history.jsonl").exists()
    assert read_history(run / "history.jsonl") == before  # read from history.parquet, as the JSON Lines held it


def test_compaction_keeps_both_when_they_disagree_or_the_twin_is_missing(tmp_path):
    run = make_run(tmp_path, "20261125T100000-aaaaaa")
    with open(run / "history.jsonl", "a") as f:
        f.write(json.dumps({"index": 50, "time": 1, "process": 0, "type": "ok", "f": "send", "value": [1, 1]}) + "\n")
    assert compact_history(run) == {"compacted": False, "why": "history.parquet holds 50 events and history.jsonl 51: both kept"}
    failed = make_run(tmp_path, "20261125T110000-bbbbbb", twin=False)
    assert not compact_history(failed)["compacted"] and (failed / "history.jsonl").exists()


def test_prune_compacts_checked_runs_prunes_old_ones_and_leaves_running_and_unchecked_alone(tmp_path):
    new = make_run(tmp_path, "20991231T000000-newnew")  # the future: never old
    old = make_run(tmp_path, "20200101T000000-oldold")
    older = make_run(tmp_path, "20190101T000000-olders")
    running = make_run(tmp_path, "20180101T000000-runrun", status="running")
    unchecked = make_run(tmp_path, "20991230T000000-unchkd", checked=False)
    report = prune_store(tmp_path, older_than_days=30, keep_last=2)
    assert report["compacted"] == [new.name] and sorted(report["pruned"]) == sorted([old.name, older.name])
    assert not (new / "history.jsonl").exists() and (new / "history.parquet").exists() and (new / "report.html").exists()
    for run in (old, older):
        assert sorted(p.name for p in run.iterdir()) == sorted(set(KEPT) - {"FAILED"})
        assert json.loads((run / "results.json").read_text())["verdict"] == "valid"
        assert "history.jsonl" in (run / "PRUNED").read_text()
    assert (running / "history.jsonl").exists() and (running / "brokers").exists()
    assert (unchecked / "history.jsonl").exists()  # not checked yet: its history is not compacted
    assert report["freed_bytes"] > 0
    assert prune_store(tmp_path, 30, 2)["freed_bytes"] == 0  # a second pass has nothing left to do


def test_prune_dry_run_changes_nothing_and_a_missing_store_is_exit_2(tmp_path):
    run = make_run(tmp_path, "20200101T000000-oldold")
    report = prune_store(tmp_path, 1, 0, dry_run=True)
    assert report["pruned"] == [run.name] and (run / "history.jsonl").exists() and not (run / "PRUNED").exists()
    out = subprocess.run([sys.executable, "-m", "harness", "prune", str(tmp_path / "nowhere")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "not a store folder" in out.stderr


def test_a_compacted_or_pruned_run_keeps_its_verdict_and_a_changed_twin_does_not(tmp_path):
    from analysis.checking.results_file import history_fingerprint, stale_reason

    run = make_run(tmp_path, "20200101T000000-oldold")
    results = {"verdict": "valid", "history": {"fingerprint": history_fingerprint(run)}}
    compact_history(run)
    assert stale_reason(run, results) is None  # history.jsonl went; the Parquet twin it was checked with is unchanged
    write_parquet_again = (run / "history.parquet").read_bytes()
    (run / "history.parquet").write_bytes(write_parquet_again + b"\0")
    assert "history changed after it was checked (history.parquet)" in stale_reason(run, results)
    pruned = make_run(tmp_path, "20190101T000000-olders")
    results = {"verdict": "valid", "history": {"fingerprint": history_fingerprint(pruned)}}
    prune_store(tmp_path, 1, 0)
    assert not (pruned / "history.parquet").exists() and stale_reason(pruned, results) is None
    gone = make_run(tmp_path, "20180101T000000-vanish")
    results = {"verdict": "valid", "history": {"fingerprint": history_fingerprint(gone)}}
    (gone / "history.jsonl").unlink()
    (gone / "history.parquet").unlink()
    assert "history changed after it was checked" in stale_reason(gone, results)  # gone with no note why


def test_the_dashboard_and_trends_read_the_runs_of_shard_stores_inside_a_store(tmp_path):
    from analysis.report.dashboard import collect_runs
    from analysis.checking.results_file import run_dirs

    a = make_run(tmp_path / "shard-1", "20991231T000000-aaaaaa")
    b = make_run(tmp_path / "shard-2", "20991231T000001-bbbbbb")
    c = make_run(tmp_path, "20991231T000002-cccccc")
    assert run_dirs(tmp_path) == [c, a, b]
    rows = {r["run_id"]: r for r in collect_runs(tmp_path)}
    assert set(rows) == {"shard-1/" + a.name, "shard-2/" + b.name, c.name}
    assert rows["shard-1/" + a.name]["report"] == f"shard-1/{a.name}/report.html"


def test_the_parquet_twin_is_written_in_row_groups_bounded_by_bytes_with_every_event(tmp_path, monkeypatch):
    """A drain poll holds thousands of records on one line: row groups are bounded by the JSON's
    bytes as well as by events, so the writer never holds a gigabyte of parsed polls."""
    import pyarrow.parquet as pq

    from harness.history import files

    events = [{"index": i, "time": i, "process": 4, "type": "ok", "f": "poll",
               "value": {"records": [{"key": 1, "offset": j, "value": j} for j in range(400)]}} for i in range(30)]
    jsonl = tmp_path / "history.jsonl"
    jsonl.write_text("".join(json.dumps(e) + "\n" for e in events))
    line = len((json.dumps(events[0]) + "\n").encode())
    monkeypatch.setattr(files, "PARQUET_BATCH_BYTES", 5 * line)
    write_parquet(jsonl, tmp_path / "history.parquet")
    meta = pq.ParquetFile(tmp_path / "history.parquet").metadata
    assert meta.num_row_groups == 6 and meta.num_rows == 30
    assert files.read_parquet_events(tmp_path / "history.parquet") == read_history(jsonl)
    assert read_history(tmp_path / "history.parquet") == read_history(jsonl)  # named itself, read as Parquet
