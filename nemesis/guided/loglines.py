"""What a broker's server.log says, reduced to a few kinds of fact: the log half of the abstract state.

Each pattern was written from real lines of the versions this harness runs, quoted in
tests/test_observer_loglines.py: 4.4.0 and 4.3.1 (KRaft; "[Partition queue-3 broker=3] Shrinking ISR
from 3,2,1 to 2,3", "Truncating partition queue-3 with TruncationState(...) due to local high
watermark 0", "Fencing broker 2 at epoch 10 because its session has timed out") and 0.10.2.2
(ZooKeeper; "Partition [scenario,0] on broker 2: Expanding ISR for partition scenario-0 from 2 to
2,3", "Truncating log scenario-0 to offset 0."), 1.1.1 (a random run of 2026-11-26) and 3.9.2 (the
KAFKA-17754 scenario runs of 2026-11-26, and the false-alarm runs of 2026-11-28: the same shapes as
4.x). 3.x/4.x leaders log most ISR changes as "ISR updated to ...", and the replicas log an ISR the
controller changed alone only in their "Skipped the become-... state change" lines; IsrSizes turns
both into a shrink or an expand.

A fact names a partition of the workload topic (`queue-3` or, before 0.11, `[queue,3]`) or none
(a cluster-wide fact: a controller change, a fenced broker, a start-up). Lines about other topics
(__consumer_offsets) are dropped: the scheduler steers by the workload's partitions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# kind -> pattern. Order matters: the first kind whose pattern matches a line wins, so the
# specific ones ("truncation refused") come before the general ones ("truncate").
KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((k, re.compile(p)) for k, p in (
    # 0.10.2.2's KAFKA-4039 precondition: a follower with a longer log than its new leader's.
    ("truncation-refused", r"Exiting because log truncation is not allowed"),
    # "has no effect" lines follow every restart's truncation to the high watermark and change nothing.
    ("truncate-noop", r"Truncating to (?:offset )?\d+ has no effect"),
    # 3.x/4.x say why: to the local high watermark (restart, KIP-101's old way) or to the leader's epoch end.
    ("truncate-hw", r"Truncating partition \S+ with TruncationState\(.*due to local high watermark"),
    ("truncate-epoch", r"Truncating partition \S+ with TruncationState\(.*due to leader epoch"),
    ("truncate", r"Truncating (?:log \S+ to offset \d+|to (?:offset )?\d+)"),
    ("isr-shrink", r"Shrinking ISR"),
    ("isr-expand", r"Expanding ISR"),
    # 4.x leaders log an ISR the controller changed (a fenced broker taken out, a caught-up one put
    # back) as "ISR updated to 3,2  and version updated to 3", which says neither shrink nor expand;
    # IsrSizes tells which from the size before. In the 4.4.0 roll runs of 2026-11-26 every one of
    # 307 ISR lines about the workload was of this kind, none "Shrinking"/"Expanding".
    ("isr-updated", r"\] ISR updated to \d"),
    ("elr", r"\bELRs?\b|eligibleLeaderReplicas=\[\d|\belr=\[\d"),
    # 3.9.2 and 4.x: an ISR the controller changed alone (a fenced broker taken out of every ISR)
    # reaches the replicas as metadata, and its only line is "Skipped the become-follower state
    # change for queue-4 ... isr=[3] ...". Without these the watch read 37 shrinks where the
    # metadata saw 115 ISR drops in ten 3.9.2 runs, and 35 where it saw 163 in ten 4.4.0 runs
    # (2026-11-28; 0.10.2.2: 576 against 647). After `elr`: a line with an ELR is that fact first.
    ("isr-updated", r"Skipped the become-(?:leader|follower) state change for .*\bisr=\["),
    # "since unclean leader election is disabled" says the opposite: the controller keeps a dead ISR
    # (0.10.2.2, 2026-11-26: 27 such lines in one guided run were read as unclean elections).
    ("offline", r"Retaining last ISR|since unclean leader election is disabled"),
    ("unclean", r"potential data loss|[Uu]nclean leader election|Periodic task electUnclean generated [1-9]"),
    # A broker becomes a partition's leader (3.x/4.x "Leader queue-5 ... starts at leader epoch 0",
    # 1.1.1 "queue-1 starts at Leader Epoch 2", 0.10.2.2's controller "Selected new leader and ISR").
    ("leader", r"\bLeader \S+ with topic id .* starts at leader epoch|^(?!.*Follower).*starts at Leader Epoch"
               r"|Selected new leader and ISR"),
    ("follower", r"\bFollower \S+ starts at leader epoch"),
    ("fenced", r"Fencing broker \d+|fenced=1\b"),
    ("unfenced", r"has been unfenced|request from broker \d+ to unfence has been granted"),
    ("controller", r"Becoming the active controller|the leader is \(none\)|successfully elected as (?:the )?(?:leader|controller)"
                   r"|Controller startup complete|starting become controller state transition"),
    ("startup", r"\[Kafka Server \d+\], started|\[KafkaServer id=\d+\] started|Kafka Server started"
                r"|Transition from STARTING to STARTED"),
    ("shutdown", r"\[Kafka Server \d+\], shutting down|\[KafkaServer id=\d+\] shutting down"
                 r"|Transition from \w+ to SHUTTING_DOWN|shut down completed"),
    ("fatal", r"\] FATAL |Shutdown broker because all log dirs"),
))
# Kinds that are about the whole cluster, whatever partition a line may name.
CLUSTER_KINDS = frozenset({"fenced", "unfenced", "controller", "startup", "shutdown", "fatal", "unclean"})
# Kinds that say nothing new about a partition's state (kept for counts, left out of the state).
QUIET_KINDS = frozenset({"truncate-noop", "follower", "isr-updated"})
# Who a `leader` fact elects: 0.10.2.2's controller names it ({"leader":4,...}); 1.1.1's and
# 3.x/4.x's new leaders log their own election ("[Partition queue-7 broker=1]", "[Broker id=1]").
ELECTED = re.compile(r'"leader":(\d+)|\[Partition \S+ broker=(\d+)\]|\[Broker id=(\d+)\] Leader ')
ISR_FROM_TO = re.compile(r"(?:Shrinking|Expanding) ISR (?:for partition \S+ )?from ([\d,]+) to ([\d,]+)")
ISR_UPDATED_TO = re.compile(r"ISR updated to ([\d,]+)|\bisr=\[([\d, ]*)\]")


@dataclass(frozen=True)
class Fact:
    kind: str
    partition: int | None  # of the workload topic; None: cluster-wide
    broker: int | None  # whose log said it


def partition_pattern(topic: str) -> re.Pattern[str]:
    """`queue-3` (not `queue-30` when asked about 3: the digits run to the end) or `[queue,3]` (before 0.11)."""
    t = re.escape(topic)
    return re.compile(rf"(?<![\w.-]){t}-(\d+)(?!\d)|\[{t},(\d+)\]")


def classify(line: str, topic: str, broker: int | None = None, names: re.Pattern[str] | None = None) -> Fact | None:
    """The fact one log line states, or None. Configuration dumps (tab-indented `key = value` lines
    at start-up: "unclean.leader.election.enable = false") and stack-trace lines state nothing."""
    if not line or line[0] in " \t" or "leader.election.enable" in line:
        return None
    for kind, pattern in KINDS:
        if pattern.search(line):
            break
    else:
        return None
    m = (names or partition_pattern(topic)).search(line)
    partition = int(m.group(1) or m.group(2)) if m else None
    if kind not in CLUSTER_KINDS and partition is None:
        # A partition fact about another topic (__consumer_offsets-7) is not the workload's.
        return None if re.search(r"[\w.-]+-\d+|\[[\w.-]+,\d+\]", line) else Fact(kind, None, broker)
    return Fact(kind, partition if kind not in CLUSTER_KINDS else None, broker)


def elected(line: str, fact: Fact) -> int | None:
    """The broker a `leader` fact's line elects (the log's own broker when the line does not say)."""
    m = ELECTED.search(line)
    return int(next(g for g in m.groups() if g is not None)) if m else fact.broker


def members(m: re.Match[str]) -> int:
    """How many brokers an ISR_UPDATED_TO match names ("3,1", "3, 1" or "": none)."""
    return len(re.findall(r"\d+", next(g for g in m.groups() if g is not None)))


class IsrSizes:
    """Turns "ISR updated to X" into a shrink or an expand, from the partition's ISR size before it:
    the last size a log line gave (any broker's: the ISR is the partition's, whoever leads it
    logs it), or, before any, the largest ISR yet seen anywhere (`full`: a fault phase starts from
    a whole cluster, so an ISR first heard of below it has shrunk). Equal sizes (a replica swapped
    for another) and a first line with nothing to compare stay `isr-updated`, counted but quiet."""

    def __init__(self, full: int = 0) -> None:
        self.full = full
        self.size: dict[int, int] = {}  # partition -> ISR size last read

    def saw(self, size: int) -> None:
        """An ISR size read elsewhere (the metadata): a bound on what a whole ISR is."""
        self.full = max(self.full, size)

    def resolve(self, line: str, fact: Fact | None) -> Fact | None:
        if fact is None or fact.partition is None:
            return fact
        if fact.kind == "elr" and (m := ISR_UPDATED_TO.search(line)):  # 4.x registrations name the ISR too
            self.size[fact.partition] = members(m)
            return fact
        if not fact.kind.startswith("isr-"):
            return fact
        if fact.kind == "isr-updated":
            m = ISR_UPDATED_TO.search(line)
            if m is None:
                return fact
            before, after = self.size.get(fact.partition, self.full or None), members(m)
        else:
            m = ISR_FROM_TO.search(line)
            if m is None:
                return fact
            before, after = len(m.group(1).split(",")), len(m.group(2).split(","))
        self.size[fact.partition] = after
        self.saw(after)
        if fact.kind != "isr-updated" or before is None or after == before:  # an empty ISR (4.x, ELR) is a size
            return fact
        return Fact("isr-shrink" if after < before else "isr-expand", fact.partition, fact.broker)


class LogTail:
    """One broker's server.log read from where the last read ended (Node.read_log), in whole lines.
    A file that got shorter was rotated by log4j: reading starts again from its beginning."""

    def __init__(self, node: object, name: str = "server.log") -> None:
        self.node, self.name, self.offset, self.rest = node, name, 0, ""

    def start_at_end(self) -> None:
        """Skip what the log already holds (the cluster's start-up is not the fault phase's)."""
        _, self.offset = self.node.read_log(self.offset, self.name)  # type: ignore[attr-defined]

    def lines(self) -> list[str]:
        transport = getattr(self.node, "transport", None)
        if transport is not None and transport.size(self.name) < self.offset:  # rotated
            self.offset, self.rest = 0, ""
        text, end = self.node.read_log(self.offset, self.name)  # type: ignore[attr-defined]
        self.offset = end
        text = self.rest + text
        whole, _, self.rest = text.rpartition("\n")
        return whole.splitlines() if whole else []


# What design 7's risk signal (nemesis/guided/risk.py) reads beyond a line's kind. A follower's
# fetcher names the leader it fetches each partition from (0.10.2.2 and 1.1.1: "Added fetcher for
# partitions List([queue-4, initOffset 5260 to broker BrokerEndPoint(3,kafka-3,9092)] , ...");
# a truncation names its offset ("Truncating log queue-5 to offset 4551.", 1.1.1's "Truncating to
# 4551", 3.x/4.x's "TruncationState(offset=4551, completed=true)").
FETCH_FROM = re.compile(r"\[(?:\S+?)-(\d+), initOffset -?\d+ to broker BrokerEndPoint\((?:id=)?(\d+),")
TRUNCATED_TO = re.compile(r"Truncating (?:log \S+ )?to (?:offset )?(\d+)|TruncationState\(offset=(\d+)")


def fetch_sources(line: str, topic: str) -> dict[int, int]:
    """Partition of `topic` -> the broker a fetcher line says it is fetched from ({} for other lines)."""
    if "Added fetcher" not in line:
        return {}
    prefix = f"[{topic}-"
    return {int(m.group(1)): int(m.group(2)) for m in FETCH_FROM.finditer(line)
            if line[m.start():m.start() + len(prefix)] == prefix}


def truncated_to(line: str) -> int | None:
    m = TRUNCATED_TO.search(line)
    return int(m.group(1) or m.group(2)) if m else None


def isr_joined(line: str) -> set[int]:
    """The brokers an "Expanding ISR ... from A to B" line adds (B - A); empty for any other line."""
    m = ISR_FROM_TO.search(line)
    if m is None or "Expanding" not in line:
        return set()
    return {int(b) for b in m.group(2).split(",")} - {int(b) for b in m.group(1).split(",")}
