"""Broker log lines about one partition, for the explanation of an anomaly example.

Every run directory keeps each broker's logs in `brokers/<id>/` (server.log, and rotated
server.log.<date> files; controller.log and state-change.log where log4j splits them). A line
starts `[YYYY-MM-DD HH:MM:SS,mmm]` (Kafka 4 writes a `T` for the space); the brokers' containers
run in UTC, so that time is compared with the history's UTC time directly. A line is "about"
partition K of topic T when it names `T-K` (not `T-K0`). Lines are quoted whole; continuation
lines of a stack trace are left out (each quote names its file and line number).

Leader changes are read from the same lines: the controller's `PartitionRecord`/
`PartitionChangeRecord` (`leader=2, … leaderEpoch=5`) and a broker's `starts at leader epoch 5`;
unclean elections from a KRaft controller's `UNCLEAN partition change for T-K …: leader: -1 -> 3,
leaderRecoveryState: RECOVERED -> RECOVERING, leaderEpoch: 1 -> 2` (PartitionRegistration logs a
change as UNCLEAN while the partition's leader recovery state is RECOVERING).
"""

from __future__ import annotations

import bisect
import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STAMP = re.compile(rb"^\[(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d),(\d{3})\]")
LEADER = re.compile(r"\bleader=(-?\d+)")
EPOCH = re.compile(r"\bleaderEpoch=(\d+)")
STARTS = re.compile(r"starts at leader epoch (\d+)")
# 3.x/4.x log a follower's start too ("Follower T-K starts at leader epoch E ... Current leader is
# L."): the broker that logs it is not the leader (a kafka17754 run's explanation named follower
# 2 as scenario-0's leader from such a line).
FOLLOWER = re.compile(r"\bFollower \S+ starts at leader epoch (\d+).*?Current leader is (-?\d+)")
BROKER = re.compile(r"\bbroker=(\d+)")
UNCLEAN_CHANGE = "UNCLEAN partition change for "
CHANGED_LEADER = re.compile(r"\bleader: (-?\d+) -> (-?\d+)")
CHANGED_EPOCH = re.compile(r"\bleaderEpoch: (\d+) -> (\d+)")
MAX_QUOTES = 20  # lines quoted per example; the rest are counted
MAX_LINES_PER_PARTITION = 50_000  # lines kept per partition (a run's logs mention one rarely)
FILES = ("server.log", "controller.log", "state-change.log")


@dataclass(order=True)
class Line:
    wall_ns: int
    broker: str = field(compare=False)
    file: str = field(compare=False)  # relative to the run directory
    line_no: int = field(compare=False)
    text: str = field(compare=False)


def _stamp_ns(m: re.Match[bytes]) -> int:
    when = dt.datetime.strptime(f"{m.group(1).decode()} {m.group(2).decode()}", "%Y-%m-%d %H:%M:%S")
    return int(when.replace(tzinfo=dt.timezone.utc).timestamp()) * 1_000_000_000 + int(m.group(3)) * 1_000_000


class LogView:
    """The lines of every broker log that name one of `keys`' partitions, in time order."""

    def __init__(self, run_dir: Path, topic: str, keys: set[int]) -> None:
        self.by_key: dict[int, list[Line]] = {k: [] for k in keys}
        self.topic = topic
        if not keys:
            return
        names = re.compile(rb"\b" + re.escape(topic.encode()) + rb"-(\d+)(?!\d)")
        brokers = run_dir / "brokers"
        for d in sorted(p for p in brokers.iterdir() if p.is_dir()) if brokers.is_dir() else []:
            for path in sorted(p for p in d.iterdir() if p.is_file() and p.name.startswith(FILES)):
                self._read(path, run_dir, d.name, names)
        for lines in self.by_key.values():
            lines.sort()

    @classmethod
    def empty(cls) -> "LogView":
        return cls(Path("."), "", set())

    def _read(self, path: Path, run_dir: Path, broker: str, names: re.Pattern[bytes]) -> None:
        try:
            fh = open(path, "rb")
        except OSError:
            return
        with fh:
            for n, raw in enumerate(fh, 1):
                found = names.findall(raw)
                if not found:
                    continue
                m = STAMP.match(raw)
                if not m:
                    continue
                line = None
                for k in {int(x) for x in found} & self.by_key.keys():
                    if len(self.by_key[k]) < MAX_LINES_PER_PARTITION:
                        line = line or Line(_stamp_ns(m), broker, str(path.relative_to(run_dir)), n,
                                            raw.decode("utf-8", "replace").rstrip("\r\n"))
                        self.by_key[k].append(line)

    def lines_about(self, key: int, from_ns: int | None, to_ns: int | None) -> tuple[list[dict[str, Any]], int]:
        """The lines about partition `key` between the two wall-clock instants (quoted whole, at
        most MAX_QUOTES, the earliest first), and how many more there were."""
        lines = self.by_key.get(key) or []
        if from_ns is None or to_ns is None:
            return [], 0
        i = bisect.bisect_left(lines, Line(from_ns, "", "", 0, ""))
        j = bisect.bisect_right(lines, Line(to_ns, "", "", 0, ""))
        picked = lines[i:j]
        return ([{"broker": x.broker, "file": x.file, "line": x.line_no, "text": x.text} for x in picked[:MAX_QUOTES]],
                max(0, len(picked) - MAX_QUOTES))

    def leader_at(self, key: int, wall_ns: int) -> dict[str, Any] | None:
        """The last leader change of partition `key` logged at or before `wall_ns`."""
        lines = self.by_key.get(key) or []
        j = bisect.bisect_right(lines, Line(wall_ns, "", "", 0, ""))
        for x in reversed(lines[:j]):
            leader, epoch = LEADER.search(x.text), EPOCH.search(x.text)
            if leader and epoch and int(leader.group(1)) >= 0:
                return {"leader": int(leader.group(1)), "epoch": int(epoch.group(1)), "wall_ns": x.wall_ns,
                        "file": x.file, "line": x.line_no}
            follower = FOLLOWER.search(x.text)
            if follower:
                if int(follower.group(2)) >= 0:
                    return {"leader": int(follower.group(2)), "epoch": int(follower.group(1)), "wall_ns": x.wall_ns,
                            "file": x.file, "line": x.line_no}
                continue
            starts = STARTS.search(x.text)
            if starts:
                b = BROKER.search(x.text)
                return {"leader": int(b.group(1)) if b else int(x.broker) if x.broker.isdigit() else None,
                        "epoch": int(starts.group(1)), "wall_ns": x.wall_ns, "file": x.file, "line": x.line_no}
        return None

    def unclean_elections(self, key: int) -> list[dict[str, Any]]:
        """The unclean elections of partition `key` (a leader chosen with its leader recovery state
        going RECOVERED -> RECOVERING: no in-sync or eligible replica was there to elect), one per
        new leader epoch, in epoch order. Every controller logs a change again when it replays the
        metadata log (a restarted one, minutes later), so the earliest line of an epoch is kept."""
        found: dict[int, dict[str, Any]] = {}
        for x in self.by_key.get(key) or []:
            if UNCLEAN_CHANGE not in x.text or "RECOVERED -> RECOVERING" not in x.text:
                continue
            leader, epoch = CHANGED_LEADER.search(x.text), CHANGED_EPOCH.search(x.text)
            if not leader or not epoch or int(leader.group(2)) < 0:
                continue
            e = int(epoch.group(2))
            if e not in found or x.wall_ns < found[e]["wall_ns"]:
                found[e] = {"leader": int(leader.group(2)), "was": int(leader.group(1)), "epoch": e,
                            "wall_ns": x.wall_ns, "file": x.file, "line": x.line_no}
        return [found[e] for e in sorted(found)]
