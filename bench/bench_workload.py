"""Recorded sends per second vs a bare confluent-kafka loop, against 3 real brokers.

    KAFKA_HARNESS_CACHE=... python bench/bench_workload.py [--seconds 4] [--rounds 8] [--warm-up 20] [--no-op-client]

Both loops use the `safe` profile's producer settings (acks=all, idempotence),
linger.ms 5, one producer, the same partition choice and the same value
encoding, and both count a send only when its delivery report arrives. The
recorded loop is the queue workload's own `ProducerClient` writing every
invoke and completion into a real history file.

On 2 shared cores, the brokers' speed drifts by a factor of two within a minute
(JIT, page cache, log rolls), more than the recorder costs. So the bench warms the
brokers up first, then runs many short rounds, each a bare slice and a recorded
slice back to back, alternating which goes first; a round's ratio compares
two slices a few seconds apart. The figure to read is the median of the rounds'
ratios, with their spread; the ratio of the totals is printed too. Targets:
>= 10,000 recorded sends/s and >= 85 % of the bare loop.
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from harness.cluster import KafkaCluster
from harness.history import Recorder
from workloads.clients import ProducerClient
from workloads.profiles import get_profile

TOPIC, PARTITIONS = "bench", 8


def bare_loop(bootstrap: str, seconds: float, seed: int) -> tuple[float, float]:
    """(acknowledged sends per second, CPU microseconds of this process per send)."""
    profile = get_profile("safe")
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **profile.producer_config(),
                         "logger": logging.getLogger("librdkafka.producer")})
    acked = [0]

    def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            int(msg.value())  # the recorded loop decodes the value too
            acked[0] += 1

    rng = random.Random(seed)
    began, cpu, n = time.monotonic(), time.process_time(), 0
    end = began + seconds
    while time.monotonic() < end:
        for _ in range(1000):
            while True:
                try:
                    producer.produce(TOPIC, str(n).encode(), partition=rng.randrange(PARTITIONS), on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
            n += 1
    producer.flush(60)
    return acked[0] / (time.monotonic() - began), (time.process_time() - cpu) / max(1, acked[0]) * 1e6


def _client_loop(client: ProducerClient, seconds: float, seed: int, finish=lambda: None) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Drive the workload's client as the bare loop drives its producer; (elapsed s, CPU s) up to
    `finish()` after the client has closed."""
    rng = random.Random(seed)
    began, cpu, n = time.monotonic(), time.process_time(), 0
    end = began + seconds
    while time.monotonic() < end:
        for _ in range(1000):
            client.send(rng.randrange(PARTITIONS), n)
            n += 1
    client.close(60)
    finish()
    return time.monotonic() - began, time.process_time() - cpu


def recorded_loop(bootstrap: str, seconds: float, seed: int, history: Path) -> tuple[float, float]:
    recorder = Recorder(history)
    client = ProducerClient(0, recorder, bootstrap, TOPIC, get_profile("safe")).open()
    # the JSONL is what is written during a run; parquet comes after
    elapsed, cpu = _client_loop(client, seconds, seed, lambda: recorder.close(parquet=False))
    ok = recorder.counts["ok"]
    return ok / elapsed, cpu / max(1, ok) * 1e6


class _NoRecorder:
    """The recorder's interface doing nothing: isolates the client's own cost from the recorder's."""

    def __init__(self) -> None:
        self.ok = 0

    def send_invoke(self, *args: object) -> None:
        pass

    def send_ok(self, *args: object) -> None:
        self.ok += 1

    def send(self, *args: object) -> None:
        pass


def no_op_client_loop(bootstrap: str, seconds: float, seed: int) -> tuple[float, float]:
    """The recorded loop's client with a recorder that records nothing."""
    recorder = _NoRecorder()
    client = ProducerClient(0, recorder, bootstrap, TOPIC, get_profile("safe")).open()  # type: ignore[arg-type]
    elapsed, cpu = _client_loop(client, seconds, seed)
    return recorder.ok / elapsed, cpu / max(1, recorder.ok) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4.0, help="length of each slice (default 4)")
    parser.add_argument("--rounds", type=int, default=8, help="bare+recorded pairs (default 8)")
    parser.add_argument("--warm-up", type=float, default=20.0, help="seconds of both loops before measuring (default 20)")
    parser.add_argument("--no-op-client", action="store_true",
                        help="also run the client with a recorder that records nothing, to split the client's cost from the recorder's")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("librdkafka").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="bench-workload-") as tmp, KafkaCluster(brokers=3) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"})
        bootstrap = cluster.bootstrap_servers()
        # Warm-up: producer ids, metadata, and the brokers' JIT, which keeps speeding them up for a while.
        bare_loop(bootstrap, args.warm_up / 2, 0)
        recorded_loop(bootstrap, args.warm_up / 2, 0, Path(tmp) / "history-warm-up.jsonl")
        bare, recorded, no_op = [], [], []
        for r in range(args.rounds):
            # Alternate which loop goes first: the brokers speed up over a run, which would favour
            # whichever loop always ran second.
            order = ("bare", "recorded") if r % 2 == 0 else ("recorded", "bare")
            for which in order:
                if which == "bare":
                    bare.append(bare_loop(bootstrap, args.seconds, r))
                else:
                    recorded.append(recorded_loop(bootstrap, args.seconds, r, Path(tmp) / f"history-{r}.jsonl"))
            if args.no_op_client:
                no_op.append(no_op_client_loop(bootstrap, args.seconds, r))
                print(f"round {r + 1}: client with a no-op recorder {no_op[-1][0]:,.0f} sends/s ({no_op[-1][1]:.1f} us CPU/send)")
            print(f"round {r + 1} ({order[0]} first): bare {bare[-1][0]:,.0f} sends/s ({bare[-1][1]:.1f} us CPU/send), "
                  f"recorded {recorded[-1][0]:,.0f} sends/s ({recorded[-1][1]:.1f} us CPU/send), "
                  f"ratio {recorded[-1][0] / bare[-1][0]:.0%}", flush=True)
    b, rec = (sum(x[0] for x in bare) / len(bare)), (sum(x[0] for x in recorded) / len(recorded))
    b_cpu, rec_cpu = (sum(x[1] for x in bare) / len(bare)), (sum(x[1] for x in recorded) / len(recorded))
    print(f"bare confluent-kafka loop: {b:,.0f} acknowledged sends/s, {b_cpu:.1f} us CPU per send")
    print(f"recorded workload:         {rec:,.0f} acknowledged sends/s recorded (target >= 10,000), {rec_cpu:.1f} us CPU per send")
    ratios = [x[0] / y[0] for x, y in zip(recorded, bare)]
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    print(f"ratio per round:           median {statistics.median(ratios):.0%} of the bare loop (target >= 85 %), "
          f"quartiles {quartiles[0]:.0%}-{quartiles[2]:.0%}, range {min(ratios):.0%}-{max(ratios):.0%}")
    print(f"ratio of the totals:       {rec / b:.0%}")
    if no_op:
        print(f"no-op recorder client:     median {statistics.median(x[0] for x in no_op):,.0f} sends/s "
              f"({statistics.median(x[0] / y[0] for x, y in zip(no_op, bare)):.0%} of bare per round), "
              f"recorded median {statistics.median(x[0] for x in recorded):,.0f}, bare median {statistics.median(x[0] for x in bare):,.0f}")
    print("note: 2 shared cores, 3 brokers on the same machine; figures vary with other load")


if __name__ == "__main__":
    main()
