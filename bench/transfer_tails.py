"""What did each leadership transfer leave behind? Per run directory:

    python bench/transfer_tails.py STORE/RUN_ID [...]

For every `transfer-leader` event (nemesis/transfer.py) prints the pair (old leader A, new leader
B), the coins (`cut`, `kill_after_s`, `old_second`), where B's epoch began ("queue-P starts at
Leader Epoch E from offset X" in B's server.log) and, when B was killed, which broker led next and
from which offset (its log end then). KIP-279's divergence needs the next leader to be A with its
log ending past X: A's **tail**, records B never had. With acks=all a broker reads a connection's
next request only after answering the last one, so a producer can leave at most the one request
that waits for the cut-off follower on A; this prints how often a transfer got any tail at all.
The divergence also needs B to write during its leadership: `B_wrote` is B's log end when it
reloaded the log after its restart ("Completed load of log ... log end offset E") minus `B_from`.
`ctrl` says which of the pair was the controller: before KRaft the cut also held back its requests.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from pathlib import Path

STARTS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] .*\[Partition (\S+) broker=(\d+)\] \S+ starts at "
                    r"Leader Epoch (\d+) from offset (\d+)")


LOADED = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] .*\[Log partition=(\S+), dir=\S+\] Completed load of "
                    r"log with \d+ segments, log start offset \d+ and log end offset (\d+)")


def log_end_after(run: Path, broker: int, partition: str, after: dt.datetime) -> int | None:
    """The log end offset `broker` found when it next loaded `partition` after `after` (its restart)."""
    log = run / "brokers" / str(broker) / "server.log"
    if not log.exists():
        return None
    for line in log.read_text(errors="replace").splitlines():
        m = LOADED.match(line)
        if m and m[2] == partition and _when(m[1]) > after:
            return int(m[3])
    return None


def _when(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=dt.timezone.utc)


def epoch_starts(run: Path) -> list[tuple[dt.datetime, str, int, int, int]]:
    """(when, partition, broker, epoch, start offset) from every broker's server.log, in time order."""
    out = []
    for log in sorted((run / "brokers").glob("*/server.log")):
        for line in log.read_text(errors="replace").splitlines():
            m = STARTS.match(line)
            if m:
                out.append((_when(m[1]), m[2], int(m[3]), int(m[4]), int(m[5])))
    return sorted(out)


def transfers(run: Path) -> list[dict]:
    config = json.loads((run / "config.json").read_text())
    zero = dt.datetime.fromisoformat(config["history_start_utc"])
    starts = epoch_starts(run)
    rows = []
    for line in (run / "history.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("f") != "transfer-leader":
            continue
        v, at = event["value"], zero + dt.timedelta(microseconds=event["time"] / 1000)
        old, new = v["targets"]
        part = v["partition"]
        row = {"run": run.name, "at_s": round(event["time"] / 1e9, 1), "partition": part, "A": old, "B": new,
               "cut": v.get("cut"), "kill_after_s": v.get("kill_after_s"), "old_second": v.get("old_second", True),
               # which of the pair was the controller (ZooKeeper era: the cut also held back its requests)
               "ctrl": next(("A" if int(b) == old else "B" for b, roles in (v.get("roles") or {}).items()
                             if "controller" in roles), None)}
        b_start = next((s for s in starts if s[0] >= at - dt.timedelta(seconds=1) and s[1] == part and s[2] == new), None)
        if b_start is not None:
            row["B_epoch"], row["B_from"] = b_start[3], b_start[4]
            nxt = next((s for s in starts if s[0] > b_start[0] and s[1] == part and s[3] > b_start[3]), None)
            if nxt is not None and v.get("kill_after_s") is not None:
                row["next"], row["next_epoch"], row["next_from"] = nxt[2], nxt[3], nxt[4]
                # Without the cut A truncated to B and refetched: its log end then is catch-up, not a tail.
                row["tail"] = nxt[4] - b_start[4] if nxt[2] == old and v.get("cut") else None
                end = log_end_after(run, new, part, b_start[0])
                row["B_wrote"] = end - b_start[4] if end is not None else None
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (STORE/RUN_ID)")
    args = parser.parse_args()
    rows = [r for run in args.runs for r in transfers(run)]
    cols = ["run", "at_s", "partition", "A", "B", "ctrl", "cut", "kill_after_s", "old_second", "B_epoch", "B_from",
            "next", "next_epoch", "next_from", "tail", "B_wrote"]
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "–")) for c in cols) + " |")
    full = [r for r in rows if r["cut"] and r.get("next") is not None and r["next"] == r["A"]]
    print(f"\n{len(rows)} transfers; {len(full)} cut, killed and followed by A; "
          f"{sum(1 for r in full if (r.get('tail') or 0) > 0)} of those left A a tail past B's epoch start; "
          f"{sum(1 for r in full if (r.get('tail') or 0) > 0 and (r.get('B_wrote') or 0) > 0)} of those with writes by B")
    cut = [r for r in rows if r["cut"]]
    for who in ("A", "B", None):
        these = [r for r in cut if r["ctrl"] == who]
        print(f"cut transfers with {'the controller ' + who if who else 'neither the controller'}: {len(these)}, "
              f"B began its epoch in {sum(1 for r in these if r.get('B_epoch') is not None)}")


if __name__ == "__main__":
    main()
