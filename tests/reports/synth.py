"""Synthetic run directories for the report tests: a ~30 s queue run on 4 partitions with a kill
and a partition fault, slower and failing sends during the faults, consumers trailing the
producers, a final drain, and optionally one injected anomaly (at offsets past the log's end,
mid-run, by fresh processes, so that it is the only finding of its kind)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from harness.history import write_parquet

NS = 1_000_000_000


def _events(seed: int, seconds: int, rate: int, keys: int, anomaly: str | None) -> tuple[list[dict], dict]:
    rnd = random.Random(seed)
    ev: list[tuple[int, int, dict]] = []  # (time ns, tie-break, event)
    n = 0

    def add(t: float, process: Any, type_: str, f: str, value: Any, error: str | None = None) -> None:
        nonlocal n
        e = {"process": process, "type": type_, "f": f, "value": value}
        if error:
            e["error"] = error
        ev.append((int(t * NS), n, e))
        n += 1

    kill = (8.0, 13.0)
    part = (18.0, 23.0)
    add(kill[0], "nemesis", "info", "kill", {"target": "leader", "targets": [2], "roles": {"2": ["leader:queue-0", "leader:queue-3"]}, "pids": {"2": 811}})
    add(kill[1], "nemesis", "info", "restart", {"targets": [2], "pids": {"2": 912}})
    add(part[0], "nemesis", "info", "start-partition", {"shape": "one", "one_way": False, "targets": [1], "roles": {"1": ["controller", "leader:queue-1"]}, "grudge": {"1": [2, 3]}})
    add(part[1], "nemesis", "info", "stop-partition", {"healed": True})
    add(seconds - 0.5, "nemesis", "info", "heal", {"ok": True})

    logs: dict[int, list[tuple[int, int, float]]] = {k: [] for k in range(keys)}  # offset, value, ack time
    value = 0
    for c in (10, 11):
        add(0.001, c, "invoke", "assign", {"keys": list(range(keys)), "seek": "beginning"})
        add(0.002, c, "ok", "assign", {"keys": list(range(keys)), "seek": "beginning"})
    t = 0.01
    while t < seconds - 1:
        t += rnd.expovariate(rate)
        in_fault = kill[0] <= t < kill[1] + 1 or part[0] <= t < part[1]
        p, k = rnd.randrange(2), rnd.randrange(keys)
        value += 1
        lat = rnd.uniform(0.002, 0.02) * (rnd.uniform(5, 40) if in_fault else 1)
        r = rnd.random()
        type_ = ("fail" if r < 0.3 else "info" if r < 0.5 else "ok") if in_fault else "ok"
        add(t, p, "invoke", "send", {"key": k, "value": value})
        o = len(logs[k]) and logs[k][-1][0] + 1
        if type_ == "ok":
            logs[k].append((o, value, t + lat))
        add(t + lat, p, type_, "send", {"key": k, "value": value, "offset": o if type_ == "ok" else None,
                                        "epoch": (1 if t > kill[0] else 0) if type_ == "ok" else None},
            error=None if type_ == "ok" else ("REQUEST_TIMED_OUT" if type_ == "info" else "NOT_ENOUGH_REPLICAS"))
    pos = {c: dict.fromkeys(range(keys), 0) for c in (10, 11)}
    for c in (10, 11):
        t = 0.05
        while t < seconds - 1:
            t += 0.1 + rnd.random() * 0.05
            stalled = part[0] <= t < part[1] and c == 11
            recs = []
            for k in range(keys):
                avail = []
                for x in logs[k][pos[c][k]:pos[c][k] + (0 if stalled else 40)]:
                    if x[2] >= t - 0.3:  # a prefix: consumers read in offset order
                        break
                    avail.append(x)
                pos[c][k] += len(avail)
                recs += [{"key": k, "offset": o, "value": v, "epoch": 0} for o, v, _ in avail]
            add(t, c, "invoke", "poll", None)
            add(t + 0.01, c, "ok", "poll", {"records": recs})
    # final drain
    td = seconds + 0.5
    add(td, 20, "invoke", "assign", {"keys": list(range(keys)), "seek": "beginning"})
    add(td + 0.01, 20, "ok", "assign", {"keys": list(range(keys)), "seek": "beginning"})
    for k in range(keys):
        add(td + 0.02 + k * 0.1, 20, "invoke", "poll", None)
        add(td + 0.08 + k * 0.1, 20, "ok", "poll", {"records": [{"key": k, "offset": o, "value": v, "epoch": 0} for o, v, _ in logs[k]]})
    if anomaly:
        _inject(add, anomaly, logs, seconds * 0.6)
    ev.sort(key=lambda x: (x[0], x[1]))
    events = [{"index": i, "time": t, **e} for i, (t, _, e) in enumerate(ev)]
    hws = {str(k): (logs[k][-1][0] + 1 if logs[k] else 0) for k in range(keys)}
    return events, {"complete": True, "high_watermarks": hws, "timed_out_partitions": [], "processes": [20],
                    "first_index": 0, "seconds": 0.5}


def _inject(add: Any, anomaly: str, logs: dict, t: float) -> None:
    """One finding of `anomaly` on key 0, past the end of its log (see tests/analysis/histories.py)."""
    k, o, new = 0, len(logs[0]) + 5, 10**9

    def send(p: int, value: int, offset: int | None, type_: str = "ok", dt: float = 0.0) -> None:
        add(t + dt, p, "invoke", "send", {"key": k, "value": value})
        add(t + dt + 0.004, p, type_, "send", {"key": k, "value": value, "offset": offset, "epoch": 0 if offset is not None else None})

    def poll(p: int, records: list[tuple[int, int]], dt: float = 0.0) -> None:
        add(t + dt, p, "invoke", "poll", None)
        add(t + dt + 0.003, p, "ok", "poll", {"records": [{"key": k, "offset": oo, "value": v, "epoch": 0} for oo, v in records]})

    if anomaly == "inconsistent-offsets":
        poll(900, [(o, new)]); poll(901, [(o, new + 1)], 0.5)
    elif anomaly == "duplicate":
        poll(900, [(o, new)]); poll(901, [(o + 1, new)], 0.5)
    elif anomaly == "lost-write":
        send(800, new, o); poll(900, [(o + 1, new + 1)], 0.5)
    elif anomaly == "unseen":
        send(800, new, o)
    elif anomaly == "nonmonotonic-send":
        send(800, new, o + 1); send(800, new + 1, o, dt=0.1); poll(900, [(o, new + 1), (o + 1, new)], 0.5)
    elif anomaly == "nonmonotonic-poll":
        poll(900, [(o, new), (o, new)])
    elif anomaly == "poll-skip":
        poll(900, [(o, new), (o + 2, new + 2)]); poll(901, [(o + 1, new + 1)], 0.5)
    elif anomaly == "aborted-read":
        send(800, new, None, "fail"); poll(900, [(o, new)], 0.5)
    else:
        _inject_txn(add, anomaly, t, k, o, new, len(logs[1]) + 5)


def _inject_txn(add: Any, anomaly: str, t: float, k: int, o: int, new: int, o1: int) -> None:
    """The transactional anomalies, as tests/analysis/histories.py injects them (key 1 at o1)."""
    def txn(p: int, type_: str, sends: list, records: list = (), dt: float = 0.0) -> None:
        add(t + dt, p, "invoke", "txn", {"sends": [{"key": kk, "value": v} for kk, v, _ in sends], "records": []})
        add(t + dt + 0.004, p, type_, "txn", {"sends": [{"key": kk, "value": v, "offset": oo, "epoch": None} for kk, v, oo in sends],
                                              "records": [{"key": kk, "offset": oo, "value": v, "epoch": 0} for kk, oo, v in records]})

    def poll(p: int, records: list, dt: float) -> None:
        add(t + dt, p, "invoke", "poll", None)
        add(t + dt + 0.003, p, "ok", "poll", {"records": [{"key": kk, "offset": oo, "value": v, "epoch": 0} for kk, oo, v in records]})

    if anomaly == "int-nonmonotonic-send":
        txn(810, "info", [(k, new, o + 1), (k, new + 1, o)])
    elif anomaly == "int-send-skip":
        txn(810, "info", [(k, new, o), (k, new + 1, o + 2)]); poll(900, [(k, o + 1, new + 2)], 0.5)
    elif anomaly == "int-nonmonotonic-poll":
        txn(810, "fail", [], [(k, o, new), (k, o, new)])
    elif anomaly == "int-poll-skip":
        txn(810, "fail", [], [(k, o, new), (k, o + 2, new + 2)]); poll(900, [(k, o + 1, new + 1)], 0.5)
    elif anomaly == "precommitted-read":
        txn(810, "ok", [(k, new, o)], [(k, o, new)])
    elif anomaly == "G0":
        txn(810, "ok", [(k, new, o), (1, new + 1, o1 + 1)]); txn(811, "ok", [(k, new + 2, o + 1), (1, new + 3, o1)], dt=0.1)
        poll(900, [(k, o, new), (k, o + 1, new + 2)], 0.5); poll(901, [(1, o1, new + 3), (1, o1 + 1, new + 1)], 0.5)
    elif anomaly == "G1c":
        txn(810, "ok", [(k, new, o)], [(1, o1, new + 1)]); txn(811, "ok", [(1, new + 1, o1)], [(k, o, new)], dt=0.1)
    else:
        raise ValueError(anomaly)


def injectable() -> list[str]:
    """The anomaly kinds make_run can inject into one queue history: all but the eos kinds, which
    need a two-topic pipeline history (tests/analysis/test_eos_anomalies.py)."""
    from analysis.rules.registry import ANOMALIES

    return [a for a in ANOMALIES if not a.startswith("eos-")]


def make_run(root: Path, name: str, anomaly: str | None = None, *, seed: int = 1, seconds: int = 30,
             rate: int = 150, keys: int = 4, profile: str = "safe", parquet: bool = True,
             kafka_version: str = "4.3.1") -> Path:
    """Write `root/name/` as `harness run` would: config.json, cluster.json, history.jsonl (+ parquet), broker logs."""
    run_dir = root / name
    (run_dir / "brokers").mkdir(parents=True, exist_ok=True)
    events, drain = _events(seed, seconds, rate, keys, anomaly)
    with open(run_dir / "history.jsonl", "w") as fh:
        for e in events:
            fh.write(json.dumps(e, separators=(",", ":")) + "\n")
    if parquet:
        write_parquet(run_dir / "history.jsonl", run_dir / "history.parquet")
    prof = {"name": profile, "acks": "all", "enable.idempotence": True, "retries": 2147483647, "max.in.flight": 5,
            "isolation.level": "read_committed", "unclean.leader.election.enable": False,
            "min.insync.replicas": 2, "replication.factor": 3}
    if profile == "acks1":
        prof.update(acks="1")
    config = {"history_format": 1, "run_id": name, "status": "completed", "seed": seed, "kafka_version": kafka_version,
              "brokers": 3, "workload": "queue", "profile": prof, "rate": rate, "time_limit_s": seconds,
              "partitions": keys, "replication_factor": 3, "producers": 2, "consumers": 2, "topic": "queue",
              "nemesis": ["kill", "partition"],
              "command_line": f"python -m harness run --time-limit {seconds} --rate {rate} --seed {seed} --partitions {keys}",
              "drain": drain, "seconds": {"cluster_ready": 11.2, "workload": seconds, "heal": 0.4, "drain": 0.5}}
    (run_dir / "config.json").write_text(json.dumps(config, indent=2))
    (run_dir / "cluster.json").write_text(json.dumps({"run_id": name, "kafka_version": kafka_version,
                                                      "brokers": [{"node_id": i, "hostname": f"kafka-{i}"} for i in (1, 2, 3)]}))
    for i in (1, 2, 3):
        (run_dir / "brokers" / str(i)).mkdir(exist_ok=True)
        (run_dir / "brokers" / str(i) / "server.log").write_text(f"[2026-01-01 00:00:00,000] INFO broker {i} started\n")
    return run_dir


def _injected_ops(events: list[dict]) -> list[dict]:
    """The completions that touch an injected value (≥ 10**9), as the checker's example ops."""
    ops = []
    for e in events:
        v = e.get("value")
        if e["type"] == "invoke" or not isinstance(v, dict):
            continue
        recs = (v.get("records") or []) + (v.get("sends") or [] if e["f"] == "txn" else []) or ([v] if e["f"] == "send" else [])
        for r in recs:
            if isinstance(r.get("value"), int) and r["value"] >= 10**9:
                ops.append({"index": e["index"], "time": e["time"], "process": str(e["process"]), "f": e["f"],
                            "type": e["type"], "key": r["key"], "offset": r.get("offset"), "value": r["value"]})
    return ops


def make_results(run_dir: Path, anomaly: str | None) -> dict:
    """results.json in the checker's shape (analysis/checking/checker.py): counts from the plain-Python
    reference checker, examples built from the injected ops. Written to RUN_DIR/results.json."""
    from analysis.reference import checker as reference
    from analysis.rules.permissions import allowed as permitted
    from analysis.rules.registry import ANOMALIES
    from analysis.rules.verdict import decide, headline

    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    config = json.loads((run_dir / "config.json").read_text())
    counts = reference.counts(events)
    allow, rules = permitted(config)
    v = decide(counts, allow, config["drain"]["complete"], ops=len(events))
    examples: dict[str, list] = {a: [] for a in ANOMALIES}
    ops = _injected_ops(events)
    if anomaly and ops:
        first = ops[0]
        if anomaly == "inconsistent-offsets":
            ex = {"key": first["key"], "offset": first["offset"], "values": sorted({o["value"] for o in ops}), "ops": ops}
        elif anomaly == "duplicate":
            ex = {"value": first["value"], "key": first["key"], "offset": first["offset"],
                  "positions": [{"key": o["key"], "offset": o["offset"]} for o in ops], "ops": ops}
        elif anomaly in ("lost-write", "unseen"):
            ex = {"key": first["key"], "offset": first["offset"], "value": first["value"],
                  "max_read_offset": (ops[-1]["offset"] if anomaly == "lost-write" else None), "ops": [first]}
        elif anomaly == "aborted-read":
            read = next(o for o in ops if o["f"] == "poll")
            write = {**first, "offset": None}
            ex = {"value": read["value"], "key": read["key"], "offset": read["offset"], "ops": [read, write]}
        elif anomaly not in ("nonmonotonic-send", "nonmonotonic-poll", "poll-skip"):  # the transactional kinds
            ex = {"key": first["key"], "value": first["value"], "ops": ops[:4]}
        else:  # pairs: nonmonotonic-send/-poll, poll-skip
            pair = [o for o in ops if o["f"] == ("send" if anomaly == "nonmonotonic-send" else "poll")][:2]
            ex = {"key": pair[0]["key"], "process": pair[0]["process"], "offsets": [o["offset"] for o in pair],
                  "values": [o["value"] for o in pair], "ops": pair}
            if anomaly == "poll-skip":
                ex["skipped_offset"] = pair[0]["offset"] + 1
        examples[anomaly] = [ex]
    stats: dict[str, dict[str, int]] = {}
    for e in events:
        if e["process"] != "nemesis":
            stats.setdefault(e["f"], {"invoke": 0, "ok": 0, "fail": 0, "info": 0})[e["type"]] += 1
    results = {
        "results_version": 1, "verdict": v.verdict, "reasons": v.reasons, "forbidden": v.forbidden,
        "counts": counts, "headline": headline(counts, config["drain"]["complete"]),
        "allowed": sorted(allow, key=ANOMALIES.index), "allowed_by": rules, "examples": examples,
        "op_stats": stats, "drain": {"complete": True, "high_watermarks": config["drain"]["high_watermarks"]},
        "history": {"path": str(run_dir / "history.parquet"), "format": "parquet", "events": len(events), "truncated": False},
        "run": {"seed": config["seed"], "kafka_version": config["kafka_version"], "workload": config["workload"],
                "profile": config["profile"]["name"], "nemesis": sorted(config["nemesis"])},
        "checked_at": "2026-01-0%dT07:00:00+00:00" % (1 + config["seed"] % 9), "timings": {"total_s": 1.0},
    }
    (run_dir / "results.json").write_text(json.dumps(results, indent=2))
    return results


VERSIONS = ("3.9.1", "4.0.0", "4.3.1")
NEMESES = (["kill"], ["partition"], ["kill", "partition"], ["pause"], ["kill", "partition", "pause"])


def clone_store(template: Path, root: Path, runs: int = 100, per_day: int = 4) -> list[Path]:
    """`runs` run directories in `root` made from one checked run `template`, as a nightly store of
    many runs looks to the dashboard: history, broker logs and report.html hard-linked (no copy;
    the history's size and time still match results.json), config.json and results.json rewritten
    with each run's own id, day (`per_day` runs a day), Kafka version, nemesis set and verdict
    (every seventh run invalid, with lost writes). Fast: no history is generated or checked."""
    import datetime as dt
    import os

    base_cfg = json.loads((template / "config.json").read_text())
    base_res = json.loads((template / "results.json").read_text())
    out = []
    for i in range(runs):
        day, slot = divmod(i, per_day)
        stamp = (dt.date(2026, 1, 1) + dt.timedelta(days=day)).strftime("%Y%m%d") + f"T{7 + slot:02d}0000"
        name = f"{stamp}-{i:03d}"
        d = root / name
        for src in template.rglob("*"):
            rel = src.relative_to(template)
            if src.is_dir():
                (d / rel).mkdir(parents=True, exist_ok=True)
            elif rel.name not in ("config.json", "results.json"):
                (d / rel).parent.mkdir(parents=True, exist_ok=True)
                os.link(src, d / rel)
        version, nemesis = VERSIONS[i % len(VERSIONS)], NEMESES[i % len(NEMESES)]
        (d / "config.json").write_text(json.dumps({**base_cfg, "run_id": name, "seed": i, "kafka_version": version,
                                                   "nemesis": nemesis}, indent=2))
        bad = i % 7 == 3
        counts = {**base_res["counts"], "lost-write": 2 + i % 5 if bad else 0}
        res = {**base_res, "verdict": "invalid" if bad else "valid", "counts": counts,
               "headline": {**base_res["headline"], "lost": counts["lost-write"]},
               "reasons": [f"{counts['lost-write']} lost-write (not permitted by this configuration)"] if bad else [],
               "run": {**base_res["run"], "seed": i, "kafka_version": version, "nemesis": sorted(nemesis)},
               "checked_at": f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:05:00+00:00"}
        if not bad:
            res["examples"] = {k: [] for k in res["examples"]}
            res["counts"] = {k: 0 for k in counts}
            res["headline"] = {k: 0 for k in res["headline"]}
        (d / "results.json").write_text(json.dumps(res, indent=2))
        out.append(d)
    return out
