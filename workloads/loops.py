"""The client loops the workloads share: the queue's producers (`Feed`, also the eos workload's
feeders) and the queue's consumers (`Readers`, also the txn workload's, with read_committed).

Each is given what it needs (a client factory, the history, the settings, a stop event, the
workload's threads) rather than reaching into a workload, so a workload composes them instead of
inheriting them.

Schedule: producer w sends `rate / W` values a second; its n-th value is `n * W + w` (unique in the
run) and its partition comes from `Random(seed, w)`, so a seed fixes which value goes where. A
driver that runs the loop itself (the Java client, in its JVM: `Feed._fed`) draws the partitions
from its own seeded stream: for a given client library, a seed still fixes where each value goes.
Consumers poll continuously in batches whose size also comes from the seed.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Callable

from harness.history import Recorder
from harness.history.recorder import RecorderClosed
from workloads.clients import ConsumerClient, ProducerClient
from workloads.pacing import Pacer
from workloads.threads import ClientThreads

log = logging.getLogger(__name__)

MAX_BURST = 2000  # sends between checks of the stop flag at very high rates
CRASH_CLOSE_S = 35.0  # as the end of a run waits for a producer's last delivery reports


def share(c: int, consumers: int, partitions: int) -> list[int]:
    """Consumer c's partitions when `consumers` split `partitions` (all of them if it gets none)."""
    return [p for p in range(partitions) if p % consumers == c] or list(range(partitions))


def poll_until(client: ConsumerClient, rng: random.Random, stop: threading.Event) -> None:
    while not stop.is_set():
        client.poll(max_records=rng.randint(100, 500), timeout_s=0.1)


class Feed:
    """`producers` paced producers writing unique values to `partitions`; `loop(w)` is producer w's
    thread. With `crash_clients_s`, each producer is abandoned after a random life (Jepsen's
    --crash-clients) and a fresh one takes over."""

    def __init__(self, new_producer: Callable[[], ProducerClient], recorder: Recorder, threads: ClientThreads,
                 stop: threading.Event, *, partitions: int, producers: int, rate: float, seed: int,
                 crash_clients_s: float | None = None, crash_close_s: float = CRASH_CLOSE_S) -> None:
        self.new_producer, self.recorder, self.threads, self.stop = new_producer, recorder, threads, stop
        self.partitions, self.producers, self.rate, self.seed = partitions, producers, rate, seed
        self.crash_clients_s, self.crash_close_s = crash_clients_s, crash_close_s

    def loop(self, w: int) -> None:
        rng = random.Random(self.seed * 1_000_003 + w)
        pacer = Pacer(self.rate / self.producers)
        client, n = self.new_producer(), 0
        self.threads.opened()
        if client.can_feed() and not self.crash_clients_s:
            return self._fed(w, client)
        crashes = random.Random(self.seed * 1_000_003 + 20_000 + w)  # apart from the values' stream
        crash_at = self._next_crash(crashes)
        pacer.begin()
        try:
            while not self.stop.is_set():
                if time.monotonic() >= crash_at:
                    client = self._crash(client)
                    crash_at = self._next_crash(crashes)
                due = pacer.due(n)
                if due <= 0:
                    client.poll(min(0.005, pacer.gap_s))  # serve delivery callbacks while waiting
                    continue
                for _ in range(min(due, MAX_BURST)):
                    client.send(rng.randrange(self.partitions), n * self.producers + w)
                    n += 1
                    if client.fatal:
                        client = self._replace(client)
                        break
        finally:
            client.close()

    def _fed(self, w: int, client: ProducerClient) -> None:
        """Producer w's loop run by its driver (the Java client's JVM: ProducerClient.feed): the
        same values, pace and history, its partitions drawn from that driver's own seeded stream.
        A fatal error stops it, and a fresh producer goes on from the next value, as below."""
        n = 0
        try:
            while True:
                client.feed(w, self.producers, self.partitions, self.rate / self.producers, self.seed, n)
                while not self.stop.wait(0.05) and not client.fatal:
                    pass
                n = client.feed_stop()
                if self.stop.is_set():
                    return
                client = self._replace(client)
        finally:
            client.close()

    def _replace(self, client: ProducerClient) -> ProducerClient:
        self.recorder.record(client.process, "info", "crash", {"reason": client.fatal})
        client.close(timeout_s=5)
        return self.new_producer()

    def _next_crash(self, rng: random.Random) -> float:
        """When this producer is crashed next (never without crash_clients_s): uniform over
        (0, 2 × crash_clients_s], so a producer lives crash_clients_s on average (Jepsen's
        --crash-client-interval staggers its crashes the same way)."""
        if not self.crash_clients_s:
            return float("inf")
        return time.monotonic() + rng.uniform(0.0, 2 * self.crash_clients_s)

    def _crash(self, client: ProducerClient) -> ProducerClient:
        """Jepsen's client crash (--crash-clients): leave the producer and go on with a fresh one.
        Why: every producer here sends to every partition all the time,
        so once a leader stops answering (an acks=all request waiting on a cut-off follower) each of
        them has a request pending there, and Kafka answers a connection's requests in order, so
        none of them learns of a new leader until the old one answers. In 7 of 7 cut transfers on
        1.1.1 the new leader got no record at all before it was killed (docs/detection.md).
        A fresh producer asks for metadata first and writes to the leader of the moment.

        The old producer is closed on a background thread, so that the new one starts at once; its
        sends resolve as they would (the workload's stop waits for it), and those still unresolved
        after crash_close_s are purged (`info`). Not purged at once: a purge of an idempotent producer's
        in-flight sends made librdkafka bump its epoch and send one of them again, and the broker
        kept both copies (1.1.1, run 20261124T215508-ffb3c8: value 39856 at offset 4332 as producer
        3003 epoch 0 sequence 97, and at 4333 as epoch 1 sequence 0, 63 ms after the purge). A
        process that dies sends nothing more; that duplicate was the harness's, not Kafka's."""
        self.recorder.record(client.process, "info", "crash",
                             {"reason": f"crash-clients: abandoned after a mean life of {self.crash_clients_s:g} s"})
        self.threads.background(f"closer-{client.process}", self._close_quietly, client)
        return self.new_producer()

    def _close_quietly(self, client: ProducerClient) -> None:
        try:
            client.close(timeout_s=self.crash_close_s,
                         why=f"unresolved {self.crash_close_s:g} s after its producer crashed (crash-clients)")
        except RecorderClosed:  # the run ended first: its unresolved sends stay unknown
            log.warning("crashed producer %s closed after the history: its unresolved sends stay unknown", client.process)


class Readers:
    """`consumers` recorded consumers polling until `stop`; `loop(c)` is consumer c's thread. They
    `assign` their share of the partitions (seek: committed, which without commits falls back to
    auto.offset.reset) or, with `subscribe`, join the group `group_id`."""

    def __init__(self, new_consumer: Callable[[bool], ConsumerClient], threads: ClientThreads, stop: threading.Event, *,
                 partitions: int, consumers: int, seed: int, subscribe: bool, auto_commit: bool) -> None:
        self.new_consumer, self.threads, self.stop = new_consumer, threads, stop
        self.partitions, self.consumers, self.seed = partitions, consumers, seed
        self.subscribe, self.auto_commit = subscribe, auto_commit

    def loop(self, c: int) -> None:
        rng = random.Random(self.seed * 1_000_003 + 10_000 + c)
        client = self.new_consumer(self.subscribe)
        self.threads.opened()
        try:
            if self.subscribe:
                client.subscribe(list(range(self.partitions)))
            else:
                # Without auto-commit nothing is ever committed, so read from the beginning rather than wait
                # on the group coordinator for offsets that cannot exist.
                client.assign(share(c, self.consumers, self.partitions), "committed" if self.auto_commit else "beginning")
            poll_until(client, rng, self.stop)
        finally:
            client.close()
