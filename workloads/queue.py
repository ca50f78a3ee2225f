"""The queue workload: W producers send unique integers to P partitions, C consumers poll them.

Schedule: each producer w sends `rate / W` values per second; its n-th value
is `n * W + w` (unique in the run) and its partition comes from
`Random(seed, w)`, so a seed fixes which value goes where. Consumers poll
continuously in batches whose size also comes from the seed. Consumers
`assign` their share of the partitions by default (seek: committed, which
without commits falls back to auto.offset.reset) or `subscribe` to a group.

After the faults end comes the **final drain** (`drain`): every consumer, as
a fresh client, assigns every partition from the beginning and polls until
it has read to each partition's high watermark, or until a timeout, which is
recorded. Only then is a record that nobody read really missing.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any



from harness.errors import HarnessError
from harness.history import Recorder
from harness.history.recorder import RecorderClosed
from workloads.clients import ConsumerClient, ProcessIds, ProducerClient
from workloads.drain import DrainResult, drain_one, probe_high_watermarks
from workloads.pacing import Pacer
from workloads.profiles import Profile

log = logging.getLogger(__name__)

MAX_BURST = 2000  # sends between checks of the stop flag at very high rates


class QueueWorkload:
    name = "queue"

    def __init__(
        self,
        recorder: Recorder,
        bootstrap: str,
        topic: str,
        profile: Profile,
        *,
        partitions: int = 8,
        producers: int = 2,
        consumers: int = 2,
        rate: float = 1000.0,
        seed: int = 0,
        subscribe: bool = False,
        group_id: str = "queue",
        crash_clients_s: float | None = None,
    ) -> None:
        self.recorder, self.bootstrap, self.topic, self.profile = recorder, bootstrap, topic, profile
        self.partitions, self.producers, self.consumers = partitions, producers, consumers
        self.rate, self.seed, self.subscribe, self.group_id = rate, seed, subscribe, group_id
        self.process_ids = ProcessIds()
        self._stop = threading.Event()
        self._feed_stop = self._stop  # what stops the producers (the eos workload stops them first)
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []  # unexpected exceptions in worker threads
        self._ready: list[threading.Event] = []
        self.crash_clients_s = crash_clients_s
        self._closers: list[threading.Thread] = []  # crashed producers, closing in the background

    @property
    def topics(self) -> tuple[str, ...]:
        """Every topic this workload needs, its own first (workloads/registry.py)."""
        return (self.topic,)

    # --- the main phase ---------------------------------------------------------------
    def start(self, ready_timeout_s: float = 120.0) -> None:
        """Start every client thread; return once each has opened its client (so the time limit
        measures operations, not the transaction coordinator's start-up) or after `ready_timeout_s`."""
        for w in range(self.producers):
            self._spawn(f"producer-{w}", self._producer_loop, w)
        for c in range(self.consumers):
            self._spawn(f"consumer-{c}", self._consumer_loop, c)
        deadline = time.monotonic() + ready_timeout_s
        for event in self._ready:
            event.wait(max(0.0, deadline - time.monotonic()))
        if self.errors:  # a client that cannot even open means broken settings, not a finding
            self._stop.set()
            raise HarnessError(
                f"{len(self.errors)} client(s) could not start: {'; '.join(self.errors[:3])}",
                hint="fix the client settings named above (profile or workload options); nothing was measured",
            )

    def _opened(self) -> None:
        self._ready[self._thread_index()].set()

    def _thread_index(self) -> int:
        return [t.ident for t in self._threads].index(threading.get_ident())

    def _spawn(self, name: str, target: Any, arg: int) -> None:
        ready = threading.Event()

        def guarded() -> None:
            try:
                target(arg)
            except RecorderClosed:  # the run ended (failed) first: nothing left to record, no traceback
                log.warning("%s stopped: the history was closed before it finished; its unresolved "
                            "operations stay uncompleted (unknown)", name)
            except Exception as exc:  # recorded for the run, never silently lost
                log.exception("%s died", name)
                self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
            finally:
                ready.set()

        self._ready.append(ready)

        thread = threading.Thread(target=guarded, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop issuing operations; producers wait for their delivery reports, consumers close."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(timeout=max(0.1, deadline - time.monotonic()))
        for thread in list(self._closers):
            thread.join(timeout=max(0.1, deadline - time.monotonic()))
        stuck = [t.name for t in self._threads + self._closers if t.is_alive()]
        if stuck:
            self.errors.append(f"threads still running {timeout_s:.0f} s after stop: {stuck}")

    def new_producer(self) -> ProducerClient:
        return ProducerClient(self.process_ids(), self.recorder, self.bootstrap, self.topic, self.profile).open()

    def _producer_loop(self, w: int) -> None:
        rng = random.Random(self.seed * 1_000_003 + w)
        pacer = Pacer(self.rate / self.producers)
        client, n = self.new_producer(), 0
        self._opened()
        crashes = random.Random(self.seed * 1_000_003 + 20_000 + w)  # apart from the values' stream
        crash_at = self._next_crash(crashes)
        pacer.begin()
        try:
            while not self._feed_stop.is_set():
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
        sends resolve as they would (`stop` waits for it), and those still unresolved after
        CRASH_CLOSE_S are purged (`info`). Not purged at once: a purge of an idempotent producer's
        in-flight sends made librdkafka bump its epoch and send one of them again, and the broker
        kept both copies (1.1.1, run 20261124T215508-ffb3c8: value 39856 at offset 4332 as producer
        3003 epoch 0 sequence 97, and at 4333 as epoch 1 sequence 0, 63 ms after the purge). A
        process that dies sends nothing more; that duplicate was the harness's, not Kafka's."""
        self.recorder.record(client.process, "info", "crash",
                             {"reason": f"crash-clients: abandoned after a mean life of {self.crash_clients_s:g} s"})
        closer = threading.Thread(target=self._close_quietly, args=(client,), name=f"closer-{client.process}", daemon=True)
        self._closers.append(closer)
        closer.start()
        return self.new_producer()

    CRASH_CLOSE_S = 35.0  # as the end of a run waits for a producer's last delivery reports

    def _close_quietly(self, client: ProducerClient) -> None:
        try:
            client.close(timeout_s=self.CRASH_CLOSE_S,
                         why=f"unresolved {self.CRASH_CLOSE_S:g} s after its producer crashed (crash-clients)")
        except RecorderClosed:  # the run ended first: its unresolved sends stay unknown
            log.warning("crashed producer %s closed after the history: its unresolved sends stay unknown", client.process)

    def new_consumer(self, group: bool = False) -> ConsumerClient:
        """A fresh consumer; `group` joins the workload's group, otherwise a group of its own (assign, no commits shared)."""
        process = self.process_ids()
        group_id = self.group_id if group else f"{self.group_id}-{process}"
        return ConsumerClient(process, self.recorder, self.bootstrap, self.topic, self.profile, group_id).open()

    def _consumer_loop(self, c: int) -> None:
        rng = random.Random(self.seed * 1_000_003 + 10_000 + c)
        client = self.new_consumer(group=self.subscribe)
        self._opened()
        try:
            if self.subscribe:
                client.subscribe(list(range(self.partitions)))
            else:
                share = [p for p in range(self.partitions) if p % self.consumers == c] or list(range(self.partitions))
                # Without auto-commit nothing is ever committed, so read from the beginning rather than wait
                # on the group coordinator for offsets that cannot exist.
                client.assign(share, "committed" if self.profile.enable_auto_commit else "beginning")
            while not self._stop.is_set():
                client.poll(max_records=rng.randint(100, 500), timeout_s=0.1)
        finally:
            client.close()

    # --- the final drain ------------------------------------------------------------
    def drain(self, timeout_s: float = 60.0) -> DrainResult:
        """Every consumer (at least one) re-reads every partition from the beginning to its high
        watermark. A partition without one (offline: no leader) is left out and reported in
        `undrained`, so the rest is still drained and checked (issue 21)."""
        began = time.monotonic()
        first_index = self.recorder.events_recorded
        high, offline = probe_high_watermarks(self.bootstrap, self.topic, range(self.partitions), f"{self.group_id}-hwm",
                                              timeout_s=timeout_s)
        began_reading = time.monotonic()  # the reads get their own timeout_s after the probe
        results: list[set[int]] = []
        processes: list[int] = []
        lock = threading.Lock()

        def one(_: int) -> None:
            client = self.new_consumer()
            with lock:
                processes.append(client.process)
            try:
                timed_out = drain_one(client, sorted(high), high, began_reading + timeout_s)
            finally:
                client.close()
            with lock:
                results.append(timed_out)

        threads = [threading.Thread(target=one, args=(i,), name=f"drain-{i}", daemon=True) for i in range(max(1, self.consumers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=timeout_s + 30)
        timed_out_partitions = set().union(*results) if results else set(high)
        undrained = dict(offline)
        undrained.update({p: f"not read to its high watermark {high[p]} within {timeout_s:g} s" for p in timed_out_partitions})
        complete = len(results) == len(threads) and not undrained
        return DrainResult(complete, high, sorted(timed_out_partitions), sorted(processes), time.monotonic() - began,
                           first_index, undrained)
