"""The local checker's warm-up: as soon as its server listens, a few checks of a small synthetic
history, so that the first real check finds a warm JVM.

Why: a check's own time on a new server is mostly the JVM's, not the work. On a quiet machine
(2026-11-29) the checks of one 30 s run's 97,213 events on a fresh local checker took 19.0, 7.4,
6.0, 5.6 and 5.3 s (JIT, Spark's generated code, first use of each planner rule). Three checks of
another run's history first, and the first check of that run took 5.8 s. `./chaos run` starts the
checker as its workload begins (harness/run/finish.py prepare_checker), so the warm-up runs while
the cluster is under test and the verdict no longer pays it.

It gives way to a real check: a check claims the checker (spark_server.claim) before it
connects; the warm-up, which looks every 0.2 s, then interrupts its own Spark operations and exits,
and the check takes the session it warmed (analysis/checking/sessions.py). None starts on a server
that a check started or claimed while it was starting: that check warms it. It runs on the cores
the workload uses: three `./chaos run`s in a row, the first with a warm-up, sent 43,916, 48,665
and 38,420 records (docs/local-checker.md). It is bounded (CHECKS checks, BUDGET_S seconds)
and can be turned off with KAFKA_CHAOS_CHECKER_WARMUP=0. Its state is STATUS in the checker's
folder (spark_server.warmup_status), which `harness status` shows.

    python -m analysis.checking.warmup --dir FOLDER     # started by the supervisor, not by hand
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from analysis.checking import sessions, spark_server
from analysis.checking.spark_server import WARMUP_STATUS as STATUS

CHECKS = 3
# A new JVM's first check of the synthetic history took 13.7-17.5 s on the idle 2-core machine, and
# had not ended after 36 s beside a run's workload (2026-11-29).
BUDGET_S = 240.0

KEYS, PRODUCERS, SENDS, BATCH = 8, 2, 4000, 25


def synthetic_run(run_dir: Path, seed: int = 0) -> Path:
    """A valid history in the shape of a default `./chaos run` (2 producers and 2 assigned
    consumers on 8 keys, a kill, a partition and a pause with their ends, a heal, a drain by two
    more consumers): about 8,000 sends and polls, written as history.parquet with its config.json.
    Every ok send lands at its key's next offset and every consumer reads forward, so a check
    finds nothing (tests/test_checker_warmup.py holds the reference checker to that)."""
    from harness.history.files import write_parquet
    from harness.history.record import write_record

    rnd = random.Random(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    events: list[dict[str, Any]] = []

    def add(process: Any, type_: str, f: str, value: Any) -> None:
        events.append({"index": len(events), "time": 10**9 + len(events) * 250_000, "process": process,
                       "type": type_, "f": f, "value": value})

    logs: dict[int, list[int]] = {k: [] for k in range(KEYS)}
    consumers = {2: [k for k in range(KEYS) if k % 2 == 0], 3: [k for k in range(KEYS) if k % 2 == 1]}
    position = {c: dict.fromkeys(keys, 0) for c, keys in consumers.items()}
    for c, keys in consumers.items():
        add(c, "invoke", "assign", {"keys": keys, "seek": "beginning"})
        add(c, "ok", "assign", {"keys": keys, "seek": "beginning"})
    for p in range(PRODUCERS):
        add(p, "info", "producer", {"producer_id": 1000 + p, "producer_epoch": 0})
    faults = {SENDS // 5: ("kill", {"target": "leader", "targets": [2]}), SENDS * 7 // 20: ("restart", {"targets": [2]}),
              SENDS // 2: ("start-partition", {"shape": "one", "one_way": False, "targets": [3]}),
              SENDS * 11 // 20: ("pause", {"target": "one", "targets": [1]}), SENDS * 3 // 5: ("resume", {"targets": [1]}),
              SENDS * 13 // 20: ("stop-partition", {"healed": True})}
    for value in range(SENDS):
        if value in faults:
            add("nemesis", "info", *faults[value])
        key = rnd.randrange(KEYS)
        add(value % PRODUCERS, "invoke", "send", {"key": key, "value": value})
        add(value % PRODUCERS, "ok", "send", {"key": key, "value": value, "offset": len(logs[key]), "epoch": 1})
        logs[key].append(value)
        if value % 10 == 9:
            c = 2 + (value // 10) % 2
            records = []
            for k in consumers[c]:
                start = position[c][k]
                chunk = logs[k][start:start + BATCH]
                position[c][k] += len(chunk)
                records += [{"key": k, "offset": start + i, "value": v, "epoch": 1} for i, v in enumerate(chunk)]
            add(c, "invoke", "poll", None)
            add(c, "ok", "poll", {"records": records})
    add("nemesis", "info", "heal", {"isr_full": True, "waited_s": 0.0, "errors": []})
    first_drain = len(events)
    for c, keys in ((4, consumers[2]), (5, consumers[3])):
        add(c, "invoke", "assign", {"keys": keys, "seek": "beginning"})
        add(c, "ok", "assign", {"keys": keys, "seek": "beginning"})
        add(c, "invoke", "poll", None)
        add(c, "ok", "poll", {"records": [{"key": k, "offset": o, "value": v, "epoch": 1}
                                          for k in keys for o, v in enumerate(logs[k])]})
    jsonl = run_dir / "history.jsonl"
    with open(jsonl, "w") as out:
        out.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
    write_parquet(jsonl, run_dir / "history.parquet")
    jsonl.unlink()
    config = {"run_id": "checker-warm-up", "seed": seed, "workload": "queue", "time_limit_s": 1.0,
              "drain": {"complete": True, "first_index": first_drain, "processes": [4, 5], "timed_out_partitions": [],
                        "high_watermarks": {str(k): len(v) for k, v in logs.items()}, "undrained": {}}}
    write_record(run_dir, config)
    return run_dir


def write_status(folder: Path, **status: Any) -> None:
    tmp = folder / f"{STATUS}.tmp"
    tmp.write_text(json.dumps({"pid": os.getpid(), **status}))
    tmp.replace(folder / STATUS)


def warm(folder: Path, checks: int = CHECKS, budget_s: float = BUDGET_S) -> dict[str, Any]:
    """Check the synthetic history up to `checks` times on the server of `folder`; stop at once
    when a real check claims the server or the budget is spent. Returns (and writes) the status."""
    from analysis.checking.checker import check_history
    from analysis.checking.spark import fit_partitions
    from harness.history.record import read_record

    began = time.time()
    state = spark_server.read_state(folder)
    since = float((state or {}).get("started") or began)  # a check that claimed it since it started comes first
    skip = ("no server ready" if state is None or not state.get("ready")
            else "a check claimed the checker" if spark_server.claimed_since(folder, since) else None)
    if skip:
        status = {"state": "skipped", "reason": skip, "checks": 0, "of": checks, "seconds": 0.0}
        write_status(folder, **status)
        return status
    # Running from here on, so that a check that comes while the history is written waits for slot 0.
    write_status(folder, state="running", checks=0, of=checks, seconds=0.0)
    run = synthetic_run(folder / "warmup-run")
    config = read_record(run)
    spark = sessions.connect(state, folder)  # slot 0, the one the next check takes
    fit_partitions(spark, run)
    stopped: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.2):
            reason = ("a check claimed the checker" if spark_server.claimed_since(folder, since)
                      else f"the {budget_s:.0f} s budget was spent" if time.time() - began > budget_s else None)
            if reason:
                stopped.append(reason)
                with contextlib.suppress(Exception):
                    spark.interruptAll()
                return

    if spark_server.claimed_since(folder, since):
        stopped.append("a check claimed the checker")
    threading.Thread(target=watch, name="warm-up-watch", daemon=True).start()
    seconds: list[float] = []
    failure = None
    try:
        for _ in range(checks):
            if stopped:
                break
            write_status(folder, state="running", checks=len(seconds), of=checks, seconds=round(time.time() - began, 1))
            one = time.perf_counter()
            try:
                results = check_history(spark, run, config)
            except Exception as err:  # noqa: BLE001 - interrupted (a check came) or broken: either way, stop
                if not stopped:
                    failure = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
                break
            seconds.append(round(time.perf_counter() - one, 2))
            if results["verdict"] != "valid":
                failure = f"the synthetic history checked {results['verdict']}, not valid"
                break
    finally:
        done.set()
    state_name = "failed" if failure else "stopped" if stopped else "done"
    status = {"state": state_name, "checks": len(seconds), "of": checks, "check_s": seconds,
              "seconds": round(time.time() - began, 1), **({"reason": stopped[0]} if stopped else {}),
              **({"error": failure} if failure else {})}
    write_status(folder, **status)
    return status


def main() -> None:
    parser = argparse.ArgumentParser(description="The local checker's warm-up (started by its supervisor).")
    parser.add_argument("--dir", type=Path, required=True, help="the local checker's folder")
    parser.add_argument("--checks", type=int, default=CHECKS)
    args = parser.parse_args()
    status = warm(args.dir, args.checks)
    print(json.dumps(status), flush=True)
    sys.exit(0 if status["state"] != "failed" else 1)


if __name__ == "__main__":
    main()
