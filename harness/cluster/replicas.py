"""Replica-level evidence: what each replica of a partition holds on disk, read with Kafka's own tools.

For every replica: its `leader-epoch-checkpoint` (epoch -> start offset; absent before
KIP-101, i.e. Kafka 0.10.2) and its log dumped with `DumpLogSegments --print-data-log
--deep-iteration`, run inside that broker's container. `divergence` compares the replicas
offset by offset. `collect` writes RUN_DIR/replicas.json (shape in docs/scenarios.md):

    {"topic": T, "kafka_version": V, "tool": CLASS,
     "partitions": {"0": {"replicas": {"1": {"broker": 1, "leader_epochs": [[epoch, start], ...] | null,
                                               "records": [[offset, value, epoch|null], ...],
                                               "epochs_from": "batches" | "leader-epoch-checkpoint" | null,
                                               "log_end_offset": N, "error": null | "..."}, ...},
                          "divergence": {"diverged": bool, "first_offset": int|null, "last_offset": int|null,
                                         "differences": [{"offset": o, "values": {"1": v|null, "2": v|null}}, ...],
                                         "common_prefix": n, "log_end_offsets": {"1": n, ...}}}}}
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cluster.broker_config import DATA_DIR
from harness.cluster.leadership import run_tool
from harness.history.files import write_json
from harness.provision.kafka_jars import parse_version

if TYPE_CHECKING:
    from harness.cluster import KafkaCluster
    from harness.cluster.node import Node

MAX_DIFFERENCES = 20

_OFFSET = re.compile(r"(?<![A-Za-z])offset: (-?\d+)")
_PAYLOAD = re.compile(r"payload: (\S*)")
_EPOCH = re.compile(r"partitionLeaderEpoch: (-?\d+)")


def dump_tool(kafka_version: str) -> str:
    """DumpLogSegments moved from core (Scala) to the tools module in Kafka 4.0."""
    return "org.apache.kafka.tools.DumpLogSegments" if parse_version(kafka_version) >= (4, 0) else "kafka.tools.DumpLogSegments"


def parse_dump(text: str) -> list[tuple[int, int | str | None, int | None]]:
    """(offset, value, batch partitionLeaderEpoch) for every record line of DumpLogSegments output.

    Handles 0.10.x (one `offset: N position: ... payload: V` line per message, no epochs),
    1.x-3.x (batch header `baseOffset: ... partitionLeaderEpoch: E ...` then `| offset: N ... payload: V`)
    and 4.x (same, with different spacing). Values are ints when the payload is one."""
    records: list[tuple[int, int | str | None, int | None]] = []
    epoch: int | None = None
    for line in text.splitlines():
        if (m := _EPOCH.search(line)) is not None:
            epoch = int(m.group(1))
        if "payload:" not in line:
            continue  # batch headers of 1.x+ carry baseOffset/lastOffset, never a payload
        o = _OFFSET.search(line)
        if o is None:
            continue
        p = _PAYLOAD.search(line)
        raw = p.group(1) if p else None
        value: int | str | None = int(raw) if raw is not None and re.fullmatch(r"-?\d+", raw) else raw
        records.append((int(o.group(1)), value, epoch))
    return records


def parse_checkpoint(text: str) -> list[list[int]] | None:
    """leader-epoch-checkpoint: version line, count line, then `epoch start-offset` lines."""
    lines = [ln.split() for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) < 2 or not all(x.lstrip("-").isdigit() for ln in lines for x in ln):
        return None
    count = int(lines[1][0])
    return [[int(a), int(b)] for a, b in (ln[:2] for ln in lines[2 : 2 + count])]


def read_replica(node: "Node", topic: str, partition: int, kafka_version: str, timeout_s: int = 120,
                 raw_dir: Path | None = None) -> dict[str, Any]:
    """One replica's epochs and records, read inside its container."""
    pdir = f"{DATA_DIR}/{topic}-{partition}"
    out: dict[str, Any] = {"broker": node.node_id, "leader_epochs": None, "records": [], "log_end_offset": 0, "error": None}
    code, text = node.exec(f"cat {pdir}/leader-epoch-checkpoint 2>/dev/null")
    if code == 0 and text.strip():
        out["leader_epochs"] = parse_checkpoint(text)
    code, files = node.exec(f"ls {pdir}/*.log 2>/dev/null")
    segments = sorted(files.split())
    if code != 0 or not segments:
        out["error"] = f"no log segments in {pdir}"
        return out
    code, text = run_tool(node, dump_tool(kafka_version), f"--files {','.join(segments)} --print-data-log --deep-iteration",
                          timeout_s)
    if raw_dir is not None:  # the tool's own output, kept as evidence beside the parsed records;
        # gzipped: a 120 s run's dump is ~2.1 MB per replica as text, 125 kB gzipped (17x, measured),
        # and plain text made --compare-replicas add ~50 MB to every run directory.
        with gzip.open(raw_dir / f"dump-{topic}-{partition}.txt.gz", "wt") as raw:
            raw.write(text)
    records = parse_dump(text)
    if code != 0:
        out["error"] = f"DumpLogSegments exited {code}: {text.strip()[-300:]}"
    out["epochs_from"] = "batches"
    if records and all(e is None for _, _, e in records) and out["leader_epochs"]:
        # 1.x's --deep-iteration prints records without their batch header: take each record's
        # epoch from the replica's own leader-epoch-checkpoint (the epoch whose start precedes it).
        records = [(o, v, epoch_at(out["leader_epochs"], o)) for o, v, _ in records]
        out["epochs_from"] = "leader-epoch-checkpoint"
    elif not records or all(e is None for _, _, e in records):
        out["epochs_from"] = None
    out["records"] = [[o, v, e] for o, v, e in records]
    out["log_end_offset"] = (records[-1][0] + 1) if records else 0
    return out


def epoch_at(epochs: list[list[int]], offset: int) -> int | None:
    """The epoch an offset belongs to by a leader-epoch-checkpoint: the last entry starting at or before it."""
    found = None
    for epoch, start in epochs:
        if start <= offset:
            found = epoch
    return found


def divergence(replicas: dict[str, dict[str, Any]], not_compared: dict[str, str] | None = None) -> dict[str, Any]:
    """Compare replicas offset by offset up to the shortest log end: the first offset whose values
    differ, and up to MAX_DIFFERENCES differing offsets. A replica that is merely shorter (a lagging
    follower) does not diverge; one that holds another value at the same offset does. Replicas in
    `not_compared` (id -> why) are left out, and listed with their reason."""
    not_compared = not_compared or {}
    by_offset = {rid: {r[0]: r[1] for r in rep.get("records", [])} for rid, rep in replicas.items() if rid not in not_compared}
    ends = {rid: (max(m) + 1 if m else 0) for rid, m in by_offset.items()}
    common_end = min(ends.values()) if ends else 0
    differences: list[dict[str, Any]] = []
    count, last = 0, None
    for offset in range(common_end):
        values = {rid: m.get(offset) for rid, m in by_offset.items()}
        if len({json.dumps(v) for v in values.values()}) > 1:
            count, last = count + 1, offset
            if len(differences) < MAX_DIFFERENCES:
                differences.append({"offset": offset, "values": values})
    first = differences[0]["offset"] if differences else None
    return {
        "diverged": first is not None,
        "first_offset": first,
        "last_offset": last,
        "diverged_offsets": count,
        "common_prefix": first if first is not None else common_end,
        "log_end_offsets": ends,
        "differences": differences,
        **({"not_compared": dict(not_compared)} if not_compared else {}),
    }


def collect(cluster: "KafkaCluster", topic: str, partitions: list[int], kafka_version: str,
            replica_ids: dict[int, list[int]], run_dir: Path | None = None,
            isrs: dict[int, list[int]] | None = None, down: dict[int, str] | None = None) -> dict[str, Any]:
    """Read every replica of `partitions` (replica_ids: partition -> broker ids) and compare them;
    write RUN_DIR/replicas.json when `run_dir` is given. `isrs` (partition -> in-sync ids when
    dumped) is recorded beside each partition. Replicas of the brokers in `down` (id -> why) are
    read but not compared: a broker whose JVM is not running has not had the chance to truncate.
    0.10.2.2, 2026-11-25: a broker whose restart failed stayed down, and its disk, 1197 offsets that
    it led before its death, read as a divergence. A replica that runs but is outside the ISR IS
    compared: 1.1.1, the same day, a follower kept its own epoch-6 records after KIP-279's wrong
    answer, and its fetcher then died on the leader's batch ("UnexpectedAppendOffsetException"),
    which kept it out of the ISR for good: a divergence, not a lag."""
    down = down or {}
    result: dict[str, Any] = {"topic": topic, "kafka_version": kafka_version, "tool": dump_tool(kafka_version), "partitions": {}}
    for p in partitions:
        reps = {str(b): read_replica(cluster.node(b), topic, p, kafka_version, raw_dir=cluster.node(b).node_dir if run_dir else None)
                for b in replica_ids[p]}
        left_out = {str(b): down[b] for b in replica_ids[p] if b in down}
        result["partitions"][str(p)] = {"replicas": reps, "divergence": divergence(reps, left_out),
                                        **({"isr": sorted(isrs.get(p, []))} if isrs is not None else {})}
    if run_dir is not None:
        write_json(Path(run_dir) / "replicas.json", result, sort_keys=False, indent=1)
    return result

