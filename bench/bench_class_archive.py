"""Kafka's JVMs with and without the class archive (harness/cluster/class_archive.py), side by side.

Each round starts one 3-broker KRaft cluster with the archive and one without (the order
alternates), and times, for each:

- **ready**: from the first container to every broker registered (KafkaCluster's `ready_s`);
- **restart**: one broker SIGKILLed under a light produce load; once the controller has taken it
  out of the ISRs (its session timed out), it is started again, and timed until every broker's
  metadata shows every replica in sync again (what a heal waits for after a kill).

    python bench/bench_class_archive.py                 # 3 rounds, Kafka 4.4.0
    python bench/bench_class_archive.py --rounds 5 --kafka-version 3.9.2

The archive is built first if it is missing (its build time is printed). The machine's load
average is printed before and after: compare the two columns of one run, not figures of two runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOPIC, PARTITIONS = "bench", 8
ISR_BOUND_S = 180.0


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def mapped(node) -> bool:
    """Whether the node's running JVM has the archive mapped (its /proc maps name it; the JDK's own
    default archive, lib/server/classes.jsa, is mapped either way)."""
    from harness.cluster.broker_config import KAFKA_LIBS
    from harness.cluster.node import archive_at

    pid = node.pid()
    code, out = node.exec(f"grep -c '{archive_at(KAFKA_LIBS)}' /proc/{pid}/maps") if pid else (1, "0")
    return code == 0 and int(out.strip() or 0) > 0


def full_isr(cluster) -> bool:
    try:
        views = cluster.broker_views()
    except Exception:  # noqa: BLE001 - a broker still starting answers nothing yet
        return False
    everyone = sorted(b.node_id for b in cluster.brokers)
    if sorted(views) != everyone:
        return False
    return all(set(p["replicas"]) <= set(p["isr"]) for v in views.values()
               for parts in v.topics.values() for p in parts.values()) and all(list(v.brokers) == everyone for v in views.values())


def produce_until(cluster, stop: threading.Event) -> None:
    """A light load (acks=all, ~200 records/s) so that the restarted broker has a log to catch up on."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all", "linger.ms": 5})
    i = 0
    while not stop.is_set():
        producer.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS)
        producer.poll(0)
        i += 1
        time.sleep(0.005)
    producer.flush(10)


def one(version: str, archive: bool) -> dict[str, float | bool]:
    from harness.cluster import KafkaCluster

    os.environ["KAFKA_HARNESS_CLASS_ARCHIVE"] = "1" if archive else "0"
    with KafkaCluster(brokers=3, kafka_version=version) as cluster:
        ready = cluster.timings["ready_s"]
        uses = all(mapped(b) for b in cluster.brokers)
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        stop = threading.Event()
        feeder = threading.Thread(target=produce_until, args=(cluster, stop), daemon=True)
        feeder.start()
        time.sleep(5)
        victim = cluster.brokers[-1]
        victim.kill_process()
        fenced = time.monotonic()
        while full_isr(cluster) and time.monotonic() - fenced < 60:
            time.sleep(0.2)  # the controller fences it after broker.session.timeout.ms (9 s)
        began = time.monotonic()
        victim.start_process()
        while not full_isr(cluster):
            if time.monotonic() - began > ISR_BOUND_S:
                break
            time.sleep(0.2)
        restart = time.monotonic() - began
        uses = uses and mapped(victim)
        stop.set()
        feeder.join(15)
    return {"ready": ready, "restart": restart, "mapped": uses}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kafka-version", default="4.4.0")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    from harness.cluster import class_archive
    from harness.provision.bootstrap import prepare

    prepared = prepare(args.kafka_version)
    began = time.monotonic()
    built = class_archive.ensure(prepared.kafka, prepared.image)
    print(f"archive: {built} ({time.monotonic() - began:.1f} s to ensure)", flush=True)
    if built is None:
        print("no archive could be built: nothing to compare", file=sys.stderr)
        return 2
    print(f"before: {load()}", flush=True)
    samples: dict[bool, list[dict]] = {True: [], False: []}
    for r in range(args.rounds):
        for archive in ((True, False) if r % 2 == 0 else (False, True)):
            s = one(args.kafka_version, archive)
            samples[archive].append(s)
            print(f"round {r + 1} {'with   ' if archive else 'without'}: ready {s['ready']:5.1f} s  restart to full ISR "
                  f"{s['restart']:5.1f} s  archive mapped: {s['mapped']}", flush=True)
    print(f"after: {load()}")
    print("\n| Kafka " + args.kafka_version + " | ready, median | restart to full ISR, median | archive mapped |")
    print("|---|---:|---:|:---:|")
    for archive in (True, False):
        rows = samples[archive]
        print(f"| {'with the archive' if archive else 'without'} | {statistics.median(r['ready'] for r in rows):.1f} s "
              f"| {statistics.median(r['restart'] for r in rows):.1f} s | {'all' if all(r['mapped'] for r in rows) else 'NOT all' if archive else '-'} |")
    ok = all(r["mapped"] for r in samples[True]) and not any(r["mapped"] for r in samples[False])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
