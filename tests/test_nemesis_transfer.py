"""The `transfer` package (nemesis/transfer.py): a preferred leader election to an in-sync follower,
maybe with the two cut apart first, maybe with the new leader killed seconds later.

First without Docker, on the flap tests' stand-in cluster taught to reorder replicas and hold
preferred elections: what is chosen, recorded, repeated by a seed and by a replay, and healed.
Then on real clusters, 1.1.1 (the ZooKeeper-era tools, run in ZooKeeper's container) and the default
version (AdminClient.elect_leaders): the leadership moves to the follower, and after its death back
to the old leader, which the transfer left in the ISR: the leader change KIP-279 names. Both, because
a broken import on the AdminClient path once passed every 1.1.1 test and failed only in CI."""

from __future__ import annotations

import random
import time

import pytest

from harness.cluster.broker_config import INTERNAL_PORT
from harness.history.faults import KILL, PARTITION, SKIPPED, TRANSFER
from harness.provision.settings import DEFAULT_KAFKA_VERSION
from nemesis import steps as steps_module
from nemesis.transfer import TransferNemesis
from tests.test_nemesis_flap import Cluster, Events, fast


class Dist:
    version = "1.1.1"


class Stand(Cluster):
    """The flap tests' cluster, with a replica order per partition and preferred elections.
    ZooKeeper-era (1.1.1); its controller is broker 1 (the lowest live id)."""

    is_kraft = False

    def __post_init__(self) -> None:
        super().__post_init__()
        self.distribution, self.zookeeper = Dist(), None
        self.order = {p: [leader] + [i for i in (1, 2, 3) if i != leader] for p, leader in self.leaders.items()}
        self.cuts: list[tuple[int, list[int]]] = []

    def broker_views(self):
        """Elections follow the replica order, as a controller's do."""
        self.isrs = {p: sorted(isr, key=self.order[p].index) for p, isr in self.isrs.items()}
        return super().broker_views()

    def _views(self):
        views = super()._views()
        for view in views.values():
            for p, state in view.topics["queue"].items():
                state["replicas"] = list(self.order[p])
        return views


@pytest.fixture
def stand(monkeypatch):
    cluster = Stand()

    def reorder(c, version, topic, partition, ids, via=None, timeout_s=90):
        c.order[partition] = list(ids)
        return 0, "ok"

    def elect(c, version, topic, partition, timeout_s=90):
        first = c.order[partition][0]
        if first in c.alive and first in c.isrs[partition]:
            c.leaders[partition] = first
        return True, "Successfully started preferred replica election"

    monkeypatch.setattr(steps_module.leadership, "reorder_replicas", reorder)
    monkeypatch.setattr(steps_module.leadership, "elect_preferred", elect)
    monkeypatch.setattr(steps_module.net, "drop_from",
                        lambda node, peers, tag, port=None: cluster.cuts.append((node.node_id, [p.node_id for p in peers], port)))
    monkeypatch.setattr(steps_module.net, "heal", lambda node, tag: cluster.cuts.append((node.node_id, [], None)))
    return cluster


def nemesis(cluster, events, **kw) -> TransferNemesis:
    return fast(TransferNemesis(window_s=1.0, max_kill_after_s=0.01, **kw), cluster).setup(cluster, events, "queue")


def test_a_transfer_moves_the_leadership_to_an_in_sync_follower_and_records_it(stand):
    events = Events()
    value = nemesis(stand, events, cut_probability=0.0, kill_probability=0.0).invoke("start", {}, random.Random(1))
    old, new = value["targets"]
    partition = int(value["partition"].rsplit("-", 1)[1])
    assert old != new and stand.leaders[partition] == new == value["leader"]
    assert stand.order[partition][:2] == [new, old] and value["reordered"]["seen"][:2] == [new, old]
    assert [f for f, _ in events] == [TRANSFER.start, TRANSFER.stop]
    start, stop = events[0][1], events[1][1]
    assert start["targets"] == [old, new] and f"leader:queue-{partition}" in start["roles"][str(old)]
    assert stop["leader"] == new and stop["targets"] == [old, new]
    assert value["cut"] is False and value["kill_after_s"] is None and stand.hits == [] and stand.cuts == []


def test_the_full_sequence_cuts_the_pair_kills_the_new_leader_and_the_old_one_leads_again(stand):
    events = Events()
    trans = nemesis(stand, events, old_second_probability=1.0, cut_probability=1.0, kill_probability=1.0)
    value = trans.invoke("start", {}, random.Random(4))
    old, new = value["targets"]
    assert stand.cuts == [(old, [new], INTERNAL_PORT), (new, [old], INTERNAL_PORT)]  # the controller listener stays
    assert [f for f, _ in events] == [PARTITION.start, TRANSFER.start, TRANSFER.stop, KILL.start]
    assert events[3][1]["targets"] == [new] and events[3][1]["target"] == "new-leader"
    assert stand.hits == [("kill", new)] and value["next_leader"] == old  # old is second in the order, in the ISR
    healed = trans.invoke("stop", {}, random.Random(4))
    assert healed["healed_cut"] == [old, new] and healed["targets"] == [new] and stand.alive == {1, 2, 3}
    assert [f for f, _ in events[4:]] == [PARTITION.stop, KILL.stop]


def test_transfers_are_seeded_and_a_replay_repeats_the_pair_and_the_coins(stand):
    runs = []
    for _ in range(2):
        cluster, events = Stand(), Events()
        stand.__dict__.update(cluster.__dict__)  # the patched tools act on `stand`: reset it
        value = nemesis(stand, events).invoke("start", {}, random.Random(11))
        runs.append((value["targets"], value["partition"], value["cut"], value["kill_after_s"], list(stand.hits)))
    assert runs[0] == runs[1]
    params = TransferNemesis().replay_params({**value, "cut": True, "kill_after_s": 0.0})
    assert set(params) == {"target", "targets", "partition", "old_second", "cut", "kill_after_s"}
    stand.__dict__.update(Stand().__dict__)
    events = Events()
    replayed = nemesis(stand, events).invoke("start", params, random.Random(99))
    assert replayed["targets"] == value["targets"] and replayed["partition"] == value["partition"]
    assert replayed["cut"] is True and stand.hits == [("kill", value["targets"][1])]


def test_without_the_old_leader_second_the_other_follower_leads_after_the_new_leader_dies(stand):
    value = nemesis(stand, Events(), old_second_probability=0.0, kill_probability=1.0).invoke("start", {}, random.Random(3))
    old, new = value["targets"]
    other = ({1, 2, 3} - {old, new}).pop()
    partition = int(value["partition"].rsplit("-", 1)[1])
    assert stand.order[partition] == [new, other, old] and value["old_second"] is False
    assert value["next_leader"] == other


@pytest.mark.parametrize("kraft", [False, True])
def test_a_cut_pair_leaves_out_a_zookeeper_era_controller(stand, kraft):
    """On a ZooKeeper-era cluster the cut would also cut the controller's LeaderAndIsr between the two:
    a cut pair never holds the controller (broker 1). On KRaft the controller has its own listener."""
    stand.is_kraft = kraft
    pairs = []
    for seed in range(12):
        stand.__dict__.update({**Stand().__dict__, "is_kraft": kraft})
        value = nemesis(stand, Events(), cut_probability=1.0, kill_probability=0.0).invoke("start", {}, random.Random(seed))
        assert value["cut"] is True
        pairs.append(value["targets"])
        if not kraft:
            assert 1 not in value["targets"] and value.get("chosen_apart_from_controller") in (None, 1)
            assert sorted(stand.cuts[:2]) == [(2, [3], INTERNAL_PORT), (3, [2], INTERNAL_PORT)]
    assert any(1 in pair for pair in pairs) is kraft


def test_without_a_pair_apart_from_the_controller_the_transfer_goes_on_without_the_cut(stand):
    stand.isrs = {0: [1, 2, 3], 1: [2, 1], 2: [3, 1]}  # only partition 0 (led by 1) has two in-sync followers
    value = nemesis(stand, Events(), cut_probability=1.0, kill_probability=0.0).invoke("start", {}, random.Random(2))
    assert value["cut"] is False and stand.cuts == []
    assert "apart from the controller 1" in value["cut_dropped"] and 1 in value["targets"]


def test_a_partition_without_an_in_sync_follower_is_skipped_with_the_reason(stand):
    stand.isrs = {p: [leader] for p, leader in stand.leaders.items()}
    stand.catching_up.clear()
    events = Events()
    value = nemesis(stand, events).invoke("start", {}, random.Random(1))
    assert events[-1][0] == SKIPPED and "in-sync follower" in value["skipped"] and value["fault"] == TRANSFER.start
    assert stand.hits == [] and stand.cuts == []


@pytest.mark.slow
# Both with the cut. On KRaft it once cut every port, and the AdminClient's ElectLeaders timed out
# after 20 s in CI (2026-11-24): the receiving broker forwards it to the active controller over the
# controller listener, which the cut then covered. It now cuts the replication listener only.
@pytest.mark.parametrize("version", ["1.1.1", DEFAULT_KAFKA_VERSION])
def test_the_transfer_keeps_the_old_leader_in_the_isr_and_it_leads_after_the_new_one_dies(prepared, version):
    from harness.cluster import KafkaCluster

    with KafkaCluster(brokers=3, kafka_version=version) as cluster:
        # The controller last: on 1.1.1, when the old leader A was the controller, the cut kept the
        # LeaderAndIsr from B, and after B's death the metadata named the dead B for the whole 20 s
        # window (3 of 8 runs on 2026-11-24, every failure with A the controller). That is the
        # controller's own path, not the sequence this test is about.
        controller = cluster.active_controller().node_id
        order = [b for b in (1, 2, 3) if b != controller] + [controller]
        cluster.create_topic("queue", replica_assignment=[order], config={"min.insync.replicas": "2"}, timeout_s=60)
        events = Events()
        trans = TransferNemesis().setup(cluster, events, "queue")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(trans.fresh_look().isrs.get(0, [])) < 3:
            time.sleep(0.5)
        look = trans.fresh_look()
        old = look.leaders[0]
        new = next(i for i in look.replicas[0] if i != old)
        value = trans.invoke("start", {"targets": [old, new], "partition": "queue-0", "old_second": True, "cut": True,
                                       "kill_after_s": 0.5},
                             random.Random(1))
        try:
            assert value["elected"] is True, value["answer"]
            assert value["leader"] == new, f"the preferred election did not move queue-0 to {new}: {value}"
            assert value["next_leader"] == old, f"after {new}'s death the leader was {value['next_leader']}, not {old}: {value}"
            assert [f for f, _ in events] == [PARTITION.start, TRANSFER.start, TRANSFER.stop, KILL.start]
        finally:
            healed = trans.invoke("stop", {}, random.Random(1))
        assert healed.get("healed_cut") == [old, new] and healed["targets"] == [new]
