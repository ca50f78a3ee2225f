"""Recorded sends/s with the Java driver against a bare Java producer loop, on one cluster, in one run.

Three legs, one after another against the same 3-broker cluster and topic settings (profile
`safe`: acks=all, idempotence, RF 3, min.insync.replicas 2), each sending as fast as it can for
SECONDS and counting acknowledged records until the last outcome is in:
  bare:        a Java producer loop in the worker jar (`Worker --bare`): no history, no pipe;
  java:        the harness's recorded producer on the Java driver as the queue workload runs it
               (workloads/loops.py Feed): the loop in the JVM, each send's invoke and acknowledgement
               a packed row handed to Python's recorder by the thousand (ProducerClient.feed);
  java-per-send: the same recorded producer driven send by send from Python (each send a request
               line to the JVM and a reply line back), the path before the feed;
  librdkafka:  the recorded producer on the librdkafka driver, send by send, for comparison;
  java-before: the java leg on an earlier build of the worker (--java-before DIR), so that a change
               to the feed is measured against its predecessor side by side.
Prints each rate and java/bare (issue 35's target: >= 85 %).

    .venv/bin/python bench/bench_java_client.py [--seconds 15] [--java-before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.cluster import KafkaCluster  # noqa: E402
from harness.history import Recorder  # noqa: E402
from harness.provision.bootstrap import prepare  # noqa: E402
from harness.provision.java_client import JavaClient, ensure_java_client  # noqa: E402
from workloads import drivers  # noqa: E402
from workloads.clients import ProducerClient  # noqa: E402
from workloads.profiles import get_profile  # noqa: E402

PARTITIONS = 8


def settings() -> dict[str, str]:
    conf = {"linger.ms": 5, **get_profile("safe").producer_config()}
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in conf.items()}


def bare(bootstrap: str, topic: str, seconds: float) -> dict:
    client = ensure_java_client()
    args = [f"{k}={v}" for k, v in settings().items()]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(client.command("-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
                          + ["--bare", bootstrap, topic, str(PARTITIONS), str(seconds), *args],
                          capture_output=True, text=True, timeout=seconds + 300)
    if proc.returncode != 0:
        raise SystemExit(f"bare loop failed: {proc.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {**json.loads(proc.stdout.strip().splitlines()[-1]),
            "cpu": {"jvm": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, "python": 0.0}}


def _cpu_s(pid: int) -> float:
    """A live process's CPU seconds (user + system) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def recorded(leg: str, bootstrap: str, topic: str, seconds: float, folder: Path, before: Path | None = None) -> dict:
    driver = drivers.make("librdkafka" if leg == "librdkafka" else "java")
    if leg == "java-before":
        driver.client = JavaClient(driver.client.version, before)  # type: ignore[attr-defined]
    history = folder / f"{topic}.jsonl"  # the topic names the leg and its round
    py0, jvm, py = _self_cpu_s(), 0.0, 0.0
    try:
        with Recorder(history) as recorder:
            client = ProducerClient(0, recorder, bootstrap, topic, get_profile("safe"), driver=driver).open()
            began = time.monotonic()
            if leg in ("java", "java-before"):  # the queue workload's path: as fast as the client takes them (rate 0)
                client.feed(0, 1, PARTITIONS, 0.0, 1, 0)
                time.sleep(seconds)
                v = client.feed_stop()
            else:
                end = began + seconds
                v = 0
                while time.monotonic() < end:
                    for _ in range(100):  # the clock read once per 100 sends
                        client.send(v % PARTITIONS, v)
                        v += 1
            client.close(timeout_s=120)
            elapsed = time.monotonic() - began
            py = _self_cpu_s() - py0  # the driving thread, the reader and the recorder's flusher (not the
            # history.parquet written at close, after the leg)
            if leg != "librdkafka":  # the worker JVM's CPU, read before the driver ends it
                jvm = _cpu_s(driver.worker().proc.pid)  # type: ignore[attr-defined]
    finally:
        driver.close()
    # Counted line by line: millions of events as dicts would take gigabytes (a first run of the
    # feed leg, 5.1M events read twice, was killed by the kernel at 18 GB). The feed's history is
    # validated whole by tests/test_java_driver.py; here every invoke must have its completion.
    counts = {b"invoke": 0, b"ok": 0, b"other": 0}
    with open(history, "rb") as fh:
        for line in fh:
            if b'"f":"send"' not in line:
                continue
            kind = line[line.index(b'"type":"') + 8:].split(b'"', 1)[0]
            counts[kind if kind in counts else b"other"] += 1
    if counts[b"invoke"] != counts[b"ok"] + counts[b"other"]:
        raise SystemExit(f"{leg}: {counts[b'invoke']} invokes but {counts[b'ok']} ok and {counts[b'other']} other events")
    return {"sent": v, "acked": counts[b"ok"], "seconds": elapsed, "events": sum(counts.values()),
            "cpu": {"jvm": jvm, "python": py}}


LEGS = ("bare", "java", "java-before", "java-per-send", "librdkafka")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of every leg, the order reversed each round (the first leg on a fresh cluster "
                             "ran slower in one run: a single order favours the later legs)")
    parser.add_argument("--warm-up", type=float, default=20.0,
                        help="seconds of an uncounted bare leg first: a fresh cluster's speed drifts by 4x in its "
                             "first minutes (JIT, page cache; 155,000 to 604,000 bare sends/s in one run)")
    parser.add_argument("--legs", default=",".join(LEGS),
                        help=f"comma-separated legs to run (default all: {','.join(LEGS)}); bare and java give the target's ratio")
    parser.add_argument("--java-before", type=Path, metavar="DIR",
                        help="a build of earlier worker sources (a folder with manifest.json, e.g. "
                             "~/.cache/kafka-harness/java-client/4.4.0/<hash>): adds the java-before leg")
    args = parser.parse_args()
    if args.java_before is not None:
        if not (args.java_before / "manifest.json").is_file() or not (args.java_before / "worker.jar").is_file():
            parser.error(f"--java-before {args.java_before}: not a worker build (no manifest.json and worker.jar); "
                         "give a folder under ~/.cache/kafka-harness/java-client/<version>/")
        args.legs += ",java-before"
    elif "java-before" in args.legs.split(","):
        parser.error("--legs java-before needs --java-before DIR")
    legs = tuple(leg for leg in LEGS if leg in args.legs.split(","))
    unknown = set(args.legs.split(",")) - set(LEGS)
    if unknown or "bare" not in legs:
        parser.error(f"--legs: unknown {sorted(unknown)}" if unknown else "--legs must include bare (the ratios' base)")
    prepare()
    folder = Path(tempfile.mkdtemp(prefix="bench-java-client-"))
    rates: dict[str, list[float]] = {leg: [] for leg in legs}
    with KafkaCluster(brokers=3) as cluster:
        bootstrap = cluster.bootstrap_servers()
        if args.warm_up > 0:
            cluster.create_topic("bench-warm-up", partitions=PARTITIONS, replication_factor=3,
                                 config=get_profile("safe").topic_config())
            r = bare(bootstrap, "bench-warm-up", args.warm_up)
            print(f"warm-up (not counted): {r['acked'] / r['seconds']:,.0f} bare sends/s", flush=True)
        for round_ in range(args.rounds):
            for leg in (legs if round_ % 2 == 0 else tuple(reversed(legs))):
                topic = f"bench-{leg}-{round_}"
                cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3,
                                     config=get_profile("safe").topic_config())
                r = bare(bootstrap, topic, args.seconds) if leg == "bare" else \
                    recorded(leg, bootstrap, topic, args.seconds, folder, args.java_before)
                rates[leg].append(r["acked"] / r["seconds"])
                print(f"round {round_ + 1} {leg:>13}: {r['acked']:>9,} acknowledged of {r['sent']:>9,} in "
                      f"{r['seconds']:6.1f} s = {rates[leg][-1]:>9,.0f} sends/s; CPU s per million acknowledged: "
                      f"JVM {r['cpu']['jvm'] / r['acked'] * 1e6:5.2f}, Python {r['cpu']['python'] / r['acked'] * 1e6:5.2f}"
                      f"  (load {os.getloadavg()[0]:.1f})", flush=True)
    for leg in legs[1:]:  # each round's legs run back to back: their ratio is the least drift-prone figure
        ratios = sorted(r / b for r, b in zip(rates[leg], rates["bare"]))
        print(f"{leg} / bare per round: median {statistics.median(ratios):.1%}, "
              f"from {ratios[0]:.1%} to {ratios[-1]:.1%} over {len(ratios)} rounds")
    if "java-before" in legs and "java" in legs:
        ratios = sorted(r / b for r, b in zip(rates["java"], rates["java-before"]))
        print(f"java / java-before per round: median {statistics.median(ratios):.1%}, "
              f"from {ratios[0]:.1%} to {ratios[-1]:.1%} over {len(ratios)} rounds")
    mean = {leg: sum(v) / len(v) for leg, v in rates.items()}
    print(f"means over {args.rounds} rounds: " + ", ".join(f"{leg} {mean[leg]:,.0f}/s" for leg in legs))
    target = {"java": "java recorded (feed) / bare java: {:.1%} (target >= 85 %)", "java-per-send": "java per send / bare java: {:.1%}",
              "librdkafka": "librdkafka recorded / bare java: {:.1%}",
              "java-before": "java before (--java-before) / bare java: {:.1%}"}
    print("; ".join(text.format(mean[leg] / mean["bare"]) for leg, text in target.items() if leg in mean))
    print(f"histories in {folder}")


if __name__ == "__main__":
    main()
