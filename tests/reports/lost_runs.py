"""Synthetic run directories with lost writes, shaped like a real unsafe run: the leader of
queue-0 (broker 2, epoch 5) acknowledges a few writes, is killed before its followers copied
them, and broker 3 takes over in epoch 6 from the last replicated offset, so those offsets are
reused by later values. Consumers read the surviving log with each record's leader epoch; send
completions carry "epoch": null, as confluent-kafka reports them. Broker logs hold the
leadership change and unrelated lines, in Kafka's own formats.

`make_lost_run` returns the run directory and the truth: each lost value, its offset and the
value found at that offset instead."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

NS = 1_000_000_000
START = dt.datetime(2026, 3, 2, 12, 3, 0, tzinfo=dt.timezone.utc)


def _stamp(t: float, sep: str = "T") -> str:
    return (START + dt.timedelta(seconds=t)).strftime(f"%Y-%m-%d{sep}%H:%M:%S,%f")[:-3]


def make_lost_run(root: Path, name: str, *, seed: int = 1, lost: int = 3, kill_at: float = 4.0,
                  recorded_start: bool = True, logs: bool = True, epochs: bool = True,
                  errors: bool = True, keys: int = 2, seconds: float = 10.0) -> tuple[Path, list[dict[str, Any]]]:
    rnd = random.Random(seed)
    ev: list[tuple[float, int, dict]] = []

    def add(t: float, process: Any, type_: str, f: str, value: Any, error: str | None = None) -> None:
        e = {"process": process, "type": type_, "f": f, "value": value}
        if error:
            e["error"] = error
        ev.append((t, len(ev), e))

    failover = kill_at + 0.5
    add(kill_at, "nemesis", "info", "kill", {"target": "leader", "targets": [2], "roles": {"2": ["leader:queue-0"]}, "pids": {"2": 811}})
    add(kill_at + 3.0, "nemesis", "info", "restart", {"targets": [2], "pids": {"2": 912}})
    add(seconds - 0.2, "nemesis", "info", "heal", {"ok": True})
    for c in (10, 11):
        add(0.5, c, "invoke", "assign", {"keys": list(range(keys)), "seek": "beginning"})
        add(0.501, c, "ok", "assign", {"keys": list(range(keys)), "seek": "beginning"})
    log: dict[int, list[tuple[int, int, int, float]]] = {k: [] for k in range(keys)}  # surviving (offset, value, epoch, ack time)
    truth: list[dict[str, Any]] = []
    pending_lost: list[tuple[int, int]] = []  # (value, offset) acked by the old leader, then truncated
    value, t = 0, 1.0
    while t < seconds - 1.0:
        t += rnd.uniform(0.005, 0.015)
        value += 1
        k = 0 if value % 2 else rnd.randrange(keys)
        p = value % 2
        add(t, p, "invoke", "send", {"key": k, "value": value})
        if kill_at <= t < failover:
            if k == 0 and len(pending_lost) < lost:  # acknowledged by broker 2 just before it died
                o = len(log[0]) + len(pending_lost)
                pending_lost.append((value, o))
                add(t + 0.004, p, "ok", "send", {"key": 0, "value": value, "offset": o, "epoch": None})
            else:
                add(t + 0.3, p, "info", "send", {"key": k, "value": value, "offset": None, "epoch": None},
                    error="REQUEST_TIMED_OUT: Broker: Request timed out" if errors else None)
            continue
        epoch = 5 if t < kill_at or k else 6
        o = len(log[k])
        log[k].append((o, value, epoch, t + 0.004))
        add(t + 0.004, p, "ok", "send", {"key": k, "value": value, "offset": o, "epoch": None})
    for v, o in pending_lost:
        instead = log[0][o][1] if o < len(log[0]) else None
        truth.append({"value": v, "key": 0, "offset": o, "instead": instead, "instead_epoch": log[0][o][2] if instead else None})
    # consumers: everything of the surviving log, in order, late enough to have been replicated
    for c in (10, 11):
        tt = 1.0
        pos = dict.fromkeys(range(keys), 0)
        while tt < seconds + 0.5:
            tt += 0.25
            recs = []
            for k in range(keys):
                upto = pos[k]
                while upto < len(log[k]) and upto < pos[k] + 40 and log[k][upto][3] < tt - 0.1:  # replicated by then
                    upto += 1
                recs += [{"key": k, "offset": o, "value": v, "epoch": e if epochs else None} for o, v, e, _ in log[k][pos[k]:upto]]
                pos[k] = upto
            add(tt, c, "invoke", "poll", None)
            add(tt + 0.01, c, "ok", "poll", {"records": recs})
    ev.sort(key=lambda x: (x[0], x[1]))
    events = [{"index": i, "time": int(t * NS), **e} for i, (t, _, e) in enumerate(ev)]
    run_dir = root / name
    (run_dir / "brokers").mkdir(parents=True, exist_ok=True)
    with open(run_dir / "history.jsonl", "w") as fh:
        for e in events:
            fh.write(json.dumps(e, separators=(",", ":")) + "\n")
    config = {"history_format": 1, "run_id": name, "status": "completed", "seed": seed, "kafka_version": "4.3.1",
              "brokers": 3, "workload": "queue", "topic": "queue", "partitions": keys, "replication_factor": 3,
              "producers": 2, "consumers": 2, "rate": 100, "time_limit_s": seconds, "nemesis": ["kill"],
              "profile": {"name": "unsafe", "acks": "1", "enable.idempotence": False, "min.insync.replicas": 1,
                          "replication.factor": 3, "unclean.leader.election.enable": False},
              "phases_s": {"workload": 1.0},
              "drain": {"complete": True, "high_watermarks": {str(k): len(log[k]) for k in range(keys)},
                        "timed_out_partitions": [], "processes": [], "first_index": len(events), "seconds": 0.1}}
    if recorded_start:
        config["history_start_utc"] = START.isoformat(timespec="microseconds")
    (run_dir / "config.json").write_text(json.dumps(config, indent=2))
    for b in (1, 2, 3):
        (run_dir / "brokers" / str(b)).mkdir(exist_ok=True)
        lines = [f"[{_stamp(0.2)}] INFO [KafkaRaftServer nodeId={b}] Kafka Server started (kafka.server.KafkaRaftServer)"]
        if logs and b == 3:
            lo = pending_lost[0][1] if pending_lost else 0
            lines += [
                f"[{_stamp(failover - 0.05)}] INFO [QuorumController id=3] Replayed PartitionChangeRecord(partitionId=0, topicId=1GeAQSGpS32n6RN9Ed3oEw, "
                "isr=[3, 1], leader=3, replicas=null, removingReplicas=null, addingReplicas=null, leaderRecoveryState=-1, "
                "directories=null, eligibleLeaderReplicas=null, lastKnownElr=null, leaderEpoch=6) for topic queue "
                "(org.apache.kafka.controller.ReplicationControlManager)",
                f"[{_stamp(failover)}] INFO [Partition queue-0 broker=3] queue-0 starts at leader epoch 6 from offset {lo} "
                f"with partition epoch 9 and high watermark {lo}. Current leader is 3. ISR : [3, 1]. Previous leader Some(2) and "
                "previous leader epoch was 5. (kafka.cluster.Partition)",
                f"[{_stamp(failover + 0.1)}] INFO [Partition queue-1 broker=3] ISR updated to 3,1 and version updated to 10 (kafka.cluster.Partition)",
                f"[{_stamp(failover + 9)}] INFO [Partition queue-0 broker=3] ISR updated to 3,1,2 and version updated to 11 (kafka.cluster.Partition)",
            ]
        if logs and b == 1:
            lines += [f"[{_stamp(failover + 0.2)}] WARN [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Error in response for "
                      "fetch request (type=FetchRequest, replicaId=1, maxWait=500, minBytes=1, maxBytes=10485760, "
                      "fetchData={queue-0=PartitionData(topicId=1GeAQSGpS32n6RN9Ed3oEw, fetchOffset=812, logStartOffset=0, "
                      "maxBytes=1048576, currentLeaderEpoch=Optional[5], lastFetchedEpoch=Optional[5])}, isolationLevel=READ_UNCOMMITTED, "
                      "removed=, replaced=, metadata=(sessionId=1234, epoch=77), rackId=) (kafka.server.ReplicaFetcherThread)",
                      "java.io.IOException: Connection to 2 was disconnected before the response was read",
                      "\tat org.apache.kafka.clients.NetworkClientUtils.sendAndReceive(NetworkClientUtils.java:99)"]
        (run_dir / "brokers" / str(b) / "server.log").write_text("\n".join(lines) + "\n")
    return run_dir, truth
