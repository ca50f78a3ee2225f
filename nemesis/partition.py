"""Network partitions shaped like Jepsen's, aimed at Kafka's roles.

A partition is a *grudge*: for each node, the set of nodes whose packets it
drops. Shapes:
- `one`: isolate a random broker; `leader`: the leader of a workload partition;
  `controller`: the active KRaft controller.
- `halves`: two halves that cannot talk; `minority-third`: a third (at least one)
  cut from the rest.
- `majorities-ring`: every node sees a majority, no two the same one
  (needs one-way cuts with three nodes, as in Jepsen).
- `bridge`: two halves cut apart except one node that sees both.
- `client`: the host's clients cut from one broker; the brokers still talk.
`one_way=True` keeps only one direction of each cut (the isolated side still
receives).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError
from harness.history.faults import LOSS, PARTITION
from nemesis import net, steps
from nemesis.base import Nemesis
from nemesis.registry import Package, Setting
from nemesis.targets import choose_nodes, no_target_reason

if TYPE_CHECKING:
    from harness.cluster.node import Node

SHAPES = ("one", "leader", "controller", "halves", "majorities-ring", "bridge", "minority-third", "client")

Grudge = dict[int, set[int]]  # node id -> ids whose packets it drops


def isolate(victims: list["Node"], everyone: list["Node"]) -> Grudge:
    rest = [n.node_id for n in everyone if n not in victims]
    grudge: Grudge = {v.node_id: set(rest) for v in victims}
    for node_id in rest:
        grudge[node_id] = {v.node_id for v in victims}
    return grudge


def split(side_a: list[int], side_b: list[int]) -> Grudge:
    grudge: Grudge = {a: set(side_b) for a in side_a}
    grudge.update({b: set(side_a) for b in side_b})
    return grudge


def majorities_ring(ids: list[int]) -> Grudge:
    """Each node sees itself and the next ones on a ring up to a majority; drops the rest."""
    n, majority = len(ids), len(ids) // 2 + 1
    grudge: Grudge = {}
    for i, node_id in enumerate(ids):
        sees = {ids[(i + k) % n] for k in range(majority)}
        grudge[node_id] = set(ids) - sees
    return grudge


def bridge(ids: list[int]) -> Grudge:
    """Two halves with the middle node in both: it sees everyone, the halves do not see each other."""
    mid = len(ids) // 2
    left, right = ids[:mid], ids[mid + 1 :]
    grudge = split(left, right)
    grudge[ids[mid]] = set()
    return grudge


def one_way(grudge: Grudge) -> Grudge:
    """Keep each cut in one direction only: of a mutual pair, the lower id keeps its grudge."""
    return {a: {b for b in peers if not (a in grudge.get(b, set()) and b < a)} for a, peers in grudge.items()}


class PartitionNemesis(Nemesis):
    """Starts a partition of a seeded shape among the configured ones; stop heals it."""

    option_names = ("shapes", "one_way_cuts")
    replay_keys = ("shape", "targets", "grudge", "partition")

    name, faults = "partition", (PARTITION,)

    def __init__(self, shapes: tuple[str, ...] = ("one", "leader", "controller", "halves"), one_way_cuts: bool = False) -> None:
        super().__init__()
        unknown = [s for s in shapes if s not in SHAPES]
        if unknown:
            raise HarnessError(f"unknown partition target(s) {unknown}", hint=f"use any of: {', '.join(SHAPES)}")
        self.shapes, self.one_way_cuts = tuple(shapes), one_way_cuts
        self.active: dict[str, Any] | None = None

    def grudge_for(self, shape: str, rng: random.Random, aimed: dict[str, Any], look: Any = None) -> tuple[Grudge, list["Node"]]:
        assert self.cluster is not None
        brokers = self.brokers
        ids = [b.node_id for b in brokers]
        rng.shuffle(ids)
        if shape in ("one", "leader", "controller"):
            victims = choose_nodes(self.cluster, shape, rng, self.topic, aimed, look)
            return isolate(victims, self.nodes), victims  # cut off from every node: a dedicated controller from its quorum too
        if shape == "halves":
            half = len(ids) // 2
            return split(ids[:half], ids[half:]), [self.cluster.node(i) for i in ids[:half]]
        if shape == "minority-third":
            third = max(1, len(ids) // 3)
            return split(ids[:third], ids[third:]), [self.cluster.node(i) for i in ids[:third]]
        if shape == "majorities-ring":
            return majorities_ring(ids), brokers
        if shape == "bridge":
            return bridge(ids), brokers
        raise HarnessError(f"shape {shape!r} has no grudge")

    def plan(self, params: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        """A partition's shape, targets and grudge, decided before any rule is added: the recorded
        ones when `params` replays an earlier run (targets and grudge), else drawn from `rng` and
        the roles of one look. `nobody` says why a start would cut nobody off."""
        assert self.cluster is not None
        shape = params.get("shape") or rng.choice(self.shapes)
        look = self.look()
        victims, note = self.replay_nodes(params)
        grudge = params.get("grudge")
        known = {n.node_id for n in self.nodes}
        if victims is not None and grudge is not None and not {int(k) for k in grudge} | {p for v in grudge.values() for p in v} <= known:
            victims, note = None, "the recorded grudge names nodes this cluster lacks; chose afresh"
        aimed = {k: params[k] for k in ("partition",) if k in params} if victims is not None else {}
        plan: dict[str, Any] = {"shape": shape, **({"replay": note} if note is not None else {})}
        if shape == "client":
            chosen = victims if victims is not None else choose_nodes(self.cluster, "one", rng)
            return {**plan, "targets": [n.node_id for n in chosen]}
        if victims is not None and grudge is not None:  # recorded: already one-way if it was
            return {**plan, **aimed, "targets": [n.node_id for n in victims], "grudge": grudge}
        if victims is not None and shape in ("one", "leader", "controller"):  # targets named, no grudge: isolate them
            if not victims:
                return {**plan, **aimed, "targets": [], "nobody": "the replayed event names no broker"}
            found, chosen = isolate(victims, self.nodes), victims
        else:
            found, chosen = self.grudge_for(shape, rng, aimed, look)
            if not chosen:  # a role with no holder right now: cutting nobody off is no fault
                return {**plan, **aimed, "targets": [], "nobody": no_target_reason(shape, look, aimed)}
        if self.one_way_cuts:
            found = one_way(found)
        return {**plan, **aimed, "targets": [n.node_id for n in chosen],
                "grudge": {str(k): sorted(v) for k, v in sorted(found.items())}}

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        shape, note = plan["shape"], plan.get("replay")
        aimed = {k: v for k, v in plan.items() if k not in ("shape", "targets", "grudge", "replay", "nobody")}
        victims = [self.cluster.node(i) for i in plan["targets"]]
        if "nobody" in plan:
            return self.skip(PARTITION.start, {"shape": shape, "targets": [], "roles": self.roles([]), **aimed}, plan["nobody"])
        if shape == "client":
            return self.cut_clients(victims, note)
        return self.cut(shape, {int(k): set(v) for k, v in plan["grudge"].items()}, victims, aimed, note)

    def cut_clients(self, victims: list["Node"], note: str | None = None) -> dict[str, Any]:
        """Cut the host's clients from these brokers; the brokers still talk to each other."""
        value = {"shape": "client", "targets": [n.node_id for n in victims], "roles": self.roles(victims), "cut": "host clients"}
        if note is not None:
            value["replay"] = note
        self.active = value
        self.record(PARTITION.start, value)
        steps.at_once(victims, lambda node: net.drop_host_clients(node, "PART"))
        return value

    def cut(self, shape: str, grudge: Grudge, victims: list["Node"], aimed: dict[str, Any] | None = None,
            note: str | None = None) -> dict[str, Any]:
        """Add the planned grudge's rules (one-way already, when the plan made it so)."""
        assert self.cluster is not None
        value = {
            "shape": shape,
            "one_way": self.one_way_cuts,
            "targets": [n.node_id for n in victims],
            "roles": self.roles(victims),
            "grudge": {str(k): sorted(v) for k, v in sorted(grudge.items())},
            **(aimed or {}),
        }
        if note is not None:
            value["replay"] = note
        self.active = value
        # Recorded as it strikes, then carried out on every node at once: the rules take one docker
        # exec or two per node, 0.8 s for three nodes on a quiet host and up to 3 s under load.
        self.record(PARTITION.start, value)
        cluster = self.cluster
        steps.at_once([(node_id, peers) for node_id, peers in grudge.items() if peers], lambda item: net.drop_from(
            cluster.node(item[0]), [cluster.node(p) for p in sorted(item[1])], "PART"))
        return value

    def teardown(self) -> dict[str, Any]:
        steps.heal(self.nodes, "PART")  # every node at once (nemesis/steps.py says why)
        value = {"healed": self.active is not None, "was": self.active}
        self.active = None
        self.record(PARTITION.stop, value)
        return value


class PacketLossNemesis(Nemesis):
    """Random packet drop with probability p between chosen brokers (iptables `statistic`; no netem here)."""

    option_names = ("probability", "target")
    replay_keys = ("targets",)

    name, faults = "loss", (LOSS,)

    def __init__(self, probability: float = 0.2, target: str = "one") -> None:
        super().__init__()
        if not 0 < probability < 1:
            raise HarnessError(f"loss probability {probability} must be between 0 and 1 (exclusive)")
        self.probability, self.target = probability, target
        self.active = False

    def plan(self, params: dict[str, Any], rng: random.Random) -> dict[str, Any]:
        """The brokers whose links lose packets: the recorded ones on replay, else by target from one look."""
        assert self.cluster is not None
        look = self.look()
        victims, note = self.replay_nodes(params)
        target = params.get("target", self.target)
        if victims is None:
            victims = choose_nodes(self.cluster, target, rng, self.topic, roles=look)
        plan: dict[str, Any] = {"targets": [v.node_id for v in victims], **({"replay": note} if note is not None else {})}
        if not victims:
            plan["nobody"] = "the replayed event names no broker" if note == "recorded targets" else no_target_reason(target, look)
        return plan

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        if "nobody" in plan:
            return self.skip(LOSS.start, {"targets": [], "roles": self.roles([]), "probability": self.probability}, plan["nobody"])
        victims = [self.cluster.node(i) for i in plan["targets"]]
        others = [b for b in self.nodes if b not in victims]
        self.active = True
        value = {"targets": [v.node_id for v in victims], "roles": self.roles(victims), "probability": self.probability}
        if plan.get("replay") is not None:
            value["replay"] = plan["replay"]
        self.record(LOSS.start, value)  # as it strikes (see PartitionNemesis.cut)
        # Both directions between victims and the rest, every node at once.
        steps.at_once([(v, others) for v in victims] + [(o, victims) for o in others],
              lambda item: net.drop_from(item[0], item[1], "LOSS", self.probability))
        return value

    def teardown(self) -> dict[str, Any]:
        steps.heal(self.nodes, "LOSS")
        value = {"healed": self.active}
        self.active = False
        self.record(LOSS.stop, value)
        return value


# --- the packages (nemesis/registry.py) -----------------------------------------------------------
PARTITION_TARGETS = Setting("partition_targets", ("one", "leader", "controller", "halves"), recorded="shapes", choices=SHAPES,
                            help=f"Partition shapes: {', '.join(SHAPES)}.")
ONE_WAY = Setting("one_way", False, "Partitions cut one direction only.", kind="bool", recorded="one_way_cuts")
LOSS_PROBABILITY = Setting("loss_probability", 0.2, "Packet-loss fault: drop probability.", kind="float", recorded="probability")
PACKAGES = (
    Package("partition", make=lambda s: PartitionNemesis(s["partition_targets"], one_way_cuts=s["one_way"]),
            settings=(PARTITION_TARGETS, ONE_WAY), heal_rank=50, requires=frozenset({"iptables"}),
            summary="cut brokers apart with iptables (a shape of --partition-targets); heal on stop"),
    Package("loss", make=lambda s: PacketLossNemesis(s["loss_probability"]), settings=(LOSS_PROBABILITY,), heal_rank=55,
            requires=frozenset({"iptables"}), summary="drop packets between brokers at random"),
)
