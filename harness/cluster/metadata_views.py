"""What each broker believes about the cluster, and the belief a majority shares.

Brokers answer metadata requests from their own cache. A broker cut off from the
controller keeps serving the state it last heard: while it is isolated it still
lists itself in every ISR. A client that happens to ask that broker reads a past
state as if it were now. CI hit this: a test waited 40 s for an ISR shrink that the
one cached admin client, asking the isolated broker, could not see.

So the harness asks every broker and trusts the view that more than half of the
brokers that answer hold. When one broker is isolated, or a minority, the brokers that
hear the controller outnumber it. Where no view has a majority (a one-to-one split,
a moment of propagation), the answer is "unknown" and callers wait. librdkafka
cannot address a request to a chosen broker (a new client answers from a random one
after bootstrap), so each answer is labelled with the broker that gave it, and the
asking goes on, within a bounded number of rounds, until every reachable broker has
answered.
"""

from __future__ import annotations

import logging
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

log = logging.getLogger("librdkafka.views")

Partitions = dict[int, dict[str, Any]]  # partition id -> {"leader", "replicas", "isr"}


@dataclass(frozen=True)
class BrokerView:
    """One broker's answer: the brokers its metadata lists (fenced ones are left out)
    and, per topic, each partition's leader, replicas and ISR (sorted)."""

    responder: int
    brokers: tuple[int, ...]
    topics: dict[str, Partitions] = field(compare=False)

    def key(self, topic: str | None = None) -> str:
        """Equal for equal beliefs (about `topic` only, if given), whoever holds them."""
        if topic is not None:
            return repr(sorted(self.topics.get(topic, {}).items()))
        return repr((self.brokers, sorted((t, sorted(p.items())) for t, p in self.topics.items())))


def _view_from(metadata: Any, asked: int) -> BrokerView:
    topics = {
        name: {
            p.id: {"leader": p.leader, "replicas": list(p.replicas), "isr": sorted(p.isrs)}
            for p in meta.partitions.values()
        }
        for name, meta in metadata.topics.items()
        if meta.error is None
    }
    # -1: the bootstrap connection answered, before the client learned that broker's id.
    responder = metadata.orig_broker_id if metadata.orig_broker_id >= 0 else asked
    return BrokerView(responder, tuple(sorted(metadata.brokers)), topics)


def _ask(asked: int, address: str, timeout_s: float, settings: dict[str, Any] | None = None) -> BrokerView | None:
    client = AdminClient({**(settings or {}), "bootstrap.servers": address, "logger": log})
    try:
        return _view_from(client.list_topics(timeout=timeout_s), asked)
    except KafkaException as exc:
        log.debug("broker %s did not answer metadata: %s", asked, exc)
        return None


def collect_views(addresses: dict[int, str], timeout_s: float = 3.0, rounds: int = 4,
                  settings: dict[str, Any] | None = None) -> dict[int, BrokerView]:
    """Every reachable broker's view, keyed by the broker that answered.

    `addresses` maps broker id to a bootstrap address. Each round asks every broker not
    yet heard from twice, with new clients, in parallel. A broker whose bootstrap does
    not answer within `timeout_s` is not asked again; at most `rounds` rounds. `settings` are the
    clients' own (a target's security: harness/target/security.py)."""
    views: dict[int, BrokerView] = {}
    pending = dict(addresses)
    with ThreadPoolExecutor(max_workers=2 * max(1, len(addresses))) as pool:
        for _ in range(rounds):
            asks = [(i, a) for i, a in pending.items() for _ in range(2)]
            answers = list(pool.map(lambda ask: (ask[0], _ask(ask[0], ask[1], timeout_s, settings)), asks))
            unreachable = {i for i, _ in asks} - {i for i, view in answers if view is not None}
            for _, view in answers:
                if view is not None:
                    views.setdefault(view.responder, view)
            pending = {i: a for i, a in pending.items() if i not in views and i not in unreachable}
            if not pending:
                break
    return views


def majority_view(views: dict[int, BrokerView], topic: str | None = None) -> BrokerView | None:
    """A view whose belief (about `topic`, if given) more than half of the answering brokers
    hold, or None if none is that widely held. Brokers that do not answer (killed, paused,
    cut from the host) hold no stale belief to outvote, so only answers are counted."""
    if not views:
        return None
    keys = {responder: view.key(topic) for responder, view in views.items()}
    key, holders = Counter(keys.values()).most_common(1)[0]
    if holders * 2 <= len(views):
        return None
    return next(views[responder] for responder, k in keys.items() if k == key)


class AgreedMetadata:
    """What a cluster answers from its brokers' agreed view, for any cluster that has `broker_views()`
    and `node(id)`: the clusters the harness starts (harness/cluster/kafka_cluster.py) and the ones it
    is pointed at (harness/target/cluster.py) share these two, instead of a copy each."""

    def broker_views(self) -> dict[int, BrokerView]:
        raise NotImplementedError

    def node(self, node_id: int) -> Any:
        raise NotImplementedError

    def partition_state(self, topic: str) -> Partitions:
        """Per partition: leader id, replica ids and in-sync replica ids (sorted), as a majority
        of the answering brokers report them; {} while no majority agrees or the topic is unknown to it.

        One broker's answer is not enough: an isolated broker keeps serving its stale cache."""
        view = majority_view(self.broker_views(), topic)
        return view.topics.get(topic, {}) if view is not None else {}

    def leader_of(self, topic: str, partition: int) -> Any:
        """The broker that leads `topic`/`partition` now, or None while it has no leader
        (or no majority of brokers agrees on one)."""
        from harness.errors import ClusterError

        state = self.partition_state(topic)
        if not state:
            return None
        if partition not in state:
            raise ClusterError(f"topic {topic!r} has no partition {partition} (it has {len(state)})")
        leader = state[partition]["leader"]
        return self.node(leader) if leader >= 0 else None

