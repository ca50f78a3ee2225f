"""Evidence from the brokers' logs that explains duplicates under an idempotent producer.

With `enable.idempotence` the broker drops a retried batch it already holds, so duplicates are
forbidden. librdkafka breaks that in one known case (librdkafka issue #4953, open in 2.x): an
OUT_OF_ORDER_SEQUENCE response on any partition makes it bump the producer epoch for all
partitions. It then sends again, under the new epoch, messages that may already be in the log, and
the broker cannot see that they are duplicates. The broker logs each such response as an
`OutOfOrderSequenceException`, so when a run shows forbidden duplicates the checker quotes these
lines. The duplicates stay forbidden, because they really are in the log.

The same bump follows a local message timeout (`_MSG_TIMED_OUT`, message.timeout.ms): librdkafka
drains and bumps the epoch producer-wide (rdkafka_broker.c: "Message timeouts will lead to gaps in
the message sequence ... Bump the epoch"), and its maintainer wrote on #4953 that the idempotent
producer "can have duplications in case messages time out (5 mins) because the epoch needs to be
bumped" (TIMEOUT_SOURCE). The 4.4.0 campaign's seed 19 (2026-11-27) showed it: 27,727 values
written twice in one leader epoch, each acknowledged at its second offset right after its
producer's first messages timed out, 300 s into a long outage, and no OutOfOrderSequenceException.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

MARKER = "OutOfOrderSequenceException"
ISSUE = "https://github.com/confluentinc/librdkafka/issues/4953"
TIMED_OUT = "_MSG_TIMED_OUT"  # librdkafka's error name for a local message timeout, as the history records it
TIMEOUT_SOURCE = "https://github.com/confluentinc/librdkafka/issues/4953#issuecomment-2887059722"
MAX_BYTES = 64 << 20  # per log file: bounded work even for a huge log


# A broker log line's time ("[2026-11-23 21:53:19,123]"; containers log in UTC), the producer id
# and the partition in the exception's text (Kafka 0.11 to 4.x spell them as below).
_LOG_TIME = re.compile(rb"^\[(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}),(\d{3})\]")
_PRODUCER = re.compile(r"for producer(?:Id)?[ =](\d+)")
_PARTITION = re.compile(r"in partition (\S+?)-(\d+)\b")
# Kafka 1.x names the partition only on the line above the exception (measured on 1.1.1):
# "ERROR [ReplicaManager broker=3] Error processing append operation on partition queue-1".
_APPEND = re.compile(r"append operation on partition (\S+?)-(\d+)\b")
MAX_EVENTS = 10_000
# A log line's time is written after the broker refused the batch, to the millisecond, on the
# same kernel clock as the history's: a little slack either side of a send's window.
SLACK_NS = 100_000_000


def _utc_ns(m: re.Match) -> int:
    day, hms, ms = (g.decode() for g in m.groups())
    when = dt.datetime.strptime(f"{day} {hms}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp()) * 1_000_000_000 + int(ms) * 1_000_000


def out_of_order_sequences(run_dir: Path | str, limit: int = 5) -> dict[str, Any] | None:
    """Count and quote (up to `limit`) the brokers' OutOfOrderSequenceException lines, each with its
    time (UTC ns, from the nearest timestamped line above: the exception may sit in a stack trace),
    partition and producer id (`events`, up to MAX_EVENTS); None when the run has no broker logs."""
    logs = sorted(Path(run_dir).glob("brokers/*/server.log"))
    if not logs:
        return None
    count, examples, events = 0, [], []
    for log in logs:
        with open(log, "rb") as fh:
            data = fh.read(MAX_BYTES)
        when, above = None, None
        for raw in data.splitlines():
            stamped = _LOG_TIME.match(raw)
            if stamped:
                when = _utc_ns(stamped)
                above = _APPEND.search(raw.decode("utf-8", "replace")) if b"append operation" in raw else None
            if MARKER.encode() not in raw:
                continue
            count += 1
            line = raw.decode("utf-8", "replace").strip()
            if len(examples) < limit:
                examples.append({"broker": log.parent.name, "line": line[line.find(MARKER):][:300]})
            if len(events) < MAX_EVENTS:
                producer, partition = _PRODUCER.search(line), _PARTITION.search(line) or (None if stamped else above)
                events.append({"broker": log.parent.name, "utc_ns": when,
                               "topic": partition.group(1) if partition else None,
                               "partition": int(partition.group(2)) if partition else None,
                               "producer_id": int(producer.group(1)) if producer else None})
    return {"count": count, "examples": examples, "events": events, "explanation": ISSUE}


# How often a producer reports its id and epoch (workloads/producer_ids.py): an id change is seen
# up to this late, so a send that completed this close before a change may carry either id.
STATS_INTERVAL_S = 1.0


def attach_producer_ids(sends: list[dict[str, Any]], ids: list[tuple[Any, float, int]],
                        interval_s: float = STATS_INTERVAL_S) -> list[dict[str, Any]]:
    """Give each send (with `process`, `invoke_s`, `complete_s`) the `producer_id` its process held
    while it was in flight, where the history's `producer` events prove it; otherwise leave it out
    (the match then ignores producer ids, as for histories that have none).

    A producer acquires its id once and keeps it across epoch bumps, so a process that only ever
    reported one id sent everything under it. A process with several ids: the last id reported at
    or before the invoke, when no other id was reported before the send completed plus one
    statistics interval (an id change is seen up to one interval late)."""
    by_process: dict[Any, list[tuple[float, int]]] = {}
    for process, at, pid in sorted(ids, key=lambda x: x[1]):
        by_process.setdefault(process, []).append((at, pid))
    for send in sends:
        seen = by_process.get(send.get("process")) or []
        distinct = {pid for _, pid in seen}
        if len(distinct) == 1:
            send["producer_id"] = next(iter(distinct))
            continue
        if send.get("invoke_s") is None or send.get("complete_s") is None:
            continue
        before = [pid for at, pid in seen if at <= send["invoke_s"]]
        changed = any(pid != before[-1] for at, pid in seen
                      if send["invoke_s"] < at <= send["complete_s"] + interval_s) if before else True
        if before and not changed:
            send["producer_id"] = before[-1]
    return sends


def _same_bump(event: dict[str, Any], send: dict[str, Any]) -> bool:
    """Whether a refused batch can have caused this send's re-send. librdkafka's epoch bump is
    producer-wide: rd_kafka_idemp_drain_epoch_bump drains the in-flight requests of every partition
    and re-sends them under the new epoch, so the refusal may be on any partition of the send's
    producer (the controls met it on another partition three times: README). Without both producer
    ids the refusal must be on the send's own partition, the narrowest reading left."""
    if send.get("producer_id") is not None and event["producer_id"] is not None:
        return bool(event["producer_id"] == send["producer_id"])
    if send.get("producer_id") is not None:
        return False  # the log line named no producer: it cannot be tied to this one
    return bool(event["partition"] == send["key"])


def match_duplicates(evidence: dict[str, Any] | None, sends: list[dict[str, Any]] | None, start_ns: int | None,
                     topic: str | None = None) -> dict[str, Any]:
    """Which duplicated values an OutOfOrderSequenceException explains: one logged between the
    send's invoke and its acknowledgement (± SLACK_NS), on its topic, for the send's producer id
    (on any partition) where the history records one, else on the value's own partition
    (`_same_bump`). `sends` are the duplicated values' sends ({value, key, invoke_s, complete_s, producer_id?}); `start_ns` is the history's
    zero on the wall clock (config.json history_start_utc), without which nothing can be matched.

    Why so narrow (issue 19): the nightly suite excused a safe run's duplicates as librdkafka's
    epoch-bump bug whenever any such line existed anywhere in the run. A duplicate far from any
    refused batch is not that bug, and must fail the night. Issue 21 found the partition rule too
    narrow: a 1.1.1 run's duplicates on queue-7 followed a refusal on queue-1 by their producer."""
    out: dict[str, Any] = {"duplicates": len(sends or []), "explained": 0, "unexplained": [], "matches": []}
    if start_ns is None:
        out["why_not"] = "the run recorded no wall-clock start (history_start_utc): log times cannot be placed"
    for send in sends or []:
        found = None
        if start_ns is not None and send.get("invoke_s") is not None and send.get("complete_s") is not None:
            lo = start_ns + int(send["invoke_s"] * 1e9) - SLACK_NS
            hi = start_ns + int(send["complete_s"] * 1e9) + SLACK_NS
            for e in (evidence or {}).get("events") or []:
                if (e["utc_ns"] is not None and lo <= e["utc_ns"] <= hi
                        and (topic is None or e["topic"] in (None, topic)) and _same_bump(e, send)):
                    found = e
                    break
        if found is None:
            out["unexplained"].append(send["value"])
        else:
            send["refused_batch"] = True  # client_explained counts it
            out["explained"] += 1
            if len(out["matches"]) < 5:
                out["matches"].append({"value": send["value"], "broker": found["broker"], "producer_id": found["producer_id"],
                                       "partition": found["partition"]})
    out["unexplained"] = out["unexplained"][:20]
    return out


def attach_message_timeouts(sends: list[dict[str, Any]], timeouts: list[tuple[Any, float]]) -> list[dict[str, Any]]:
    """Give each send (`process`, `invoke_s`, `complete_s`) the first local message timeout of its
    process (`timed_out_s`: a send of the same producer that completed `_MSG_TIMED_OUT`) at or after
    its invoke and at most SLACK_NS after its acknowledgement: an epoch bump that may have re-sent
    it. `timeouts`: (process, seconds) on the history's clock."""
    import bisect

    by_process: dict[Any, list[float]] = {}
    for process, at in timeouts:
        by_process.setdefault(process, []).append(at)
    for times in by_process.values():
        times.sort()
    for send in sends:
        times = by_process.get(send.get("process")) or []
        if not times or send.get("invoke_s") is None or send.get("complete_s") is None:
            continue
        i = bisect.bisect_left(times, send["invoke_s"])
        if i < len(times) and times[i] <= send["complete_s"] + SLACK_NS / 1e9:
            send["timed_out_s"] = times[i]
    return sends


def attach_epoch_bumps(sends: list[dict[str, Any]], epochs: list[tuple[Any, float, int, int]],
                       interval_s: float = STATS_INTERVAL_S) -> list[dict[str, Any]]:
    """Give each send the epoch bump of its producer seen while it was in flight (`epoch_bump`:
    from, to, at): the epoch its process last reported at or before the invoke, and a higher one
    (same producer id) reported after the invoke and at most one statistics interval after the
    acknowledgement (a change is seen up to one interval late). `epochs`: (process, seconds,
    producer id, epoch) from the history's `producer` events (workloads/producer_ids.py)."""
    by_process: dict[Any, list[tuple[float, int, int]]] = {}
    for process, at, pid, epoch in sorted(epochs, key=lambda x: x[1]):
        by_process.setdefault(process, []).append((at, pid, epoch))
    for send in sends:
        seen = by_process.get(send.get("process")) or []
        if not seen or send.get("invoke_s") is None or send.get("complete_s") is None:
            continue
        before = [x for x in seen if x[0] <= send["invoke_s"]]
        if not before:
            continue
        _, pid, epoch = before[-1]
        later = [x for x in seen if send["invoke_s"] < x[0] <= send["complete_s"] + interval_s and x[1] == pid and x[2] > epoch]
        if later:
            send["epoch_bump"] = {"from": epoch, "to": later[-1][2], "at_s": round(later[0][0], 3)}
    return sends


def librdkafka_only(sends: list[dict[str, Any]] | None, client: str) -> list[dict[str, Any]] | None:
    """The sends with the message-timeout and epoch facts kept only when the run's client was
    librdkafka: they stand for its epoch bump, and the Java client's own rules differ."""
    if client != "librdkafka":
        for send in sends or []:
            send.pop("timed_out_s", None)
            send.pop("epoch_bump", None)
    return sends


def _explained(send: dict[str, Any]) -> bool:
    return bool(send.get("refused_batch") or send.get("timed_out_s") is not None or send.get("epoch_bump"))


def client_explained(sends: list[dict[str, Any]] | None, client: str = "librdkafka") -> dict[str, Any] | None:
    """How many duplicated values' sends a librdkafka epoch bump explains, and by what evidence: a
    batch of their producer the broker refused (`match_duplicates`), a message of their producer
    that timed out locally while they were in flight (`attach_message_timeouts`), or their
    producer's epoch seen rising while they were in flight (`attach_epoch_bumps`). `client` is the
    run's client: only a librdkafka run's may be called its known bug (`known_client_duplicates`).
    None without sends."""
    if not sends:
        return None
    timed = [s for s in sends if s.get("timed_out_s") is not None]
    bumped = [s["epoch_bump"] for s in sends if s.get("epoch_bump")]
    return {"client": client, "duplicates": len(sends), "explained": sum(1 for s in sends if _explained(s)),
            "refused_batch": sum(1 for s in sends if s.get("refused_batch")), "message_timeout": len(timed),
            "epoch_bumped": len(bumped),
            "first_timeout_s": round(min(s["timed_out_s"] for s in timed), 3) if timed else None,
            "epochs": [min(b["from"] for b in bumped), max(b["to"] for b in bumped)] if bumped else None,
            "unexplained": [s["value"] for s in sends if not _explained(s)][:20]}


def timeout_hint(explained: dict[str, Any] | None) -> str | None:
    """The sentence the verdict adds to its reasons when message timeouts explain duplicates."""
    if not explained or not (explained["message_timeout"] or explained["epoch_bumped"]):
        return None
    said = []
    if explained["message_timeout"]:
        said.append(f"{explained['message_timeout']:,} were acknowledged after a message of their producer timed out "
                    f"locally ({TIMED_OUT}, first at t={explained['first_timeout_s']:.3f} s)")
    if explained["epoch_bumped"]:
        lo, hi = explained["epochs"]
        said.append(f"{explained['epoch_bumped']:,} were in flight while their producer's epoch rose (from {lo} to {hi}, "
                    "librdkafka's statistics)")
    return (f"of the {explained['duplicates']:,} duplicated value(s) checked, {' and '.join(said)}; after a message "
            f"timeout librdkafka bumps the producer epoch and re-sends batches that may already be in the log, which "
            f"idempotence cannot deduplicate ({TIMEOUT_SOURCE})")


def duplicate_hint(evidence: dict[str, Any] | None, client: str = "librdkafka") -> str | None:
    """The sentence the verdict adds to its reasons when duplicates are forbidden. It names
    librdkafka's epoch bump only in a librdkafka run: what another client does after a refused
    batch is not the checker's to say."""
    if not evidence or not evidence["count"]:
        return None
    first = evidence["examples"][0]
    logged = (f"brokers logged {evidence['count']} OutOfOrderSequenceException(s) (broker {first['broker']}: "
              f"{first['line'][:160]})")
    if client == "librdkafka":
        return (f"{logged}; after one, librdkafka bumps the producer epoch and may resend messages already in "
                f"the log, which idempotence then cannot deduplicate ({ISSUE})")
    return (f"{logged}; this run's client is {client}, not librdkafka, so librdkafka's epoch-bump re-sends "
            f"({ISSUE}) do not explain its duplicates: read the refused batches beside them")


def known_client_duplicates(results: dict[str, Any]) -> str | None:
    """Why a run's verdict is `invalid` for a known client bug and nothing else: its only forbidden
    anomaly is `duplicate`, and every duplicated value's send window holds an
    OutOfOrderSequenceException of its producer (`match_duplicates`) or a local message timeout of
    its producer (`client_explained`; librdkafka #4953 both). None for every other run, and for
    results that do not carry that match. The verdict stays `invalid`; this only lets a caller tell
    a known librdkafka bug from a finding about Kafka (the nightly suite marks such a run xfail)."""
    duplicates = (results.get("counts") or {}).get("duplicate")
    if set(results.get("forbidden") or []) != {"duplicate"} or not duplicates:
        return None
    client = results.get("client_duplicates")
    if client is not None:  # results from 2026-11-27 on: every cause, value by value
        if client.get("client", "librdkafka") != "librdkafka":  # the bug is librdkafka's; another client's duplicates are a finding
            return None
        if client.get("duplicates") != duplicates or client.get("explained") != duplicates:
            return None
        how = [f"{client['refused_batch']} after a broker refused an out-of-order batch of its producer"] if client["refused_batch"] else []
        how += [f"{client['message_timeout']} after a message of its producer timed out locally"] if client["message_timeout"] else []
        how += [f"{client['epoch_bumped']} while its producer's epoch rose"] if client.get("epoch_bumped") else []
        return (f"known client bug: each of {duplicates} duplicate(s) was re-sent under a bumped epoch "
                f"({'; '.join(how)}); librdkafka ({ISSUE})")
    evidence = results.get("out_of_order_sequences") or {}
    matched = evidence.get("duplicates_matched") or {}
    if not evidence.get("count") or matched.get("duplicates") != duplicates or matched.get("explained") != duplicates:
        return None
    return (f"known client bug: each of {duplicates} duplicate(s) was sent while a broker refused an out-of-order "
            f"batch of its producer ({evidence['count']} OutOfOrderSequenceException(s) in all); librdkafka re-sends "
            f"under a bumped epoch ({ISSUE})")
