"""Did the new leader fetch back what its old leader had acknowledged? An offline test of a risk
signal that asks it, on a detect ledger's runs (issue 38, docs/guided.md):

    python bench/risk_fetch.py LEDGER.jsonl [...]      # detect's ledger (STORE/detection.jsonl)

Design 6's risk counted an election of a broker F at most 8 s after F's own log truncated the
partition. It fired in runs that diverged and in runs that did not at the same gaps: what tells
them apart is whether F fetched again from its old leader L before L was lost. This reads that
from around the truncation, for every election of F at most 30 s after F truncated the partition
to T (the rule design 7 then took into the watch, nemesis/guided/risk.py):

- L: the broker F's own log says it fetches the partition from right after the truncation
  ("Added fetcher ... [queue-3, initOffset T to broker BrokerEndPoint(L,...)]");
- cut: whether a fault kept F from L when F truncated, or within CUT_AFTER_S after it (L killed or
  paused, or F and L on two sides of a partition), from the history's nemesis events;
- back: whether L logged F's return to the ISR ("Expanding ISR ... to ...,F") between the
  truncation and the election: F had fetched up to L's high watermark, so every acknowledged write;
- acked: how many sends to the partition were acknowledged at offsets >= T before the election.

The signal fires for an election that is cut, not back, and with acked > 0. Per run it prints the
verdict, the count recorded live (`at_risk`: design 6's rule in runs before design 7), whether
the signal fired, and whether an election it fired for was of a broker truncated to an offset that
then diverged. `watch=` is design 7's live code on the same run: the run's state watch
(nemesis/guided/watch.py) fed the broker logs, the faults and the acknowledgements tick by tick,
once a second as live, where the columns before it read them at each line's own time. Only 0.10.2.2's lines are read
(the fetcher and ISR forms differ in later versions); broker log times and the history's are both
UTC (config.json's history_start_utc), so runs with clock faults are not comparable.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.risk_gaps import _when, diverged, runs  # noqa: E402
from nemesis.guided.loglines import classify, elected, fetch_sources, isr_joined, partition_pattern, truncated_to  # noqa: E402
from nemesis.guided.risk import CUT_AFTER_S, FETCH_LINE_S, TRUNCATIONS, WINDOW_S  # noqa: E402

ACK = re.compile(r'"time":(\d+),"process":\d+,"type":"ok","f":"send","value":\{"key":(\d+),"value":\d+,"offset":(\d+)')


def history(run: Path, start: float) -> tuple[list[tuple[float, str, dict]], dict[int, list[tuple[float, int]]]]:
    """(the nemesis events, in order; per partition, each acknowledged send's wall time and offset),
    from history.jsonl or, in a pruned run, history.parquet."""
    faults: list[tuple[float, str, dict]] = []
    acks: dict[int, list[tuple[float, int]]] = {}
    if (run / "history.jsonl").exists():
        with open(run / "history.jsonl") as f:
            for line in f:
                m = ACK.search(line)
                if m:
                    acks.setdefault(int(m.group(2)), []).append((start + int(m.group(1)) / 1e9, int(m.group(3))))
                elif '"process":"nemesis"' in line and '"observed"' not in line:
                    e = json.loads(line)
                    faults.append((start + e["time"] / 1e9, e["f"], e["value"] or {}))
        return faults, acks
    import pyarrow.parquet as pq
    table = pq.read_table(run / "history.parquet", columns=["time", "process", "type", "f", "value"]).to_pydict()
    for t, process, kind, f, value in zip(table["time"], table["process"], table["type"], table["f"], table["value"]):
        if process == "nemesis" and f != "observed":
            faults.append((start + t / 1e9, f, json.loads(value) if value else {}))
        elif kind == "ok" and f == "send" and value:
            v = json.loads(value)
            if v.get("offset") is not None:
                acks.setdefault(int(v["key"]), []).append((start + t / 1e9, int(v["offset"])))
    return faults, acks


def cut_between(events: list[tuple[float, str, dict]], t: float, f: int, leader: int) -> list[str]:
    """What kept F from L at wall time t: L down, L paused, F and L on two sides of a partition."""
    down: set[int] = set()
    paused: set[int] = set()
    grudge: dict[int, set[int]] = {}
    for when, kind, v in events:
        if when > t:
            break
        targets = set(v.get("targets") or [])
        if kind == "kill":
            down |= targets
        elif kind == "restart":
            down -= targets
        elif kind == "pause":
            paused |= targets
        elif kind == "resume":
            paused -= targets
        elif kind == "start-partition":
            grudge = {int(k): set(x) for k, x in (v.get("grudge") or {}).items()}
        elif kind == "stop-partition":
            grudge = {}
    why = (["L killed"] if leader in down else []) + (["L paused"] if leader in paused else [])
    return why + (["F|L cut"] if leader in grudge.get(f, set()) or f in grudge.get(leader, set()) else [])


def elections(run: Path) -> list[dict]:
    config = json.loads((run / "config.json").read_text())
    start = dt.datetime.fromisoformat(config["history_start_utc"]).timestamp()
    faults, acks = history(run, start)
    names = partition_pattern("queue")
    lines = []
    for log in sorted(run.glob("brokers/*/server.log")):
        broker = int(log.parent.name)
        for line in log.read_text(errors="replace").splitlines():
            when = _when(line)
            if when is not None:
                lines.append((when, broker, line))
    lines.sort(key=lambda x: x[0])
    truncated: dict[tuple[int, int], dict] = {}  # (partition, broker) -> its last truncation
    out = []
    for when, broker, line in lines:
        for partition, leader in fetch_sources(line, "queue").items():  # the leader a truncation's broker fetches from
            t = truncated.get((partition, broker))
            if t is not None and t["leader"] is None and when - t["at"] <= FETCH_LINE_S:
                t["leader"] = leader
        fact = classify(line, "queue", broker, names)
        if fact is None or fact.partition is None:
            continue
        if fact.kind == "isr-expand":
            for joined in isr_joined(line):
                t = truncated.get((fact.partition, joined))
                if t is not None:
                    t["back"] = True
        elif fact.kind in TRUNCATIONS:
            to = truncated_to(line)
            truncated[(fact.partition, broker)] = {"at": when, "to": -1 if to is None else to, "leader": None, "back": False}
        elif fact.kind == "leader":
            f = elected(line, fact)
            t = truncated.get((fact.partition, f)) if f is not None else None
            if t is None or when - t["at"] > WINDOW_S or t["leader"] in (None, f):
                continue
            cut = cut_between(faults, t["at"], f, t["leader"])
            if not cut:
                later = [w for w, *_ in faults if t["at"] < w <= t["at"] + CUT_AFTER_S]
                cut = next((c for w in later if (c := cut_between(faults, w, f, t["leader"]))), [])
            acked = sum(1 for at, o in acks.get(fact.partition, []) if o >= t["to"] and at < when)
            out.append({"partition": fact.partition, "new": f, "old": t["leader"], "gap_s": round(when - t["at"], 1),
                        "to": t["to"], "cut": cut, "back": t["back"], "acked": acked,
                        "fires": bool(cut) and not t["back"] and acked > 0})
    return out


# The history's nemesis events as the fault runner tells the run's Holds (nemesis/runner.py).
HOLDS_OF = {"kill": ("kill", "start"), "restart": ("kill", "stop"), "pause": ("pause", "start"), "resume": ("pause", "stop"),
            "start-partition": ("partition", "start"), "stop-partition": ("partition", "stop")}


def watched(run: Path, tick_s: float = 1.0) -> list[tuple[int, int]]:
    """The risks design 7's state watch counts when fed this run once a tick: (partition, new leader)."""
    import tempfile

    import nemesis.guided.watch as watch_module
    from nemesis.guided.watch import StateWatch
    from nemesis.holds import Holds

    config = json.loads((run / "config.json").read_text())
    start = dt.datetime.fromisoformat(config["history_start_utc"]).timestamp()
    faults, acks = history(run, start)

    class Broker:
        def __init__(self, node_id: int, lines: list[tuple[float, str]]) -> None:
            self.node_id, self.lines, self.text = node_id, lines, ""

        def read_log(self, offset: int, name: str) -> tuple[str, int]:
            return self.text[offset:], len(self.text)

    brokers = []
    for log in sorted(run.glob("brokers/*/server.log")):
        lines = [(w, line) for line in log.read_text(errors="replace").splitlines() if (w := _when(line)) is not None]
        brokers.append(Broker(int(log.parent.name), lines))
    sent = sorted((at, p, o) for p, xs in acks.items() for at, o in xs)
    holds = Holds()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.jsonl"
        path.write_text("")
        recorder = type("R", (), {"path": path, "nemesis": lambda self, *a: None})()
        watch = StateWatch(type("C", (), {"brokers": brokers})(), recorder, "queue", looker=lambda: None, holds=holds)
        clock = [0.0]
        real_now, watch_module.now = watch_module.now, lambda: clock[0]
        try:
            first = min((b.lines[0][0] for b in brokers if b.lines), default=start)
            last = max((b.lines[-1][0] for b in brokers if b.lines), default=start)
            t, fi, si, li = first, 0, 0, [0] * len(brokers)
            while t <= last + tick_s:
                t += tick_s
                clock[0] = t
                while fi < len(faults) and faults[fi][0] <= t:
                    when, kind, value = faults[fi]
                    if kind in HOLDS_OF:
                        holds.fault(*HOLDS_OF[kind], value)
                    fi += 1
                with open(path, "a") as f:
                    while si < len(sent) and sent[si][0] <= t:
                        f.write(f'{{"type":"ok","f":"send","value":{{"key":{sent[si][1]},"value":0,"offset":{sent[si][2]}}}}}\n')
                        si += 1
                for k, b in enumerate(brokers):
                    while li[k] < len(b.lines) and b.lines[li[k]][0] <= t:
                        b.text += b.lines[li[k]][1] + "\n"
                        li[k] += 1
                watch.tick()
        finally:
            watch_module.now = real_now
        return list(watch.risk.events)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ledgers", nargs="+", type=Path)
    parser.add_argument("-v", "--verbose", action="store_true", help="print every election the signal fires for")
    args = parser.parse_args()
    table = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}  # (fires, found) -> runs
    ticked = dict(table)  # the same, by the watch
    for row, run in runs(args.ledgers):
        found = bool(set(row["forbidden"]) & {"inconsistent-offsets", "lost-write"})
        fired = [e for e in elections(run) if e["fires"]]
        cut = diverged(run)
        hits = [e for e in fired if (e["partition"], e["to"]) in cut]
        live = watched(run)
        table[(bool(fired), found)] += 1
        ticked[(bool(live), found)] += 1
        print(f"{row['seed']:>3} {row['settings'].get('schedule', '-'):<7} {run.name} found={'yes' if found else 'no':<3} "
              f"at_risk={row.get('at_risk', '-')!s:<3} fires={len(fired):<3} "
              f"to a diverged offset={[(e['partition'], e['to'], e['gap_s']) for e in hits] or '-'} watch={len(live)}")
        for e in fired if args.verbose else []:
            print(f"      {e}")
    for name, t in (("at each line's time", table), ("by the watch, once a tick", ticked)):
        print(f"{name}: runs where it fires: {t[(True, True)]} found of {t[(True, True)] + t[(True, False)]}; "
              f"where it does not: {t[(False, True)]} found of {t[(False, True)] + t[(False, False)]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
