"""The context of each anomaly example, gathered from the run directory: when its ops happened
(run-relative and UTC), which faults were active then and on which brokers, who led the
partition and in which leader epoch, what consumers read at its offset instead, and the broker
log lines about that partition within ±2 s. Facts only; analysis/explain/text.py turns them into
a sentence (the verdict stays apart from how it is told, as in Elle).

Fed from examples, not from a checker: an example needs only its identity (a value, or a key and
offset, or a key and the pair of offsets/values of a reordering), so the Spark checker's examples
and the plain-Python reference's findings (`examples_from_findings`) are explained alike. One
pass over the history (analysis/explain/history.py: 0.5 s for the 61k events of a 30 s run).
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.explain import elections, logs
from analysis.explain.history import NS, Facts, scan
from analysis.explain.timeline import Fault, faults_from
from harness.history.record import RecordLike, as_record

MAX_EXPLAINED = 5  # examples explained per anomaly (results.json keeps up to 20 examples)
WINDOW_S = 2.0  # broker log lines quoted within this many seconds of the op


# ---------------------------------------------------------------------------- wall clock
@dataclass
class Clock:
    """Run-relative seconds to UTC. `exact` is False when the start is estimated."""
    start_ns: int | None
    source: str
    exact: bool

    def utc(self, t_s: float | None) -> str | None:
        if self.start_ns is None or t_s is None:
            return None
        when = dt.datetime.fromtimestamp(self.start_ns / NS + t_s, dt.timezone.utc)
        return ("" if self.exact else "≈") + when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"

    def wall_ns(self, t_s: float) -> int | None:
        return None if self.start_ns is None else self.start_ns + int(t_s * NS)


def clock(run_dir: Path, config: RecordLike, last_time_s: float | None) -> Clock:
    """The history's zero on the wall clock: the record's `history_start_utc` when recorded;
    else the run id's UTC timestamp (`harness run` names runs YYYYMMDDTHHMMSS-xxxxxx when it creates
    the directory, just before the recorder starts: about a second early at most); else the
    history file's last modification minus its last event's time. The latter two are marked ≈."""
    record = as_record(config)
    recorded = record.history_start_utc
    if recorded is not None:
        try:
            when = dt.datetime.fromisoformat(recorded.replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=dt.timezone.utc)
            return Clock(int(when.timestamp() * NS), "recorded (config.json history_start_utc)", True)
        except ValueError:
            pass
    m = re.match(r"(\d{8}T\d{6})-", str(record.run_id or run_dir.name))
    if m:
        when = dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=dt.timezone.utc)
        return Clock(int(when.timestamp() * NS), "estimated from the run id (the run directory's creation, to the second)", False)
    hist = run_dir / "history.jsonl"
    if hist.exists() and last_time_s is not None:
        return Clock(hist.stat().st_mtime_ns - int(last_time_s * NS),
                     "estimated from history.jsonl's modification time minus its last event's time", False)
    return Clock(None, "unknown (no wall-clock start recorded)", False)


# ---------------------------------------------------------------------------- context
def _fault_facts(faults: list[Fault], t: float | None, topic: str, clk: Clock) -> list[dict[str, Any]]:
    """The faults active at `t`, each with its targets and the roles they held when struck."""
    if t is None:
        return []
    out = []
    for f in faults:
        if f.start_s <= t <= f.end_s:
            roles = f.detail.get("roles") if isinstance(f.detail.get("roles"), dict) else {}
            out.append({"fault": f.f, "label": f.label, "targets": f.targets,
                        "roles": {str(k): [r.replace(f"leader:{topic}-", "leader of partition ") for r in v]
                                  for k, v in roles.items() if isinstance(v, list)},
                        "from_s": round(f.start_s, 3), "to_s": round(f.end_s, 3),
                        "from_utc": clk.utc(f.start_s), "to_utc": clk.utc(f.end_s), "ended_by": f.ended_by})
    return out


AFTER_S = 30.0  # how long after a lost write's acknowledgement the faults that struck are named
AFTER_MAX = 6


def _struck_between(faults: list[Fault], t0: float, t1: float, topic: str, clk: Clock,
                    known: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The faults that struck after `t0` and by `t1`, in order, not already named in `known`: the
    sequence between an acknowledgement and the evidence it was lost (a heir killed 3 s after the
    leader struck is neither active at the first acknowledgement nor at the second)."""
    seen = {(k["from_s"], tuple(k["targets"])) for k in known}
    out = []
    for f in sorted(faults, key=lambda f: f.start_s):
        if t0 < f.start_s <= t1 and (round(f.start_s, 3), tuple(f.targets)) not in seen:
            fact = _fault_facts([f], f.start_s, topic, clk)[0]
            for k in ("target", "heir_of", "step"):
                if f.detail.get(k) is not None:
                    fact[k] = f.detail[k]
            out.append(fact)
    return out[:AFTER_MAX]


def _leader(facts: Facts, faults: list[Fault], key: int, t: float, topic: str,
            log_view: logs.LogView, clk: Clock) -> dict[str, Any]:
    """The partition's leader and leader epoch around `t`, from three sources when present:
    records' epochs (an acknowledged write later read tells the epoch of its leader at its ack),
    the roles a fault recorded for its targets, and the broker logs' leader changes."""
    out: dict[str, Any] = {"broker": None, "epoch": None, "sources": []}
    tl = facts.epoch_timeline(key)
    i = bisect.bisect_right(tl, (t, float("inf"), 0))
    before, after = (tl[i - 1] if i else None), (tl[i] if i < len(tl) else None)
    if before:
        out["epoch"] = before[1]
        out["epoch_before"] = {"epoch": before[1], "offset": before[2], "t_s": round(before[0], 3), "utc": clk.utc(before[0])}
        out["sources"].append("records' leader epochs")
    if after:
        out["epoch_after"] = {"epoch": after[1], "offset": after[2], "t_s": round(after[0], 3), "utc": clk.utc(after[0])}
    # A fault records its targets' roles as it strikes: who led then, not necessarily at `t`.
    mark = f"leader:{topic}-{key}"
    for f in sorted(faults, key=lambda x: x.start_s):
        roles = f.detail.get("roles") if isinstance(f.detail.get("roles"), dict) else {}
        for node, rs in roles.items():
            if f.start_s <= t and isinstance(rs, list) and mark in rs and str(node).isdigit():
                out["broker"], out["as_of_s"], out["as_of_utc"] = int(node), round(f.start_s, 3), clk.utc(f.start_s)
                out["broker_source"] = f"the roles the {f.f} fault recorded as it struck"
    wall = clk.wall_ns(t)
    change = log_view.leader_at(key, wall) if wall is not None else None
    if change:
        out["log"] = change
        if out["broker"] is None or change["wall_ns"] > (clk.wall_ns(out["as_of_s"]) or 0):
            out["broker"], out["broker_source"] = change["leader"], f"{change['file']} line {change['line']}"
            out["as_of_s"] = round((change["wall_ns"] - (clk.start_ns or 0)) / NS, 3)
            out["as_of_utc"] = clk.utc(out["as_of_s"])
            if out["epoch"] is None:
                out["epoch"] = change["epoch"]
    out["sources"] += [x for x in [out.get("broker_source")] if x]
    return out


def _reads_at(facts: Facts, key: int, offset: int | None, clk: Clock, exclude: int | None = None) -> list[dict[str, Any]]:
    if offset is None:
        return []
    return [{"value": r.value, "epoch": r.epoch, "process": r.process, "t_s": round(r.t_s, 3), "utc": clk.utc(r.t_s)}
            for r in (facts.reads.get(key) or {}).get(offset, []) if r.value != exclude]


def _op(facts: Facts, value: int | None, clk: Clock) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    inv = facts.invokes.get(value) if value is not None else None
    done = facts.completions.get(value) if value is not None else None
    invoke = {"t_s": round(inv[0], 3), "utc": clk.utc(inv[0]), "process": inv[1]} if inv else None
    completion = {**{k: done[k] for k in ("type", "key", "offset", "error", "process", "f")},
                  "t_s": round(done["t"], 3), "utc": clk.utc(done["t"])} if done else None
    return invoke, completion


def _identity(name: str, ex: dict[str, Any], facts: Facts) -> tuple[int | None, int | None, int | None]:
    """(key, offset, value) the example is about; looked up in the history where it lacks them."""
    value = ex.get("value")
    values = ex.get("values") if isinstance(ex.get("values"), list) else []
    offsets = ex.get("offsets") if isinstance(ex.get("offsets"), list) else []
    if value is None and name in ("nonmonotonic-send",) and values:
        value = values[-1]
    done = facts.completions.get(value) if value is not None else None
    seen = sorted(facts.read_at.get(value, ())) if value is not None else []
    key = ex.get("key", done["key"] if done else seen[0][0] if seen else None)
    offset = ex.get("offset")
    if offset is None and offsets:
        offset = offsets[-1]
    if offset is None and done and name != "aborted-read":
        offset = done.get("offset")
    if offset is None and seen:
        offset = seen[0][1]
    return key, offset, value


def _complete(name: str, ex: dict[str, Any], facts: Facts, key: int | None) -> dict[str, Any]:
    """What a minimal example (the reference's findings) lacks and the history tells."""
    out: dict[str, Any] = {}
    if name == "nonmonotonic-send" and not ex.get("offsets") and ex.get("values"):
        out["offsets"] = [(facts.completions.get(v) or {}).get("offset") for v in ex["values"]]
    if name == "duplicate" and not ex.get("positions") and ex.get("value") is not None:
        out["positions"] = [{"key": k, "offset": o} for k, o in sorted(facts.read_at.get(ex["value"], ()))]
    if name == "poll-skip" and ex.get("skipped_offset") is None and len(ex.get("offsets") or []) == 2 and key is not None:
        lo, hi = ex["offsets"]
        between = [o for o in (facts.reads.get(key) or {}) if lo < o < hi]
        if between:
            out["skipped_offset"] = min(between)
    return out


def explain_example(name: str, ex: dict[str, Any], facts: Facts, faults: list[Fault], topic: str,
                    clk: Clock, log_view: logs.LogView) -> dict[str, Any]:
    key, offset, value = _identity(name, ex, facts)
    ex = {**ex, **_complete(name, ex, facts, key)}
    invoke, completion = _op(facts, value, clk)
    out: dict[str, Any] = {"anomaly": name, "key": key, "partition": f"{topic}-{key}" if key is not None else None,
                           "offset": offset, "value": value, "invoke": invoke, "completion": completion}
    for k in ("values", "offsets", "process", "skipped_offset", "positions", "across_rebalance", "client"):
        if ex.get(k) is not None:
            out[k] = ex[k]
    later = (ex.get("ops") or [None])[-1] if name in ("nonmonotonic-poll", "poll-skip") else None
    if isinstance(later, dict) and later.get("type") in ("fail", "info"):  # a read of a txn that aborted, or unknown
        out["read_outcome"] = later["type"]
    times = [x["t_s"] for x in (invoke, completion) if x]
    reads = _reads_at(facts, key, offset, clk) if key is not None else []
    if name == "inconsistent-offsets" and key is not None:  # the acknowledgements at that offset place it too
        acked = [(t, v) for t, o, v in facts.acks.get(key) or [] if o == offset]
        out["acked_at_offset"] = [{"value": v, "t_s": round(t, 3), "utc": clk.utc(t)} for t, v in acked]
        times += [t for t, _ in acked]
    if not times:  # no send of its own (a read anomaly): the reads at its position place it
        times = sorted({r["t_s"] for r in reads})[:1] + sorted({r["t_s"] for r in reads})[-1:]
        ops = [o for o in ex.get("ops") or [] if isinstance(o, dict) and isinstance(o.get("time"), (int, float))]
        times = times or sorted({o["time"] / NS for o in ops})
    t0, t1 = (min(times), max(times)) if times else (None, None)
    if name in ("nonmonotonic-poll", "poll-skip") and key is not None and len(ex.get("offsets") or []) == 2:
        # The read that broke the order is the process's first read of the second offset after its
        # read of the first, not the first read of that offset ever: a 0.10.2.2 consumer read
        # offset 0 at 25.8 s, 207 at 29.4 s, then 0 again at 52.0 s, and the sentence said 25.8 s.
        proc = str(ex.get("process"))
        before = [r["t_s"] for r in _reads_at(facts, key, ex["offsets"][0], clk) if str(r["process"]) == proc]
        after = [r["t_s"] for r in reads if str(r["process"]) == proc and before and r["t_s"] >= min(before)]
        if after:
            t0 = t1 = min(after)
    out["at"] = {"from_s": t0, "to_s": t1, "from_utc": clk.utc(t0), "to_utc": clk.utc(t1)}
    out["faults_at_invoke"] = _fault_facts(faults, invoke["t_s"] if invoke else t0, topic, clk)
    acks = [a["t_s"] for a in out.get("acked_at_offset") or []]
    out["faults_at_completion"] = _fault_facts(faults, completion["t_s"] if completion else acks[0] if acks else t1, topic, clk)
    acked_at = acks[0] if acks else completion["t_s"] if completion and completion.get("type") == "ok" else None
    if name in ("inconsistent-offsets", "lost-write") and acked_at is not None:
        until = max(acks) if name == "inconsistent-offsets" and len(acks) > 1 else acked_at + AFTER_S
        out["faults_after"] = _struck_between(faults, acked_at, until, topic, clk,
                                              out["faults_at_completion"] + out["faults_at_invoke"])
        out["faults_after_s"] = round(until - acked_at, 3)
    if key is not None and t1 is not None:
        out["leader"] = _leader(facts, faults, key, t1, topic, log_view, clk)
    if key is not None:
        mr = facts.max_read.get(key)
        out["max_read"] = {"offset": mr[0], "t_s": round(mr[1], 3), "utc": clk.utc(mr[1])} if mr else None
        out["read_at_offset"] = reads
        if name in ("lost-write", "unseen", "inconsistent-offsets") and offset is not None:
            out["read_instead"] = [r for r in reads if r["value"] != value]
            if not reads:
                out["nearest_reads"] = _nearest(facts, key, offset, clk)
    if name in ("inconsistent-offsets", "lost-write") and key is not None:
        out["unclean_elections"] = _unclean(name, out, reads, faults, log_view, clk)
    if key is not None and t0 is not None and clk.start_ns is not None:
        quotes, more = log_view.lines_about(key, clk.wall_ns(t0 - WINDOW_S), clk.wall_ns(t1 + WINDOW_S))
        out["log_lines"], out["log_lines_more"] = quotes, more
    else:
        out["log_lines"], out["log_lines_more"] = [], 0
    return out


def _unclean(name: str, out: dict[str, Any], reads: list[dict[str, Any]], faults: list[Fault],
             log_view: logs.LogView, clk: Clock) -> list[dict[str, Any]]:
    """The unclean elections between the lost records' epoch and what replaced them (elections.py):
    for two values at one offset, after the first acknowledged one's epoch and up to the other's;
    for a lost write, after the epoch of the records acknowledged just before it."""
    epoch_of = {r["value"]: r.get("epoch") for r in reads}
    acked = out.get("acked_at_offset") or []
    if name == "inconsistent-offsets" and len(acked) > 1:
        lo, hi = epoch_of.get(acked[0]["value"]), epoch_of.get(acked[-1]["value"])
    else:
        lo, hi = (out.get("leader") or {}).get("epoch"), None
    since = acked[0]["t_s"] if acked else (out.get("completion") or {}).get("t_s")
    return elections.unclean_between(log_view, out["key"], faults, clk.start_ns, clk.utc, lo, hi, since)


def _nearest(facts: Facts, key: int, offset: int, clk: Clock) -> dict[str, Any]:
    offs = sorted(facts.reads.get(key) or {})
    i = bisect.bisect_left(offs, offset)
    pick = {"below": offs[i - 1] if i else None, "above": offs[i] if i < len(offs) else None}
    return {side: ({"offset": o, **_reads_at(facts, key, o, clk)[0]} if o is not None and _reads_at(facts, key, o, clk) else None)
            for side, o in pick.items()}


# ---------------------------------------------------------------------------- entry points
def explain(run_dir: Path | str, examples: dict[str, list[dict[str, Any]]], config: RecordLike = None,
            limit: int = MAX_EXPLAINED, drain: dict[str, Any] | None = None) -> dict[str, Any]:
    """{"clock": …, "examples": {anomaly: [context, …]}} for the first `limit` examples of each
    anomaly, in the examples' order; each context has a "sentence" (analysis/explain/text.py).
    config: the run's record (harness/history/record.py), or config.json's content.
    drain: results.json's "drain" (whether the final drain read every partition to its end)."""
    from analysis.explain.text import sentence

    run_dir = Path(run_dir)
    chosen = {n: [e for e in exs if isinstance(e, dict)][:limit] for n, exs in (examples or {}).items() if exs}
    keys: set[int] = set()
    values: set[int] = set()
    for exs in chosen.values():
        for ex in exs:
            for k in [ex.get("key")] + [p.get("key") for p in ex.get("positions") or [] if isinstance(p, dict)]:
                if isinstance(k, int):
                    keys.add(k)
            for v in [ex.get("value")] + list(ex.get("values") or []):
                if isinstance(v, int):
                    values.add(v)
    facts = scan(run_dir, keys, values) if chosen else Facts()
    keys |= {c["key"] for c in facts.completions.values() if isinstance(c.get("key"), int)}
    keys |= {k for ps in facts.read_at.values() for k, _ in ps}
    if keys - set(facts.reads) and chosen:  # a key learnt from a send: one more pass for its reads
        facts = scan(run_dir, keys, values)
    record = as_record(config)
    topic = record.topic or "queue"
    clk = clock(run_dir, record, facts.end_s if facts.end_s else None)
    faults, _ = faults_from(facts.nemesis, facts.end_s)
    log_view = logs.LogView(run_dir, topic, keys) if chosen else logs.LogView.empty()
    out: dict[str, list[dict[str, Any]]] = {}
    for name, exs in chosen.items():
        out[name] = []
        for ex in exs:
            ctx = explain_example(name, ex, facts, faults, topic, clk, log_view)
            if name == "unseen":  # lost for certain once the drain read its partition to the end
                ctx["drain_complete"] = bool((drain or {}).get("complete"))
            ctx["sentence"] = sentence(ctx)
            out[name].append(ctx)
    return {"clock": {"start_utc": clk.utc(0.0), "source": clk.source, "exact": clk.exact},
            "injected_faults": bool(facts.nemesis) or bool(record.nemesis), "examples": out}


def examples_from_findings(found: dict[str, set]) -> dict[str, list[dict[str, Any]]]:
    """The plain-Python reference's findings (analysis/reference/checker.py) as minimal examples."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, items in found.items():
        exs = []
        for it in sorted(items, key=repr):
            if name in ("lost-write", "unseen", "duplicate", "aborted-read"):
                exs.append({"value": it})
            elif name == "inconsistent-offsets":
                exs.append({"key": it[0], "offset": it[1]})
            elif name == "nonmonotonic-send":
                exs.append({"process": it[0], "key": it[1], "values": [it[2], it[3]]})
            elif name in ("nonmonotonic-poll", "poll-skip"):  # (n, process, key, previous offset, offset, across a rebalance)
                exs.append({"process": it[1], "key": it[2], "offsets": [it[3], it[4]],
                            **({"across_rebalance": True} if it[5:6] == (True,) else {})})
            # The transactional kinds' findings (op indexes, components) have no minimal example here:
            # they used to fall into the branch above and fail on their shape.
        if exs:
            out[name] = exs
    return out


def attach(run_dir: Path | str, results: dict[str, Any], config: RecordLike) -> dict[str, Any]:
    """results with "explanations" added; an explanation that fails says why instead (it never
    costs the verdict)."""
    try:
        results["explanations"] = explain(run_dir, results.get("examples") or {}, config, drain=results.get("drain"))
    except Exception as exc:  # an explanation is context: whatever goes wrong, the verdict is kept
        results["explanations"] = {"error": f"{type(exc).__name__}: {exc}", "examples": {}}
    return results
