"""Recorded sends per second with the brokers' data on lossyfs vs on plain directories, side by side.

    python bench/bench_lossyfs_kafka.py [--seconds 4] [--rounds 6] [--warm-up 10] [--flush-every-message | --fsync-cost]

Two 3-broker clusters run at once: one as every run has it, one with `lossy_data=True` (each data
directory a lossyfs mount, as under `--nemesis power`). Each round drives the queue workload's
recorded producer loop (bench/bench_workload.py: `safe` settings, acks=all, 8 partitions, RF 3,
min.insync.replicas 2) for a slice against each cluster, alternating which goes first, so that
both see the same machine load. The figure is the median of the rounds' ratios lossy/plain
(issue 18's target: >= 50 %). `--flush-every-message` sets log.flush.interval.messages=1 on both
(the `fsync` profile's setting, broker-wide) on both. `--fsync-cost` compares instead two plain
clusters, with and without log.flush.interval.messages=1: what the `fsync` profile costs.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_workload import PARTITIONS, TOPIC, recorded_loop  # noqa: E402

from harness.cluster import KafkaCluster  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--warm-up", type=float, default=10.0)
    parser.add_argument("--flush-every-message", action="store_true", help="log.flush.interval.messages=1 on both clusters")
    parser.add_argument("--fsync-cost", action="store_true", help="plain vs plain with log.flush.interval.messages=1")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("librdkafka").setLevel(logging.CRITICAL)
    config = {"log.flush.interval.messages": 1} if args.flush_every_message else {}
    other = {"broker_config": {"log.flush.interval.messages": 1}} if args.fsync_cost else {"broker_config": config, "lossy_data": True}
    with tempfile.TemporaryDirectory(prefix="bench-lossyfs-kafka-") as tmp, \
            KafkaCluster(brokers=3, broker_config=config) as plain, \
            KafkaCluster(brokers=3, **other) as lossy:  # type: ignore[arg-type]
        second = "flush-each" if args.fsync_cost else "lossyfs"
        clusters = {"plain": plain, second: lossy}
        for name, cluster in clusters.items():
            cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"})
            recorded_loop(cluster.bootstrap_servers(), args.warm_up, 0, Path(tmp) / f"warm-{name}.jsonl")
        results: dict[str, list[float]] = {"plain": [], second: []}
        for r in range(args.rounds):
            order = ["plain", second] if r % 2 == 0 else [second, "plain"]
            for name in order:
                rate, _ = recorded_loop(clusters[name].bootstrap_servers(), args.seconds, r, Path(tmp) / f"h-{name}-{r}.jsonl")
                results[name].append(rate)
            print(f"round {r + 1} ({order[0]} first): plain {results['plain'][-1]:,.0f} sends/s, "
                  f"{second} {results[second][-1]:,.0f} sends/s, ratio {results[second][-1] / results['plain'][-1]:.0%}", flush=True)
        stats = {n: d.stats() for n, d in lossy.disks.items()}
    ratios = [x / y for x, y in zip(results[second], results["plain"])]
    print(f"plain data directories: median {statistics.median(results['plain']):,.0f} recorded sends/s")
    print(f"{second + ':':<23} median {statistics.median(results[second]):,.0f} recorded sends/s")
    print(f"ratio per round: median {statistics.median(ratios):.0%}{'' if args.fsync_cost else ' (target >= 50 %)'}, "
          f"range {min(ratios):.0%}-{max(ratios):.0%}{' with log.flush.interval.messages=1' if config else ''}")
    if args.fsync_cost:
        return
    print("lossyfs per broker (dirty = what a cut would take now): "
          + "; ".join(f"{n}: dirty {s['dirty_bytes']:,} B in {s['dirty_files']} files, {s['fsyncs']} fsyncs" for n, s in stats.items()))


if __name__ == "__main__":
    main()
