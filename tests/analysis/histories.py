"""Synthetic v1 histories for the checker's tests: valid runs with no anomaly, and injections
that add exactly one finding of one anomaly (using fresh processes and positions past every
log's end, so no other anomaly can appear)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from analysis.rules.registry import ANOMALIES


class Builder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, process: Any, type_: str, f: str, value: Any, error: str | None = None) -> dict:
        e = {"index": len(self.events), "time": len(self.events) * 1000, "process": process,
             "type": type_, "f": f, "value": value}
        if error:
            e["error"] = error
        self.events.append(e)
        return e

    def send(self, p: int, key: int, value: int, offset: int | None, type_: str = "ok") -> None:
        self.add(p, "invoke", "send", {"key": key, "value": value})
        self.add(p, type_, "send", {"key": key, "value": value, "offset": offset if type_ == "ok" else None,
                                    "epoch": 0 if type_ == "ok" else None})

    def assign(self, p: int, keys: list[int], seek: str | None = "beginning") -> None:
        self.add(p, "invoke", "assign", {"keys": keys, "seek": seek})
        self.add(p, "ok", "assign", {"keys": keys, "seek": seek})

    def poll(self, p: int, records: list[tuple[int, int, int]]) -> None:
        self.add(p, "invoke", "poll", None)
        self.add(p, "ok", "poll", {"records": [{"key": k, "offset": o, "value": v, "epoch": 0}
                                               for k, o, v in records]})


def valid_history(seed: int, keys: int = 3, producers: int = 2, consumers: int = 2, steps: int = 60,
                  p_fail: float = 0.1, p_info: float = 0.1, p_gap: float = 0.15, p_reassign: float = 0.1) -> Builder:
    """A run with no anomaly: ok sends land at the log's next offset (sometimes after a gap, as a
    transaction marker leaves), failed sends never land, info sends land or not at random,
    consumers read forward from their position, sometimes reassign from the beginning, and a
    final drain reads every log to its end."""
    rnd = random.Random(seed)
    b = Builder()
    logs: dict[int, list[tuple[int, int]]] = {k: [] for k in range(keys)}
    next_offset = dict.fromkeys(range(keys), 0)
    value = 0
    cons = [100 + c for c in range(consumers)]
    pos = {c: dict.fromkeys(range(keys), 0) for c in cons}
    for c in cons:
        b.assign(c, list(range(keys)))
    for _ in range(steps):
        action = rnd.random()
        if action < 0.55:
            p, k = rnd.randrange(producers), rnd.randrange(keys)
            value += 1
            r = rnd.random()
            type_ = "fail" if r < p_fail else "info" if r < p_fail + p_info else "ok"
            lands = type_ == "ok" or (type_ == "info" and rnd.random() < 0.5)
            if rnd.random() < p_gap:
                next_offset[k] += 1  # a transaction marker: an offset no record holds
            o = next_offset[k]
            if lands:
                logs[k].append((o, value))
                next_offset[k] += 1
            b.send(p, k, value, o if type_ == "ok" else None, type_)
        elif action < 0.9:
            c = rnd.choice(cons)
            records = []
            for k in range(keys):
                n = rnd.randrange(0, 4)
                chunk = logs[k][pos[c][k]:pos[c][k] + n]
                pos[c][k] += len(chunk)
                records += [(k, o, v) for o, v in chunk]
            b.poll(c, records)
        elif rnd.random() < p_reassign * 5:
            c = rnd.choice(cons)
            b.assign(c, list(range(keys)))
            pos[c] = dict.fromkeys(range(keys), 0)
    drain = 200
    b.assign(drain, list(range(keys)))
    b.poll(drain, [(k, o, v) for k in range(keys) for o, v in logs[k]])
    return b


def _fresh(b: Builder, key: int = 0) -> tuple[int, int]:
    """A key and an offset past every position the history mentions on it."""
    offsets = [-1]
    for e in b.events:
        v = e.get("value") or {}
        if isinstance(v, dict):
            offsets += [r["offset"] for r in v.get("records") or [] if r["key"] == key]
            offsets += [s["offset"] for s in v.get("sends") or [] if s["key"] == key and s.get("offset") is not None]
            if e["f"] == "send" and v.get("key") == key and v.get("offset") is not None:
                offsets.append(v["offset"])
    return key, max(offsets) + 1


def _txn(b: Builder, p: int, type_: str, sends: list[tuple[int, int, int | None]],
         records: list[tuple[int, int, int]] = ()) -> None:
    """A txn of process p: sends (key, value, offset), records (key, offset, value)."""
    b.add(p, "invoke", "txn", {"sends": [{"key": k, "value": v} for k, v, _ in sends], "records": []})
    b.add(p, type_, "txn", {"sends": [{"key": k, "value": v, "offset": o, "epoch": None} for k, v, o in sends],
                            "records": [{"key": k, "offset": o, "value": v, "epoch": 0} for k, o, v in records]})


def _inject_txn(b: Builder, anomaly: str, k: int, o: int, new: int) -> None:
    """The transactional anomalies (see inject). info/fail txns write nothing a checker counts as
    an ok write, and their reads are no reads of the process's sequence: only the int- finding."""
    k1, p = _fresh(b, 1)
    if anomaly == "int-nonmonotonic-send":
        _txn(b, 810, "info", [(k, new, o + 1), (k, new + 1, o)])
    elif anomaly == "int-send-skip":
        _txn(b, 810, "info", [(k, new, o), (k, new + 1, o + 2)])
        b.poll(900, [(k, o + 1, new + 2)])
    elif anomaly == "int-nonmonotonic-poll":
        _txn(b, 810, "fail", [], [(k, o, new), (k, o, new)])
    elif anomaly == "int-poll-skip":
        _txn(b, 810, "fail", [], [(k, o, new), (k, o + 2, new + 2)])
        b.poll(900, [(k, o + 1, new + 1)])
    elif anomaly == "precommitted-read":
        _txn(b, 810, "ok", [(k, new, o)], [(k, o, new)])
    elif anomaly == "G0":
        _txn(b, 810, "ok", [(k, new, o), (k1, new + 1, p + 1)])
        _txn(b, 811, "ok", [(k, new + 2, o + 1), (k1, new + 3, p)])
        b.poll(900, [(k, o, new), (k, o + 1, new + 2)])
        b.poll(901, [(k1, p, new + 3), (k1, p + 1, new + 1)])
    elif anomaly == "G1c":
        _txn(b, 810, "ok", [(k, new, o)], [(k1, p, new + 1)])
        _txn(b, 811, "ok", [(k1, new + 1, p)], [(k, o, new)])
    else:
        raise ValueError(anomaly)


def inject(b: Builder, anomaly: str) -> Builder:
    """Append events that add exactly one finding of `anomaly` and nothing else."""
    k, o = _fresh(b)
    new = 10**9
    if anomaly == "inconsistent-offsets":
        b.poll(900, [(k, o, new)])
        b.poll(901, [(k, o, new + 1)])
    elif anomaly == "duplicate":
        b.poll(900, [(k, o, new)])
        b.poll(901, [(k, o + 1, new)])
    elif anomaly == "lost-write":
        b.send(800, k, new, o)
        b.poll(900, [(k, o + 1, new + 1)])
    elif anomaly == "unseen":
        b.send(800, k, new, o)
    elif anomaly == "nonmonotonic-send":
        b.send(800, k, new, o + 1)
        b.send(800, k, new + 1, o)
        b.poll(900, [(k, o, new + 1), (k, o + 1, new)])
    elif anomaly == "nonmonotonic-poll":
        b.poll(900, [(k, o, new), (k, o, new)])
    elif anomaly == "poll-skip":
        b.poll(900, [(k, o, new), (k, o + 2, new + 2)])
        b.poll(901, [(k, o + 1, new + 1)])
    elif anomaly == "aborted-read":
        b.send(800, k, new, None, "fail")
        b.poll(900, [(k, o, new)])
    else:
        _inject_txn(b, anomaly, k, o, new)
    return b


def write_run(run_dir: Path, events: list[dict], config: dict | None = None) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "history.jsonl", "w") as fh:
        for e in events:
            fh.write(json.dumps(e) + "\n")
    if config is not None:
        (run_dir / "config.json").write_text(json.dumps(config))
    return run_dir


ZERO = dict.fromkeys(ANOMALIES, 0)


def summed(found: list[dict[str, int]]) -> dict[str, int]:
    """ZERO plus every case's counts: what histories put side by side (one run) must count."""
    want = dict(ZERO)
    for counts in found:
        want.update({k: want[k] + n for k, n in counts.items()})
    return want


def mutate(b: Builder, seed: int, n: int = 6) -> Builder:
    """Corrupt a valid history at random (drop, move, rewrite or reorder reads; fail or re-offset
    sends) so that several anomalies overlap: for checking that two checkers agree on counts."""
    rnd = random.Random(seed)
    polls = [e for e in b.events if e["f"] == "poll" and e["type"] == "ok" and e["value"]["records"]]
    sends = [e for e in b.events if e["f"] == "send" and e["type"] == "ok"]
    for _ in range(n):
        kind = rnd.randrange(6)
        # A deletion can empty a poll, so pick only among polls that still hold records.
        polls = [e for e in polls if e["value"]["records"]]
        if kind < 4 and polls:
            recs = rnd.choice(polls)["value"]["records"]
            i = rnd.randrange(len(recs))
            if kind == 0:
                del recs[i]
            elif kind == 1:
                recs[i]["offset"] = max(0, recs[i]["offset"] + rnd.choice([-2, -1, 1, 2]))
            elif kind == 2:
                recs[i]["value"] = rnd.choice([r["value"] for r in recs] + [recs[i]["value"] + 1])
            else:
                j = rnd.randrange(len(recs))
                recs[i], recs[j] = recs[j], recs[i]
        elif sends:
            e = rnd.choice(sends)
            if kind == 4:
                e["type"] = "fail"
            else:
                e["value"]["offset"] = max(0, e["value"]["offset"] + rnd.choice([-1, 1]))
    return b
