"""Recorded sends/s with the Java driver against a bare Java producer loop, on one cluster, in one run.

Three legs, one after another against the same 3-broker cluster and topic settings (profile
`safe`: acks=all, idempotence, RF 3, min.insync.replicas 2), each sending as fast as it can for
SECONDS and counting acknowledged records until the last outcome is in:
  bare:        a Java producer loop in the worker jar (`Worker --bare`): no history, no pipe;
  java:        the harness's recorded producer (workloads/clients.py) on the Java driver: each send
               an invoke line, one request line to the JVM, one reply line back, a completion line;
  librdkafka:  the same recorded producer on the librdkafka driver, for comparison.
Prints each rate and java/bare (issue 35's target: >= 85 %).

    .venv/bin/python bench/bench_java_client.py [--seconds 15]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.cluster import KafkaCluster  # noqa: E402
from harness.history import Recorder, read_history  # noqa: E402
from harness.provision.bootstrap import prepare  # noqa: E402
from harness.provision.java_client import ensure_java_client  # noqa: E402
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
    proc = subprocess.run(client.command("-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
                          + ["--bare", bootstrap, topic, str(PARTITIONS), str(seconds), *args],
                          capture_output=True, text=True, timeout=seconds + 300)
    if proc.returncode != 0:
        raise SystemExit(f"bare loop failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def recorded(driver_name: str, bootstrap: str, topic: str, seconds: float, folder: Path) -> dict:
    driver = drivers.make(driver_name)
    try:
        with Recorder(folder / f"{driver_name}.jsonl") as recorder:
            client = ProducerClient(0, recorder, bootstrap, topic, get_profile("safe"), driver=driver).open()
            began = time.monotonic()
            end = began + seconds
            v = 0
            while time.monotonic() < end:
                for _ in range(100):  # the clock read once per 100 sends
                    client.send(v % PARTITIONS, v)
                    v += 1
            client.close(timeout_s=120)
            elapsed = time.monotonic() - began
    finally:
        driver.close()
    acked = sum(1 for e in read_history(folder / f"{driver_name}.jsonl") if e["f"] == "send" and e["type"] == "ok")
    return {"sent": v, "acked": acked, "seconds": elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    prepare()
    folder = Path(tempfile.mkdtemp(prefix="bench-java-client-"))
    results = {}
    with KafkaCluster(brokers=3) as cluster:
        bootstrap = cluster.bootstrap_servers()
        for leg in ("bare", "java", "librdkafka"):
            topic = f"bench-{leg}"
            cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3,
                                 config=get_profile("safe").topic_config())
            results[leg] = bare(bootstrap, topic, args.seconds) if leg == "bare" else \
                recorded(leg, bootstrap, topic, args.seconds, folder)
            r = results[leg]
            r["rate"] = r["acked"] / r["seconds"]
            print(f"{leg:>11}: {r['acked']:>9,} acknowledged of {r['sent']:>9,} in {r['seconds']:6.1f} s = "
                  f"{r['rate']:>9,.0f} sends/s", flush=True)
    ratio = results["java"]["rate"] / results["bare"]["rate"]
    print(f"java recorded / bare java: {ratio:.1%} (target >= 85 %); librdkafka recorded / bare java: "
          f"{results['librdkafka']['rate'] / results['bare']['rate']:.1%}; load average {os.getloadavg()[0]:.1f}")
    print(f"histories in {folder}")


if __name__ == "__main__":
    main()
