"""`upgrade`: a rolling upgrade under load, as an operator does one (issue 36, item 2).

`run --kafka-version A --upgrade-to B --nemesis upgrade`: every node mounts B's jars beside A's
(harness/cluster/versions.py). One start restarts every node not yet on B, one at a time, on B's
jars: dedicated KRaft controllers first, then the brokers in a seeded order (the order is `roll`'s,
and so is each step: a clean stop, SIGTERM and Kafka's controlled shutdown, SIGKILL after 90 s
recorded as `escalated`; the JVM started again; a bounded wait for every ISR to be full). Then:

- on a seeded coin (`DOWNGRADE_P`, once per run) one broker is rolled back to A, as an operator
  who meets a problem on the new version does before finalizing (a binary downgrade is allowed
  while the feature levels are A's);
- the features are finalized: B's FeatureCommand names B's levels (version-mapping) and asks the
  controller for metadata.version and, where B has them above the finalized ones,
  transaction.version and eligible.leader.replicas.version. With a broker back on A the controller
  must refuse (a registered broker does not support the level): that refusal, or any other, is
  recorded with Kafka's answer, never raised.

A later start upgrades what is left on A (the downgraded broker) and finalizes again; with every
node on B and the features finalized it is `nemesis-skipped`. When Kafka still refused a feature
because a broker on B "does not support" it (its registration went through A's controller and left
the feature out: harness/cluster/features.py), the later start restarts every broker on B once more
(`again` in its steps), so that each registers through B's controller, then finalizes. The history
says which version each node runs from each moment on: `upgrade` names every node's version as it
begins, each `node-stop` its `from_version` and `to_version`, each `node-start` the `versions` it
started on, `upgraded` the versions and features at its end, and config.json's `upgrade` each node's
version after the heal. When the fault phase ends, an upgrade in progress finishes the node it is on
and drops the rest (`aborted`, `downgrade_dropped`) and the finalize (`finalize_dropped`). The heal
starts any node the upgrade left down, on the version it was switched to.
A replay repeats the recorded steps (nodes, versions, `after_s`) and the finalize's `finalize_after_s`.
"""

from __future__ import annotations

import random
import time
from typing import Any

from harness.cluster import features, versions
from harness.history.faults import FEATURES, NODE_DOWN, ROLL, UPGRADE
from nemesis import steps
from nemesis.registry import Package
from nemesis.roll import RollNemesis

DOWNGRADE_P = 0.5  # the seeded coin: one broker rolled back to A before the features are finalized


class UpgradeNemesis(RollNemesis):
    """A rolling upgrade to the cluster's second version per start; a stop only starts what it left down."""

    name = "upgrade"
    faults = (UPGRADE, NODE_DOWN, FEATURES)
    replay_keys = ("target", "targets", "steps", "finalize_after_s", "skipped")
    option_names = ()

    def __init__(self) -> None:
        super().__init__(stops=("clean",), waits=("isr",))  # an operator's careful roll; roll.py draws the order
        self.downgraded = False  # the coin is tossed until one broker has been rolled back, once a run
        self.finalized = False
        self.raised = False  # B's metadata.version finalized, though a later feature was refused (features.staged)
        self.unregistered = False  # the last finalize was refused for a feature a broker on B left out (features.MISSING)
        self.switching: dict[int, str] = {}  # node id -> the version it ran before its run.env was rewritten
        self.anchor = 0.0  # when the upgrade in progress struck (time.monotonic())
        self.rolled: dict[str, Any] = {}  # roll's `rolled` of it, recorded as `upgraded` after the features

    @property
    def upgrade(self) -> versions.Upgrade | None:
        return getattr(self.cluster, "upgrade", None)

    def versions(self) -> dict[str, str]:
        """Each node's version now (the one it ran before a switch whose restart has not come yet)."""
        up = self.upgrade
        assert up is not None
        return {str(n.node_id): self.switching.get(n.node_id) or up.version_of(n) for n in self.nodes}

    # --- deciding ----------------------------------------------------------------------------------
    def decide(self, look: Any, rng: random.Random, given: dict[str, Any]) -> dict[str, Any]:
        up = self.upgrade
        if up is None:
            return {"target": "all", "targets": [],
                    "skipped": "this cluster mounts no second version: run with --upgrade-to VERSION"}
        order = super().decide(look, rng, given)["steps"]  # controllers first, brokers shuffled
        target = up.target.version
        plan = [{**s, "to": target} for s in order if up.version_of(self.cluster.node(s["who"])) != target]
        brokers = sorted(n.node_id for n in self.brokers)
        back = rng.random() < DOWNGRADE_P and not self.downgraded
        who = rng.choice(brokers)
        # Only in a start that moves nodes to B, before its finalize: once B's levels are finalized, A
        # cannot read the metadata (a 3.9.1 broker rolled back after metadata.version 4.4-IV2 was
        # finalized: run 20261126T054847-ed9129).
        if back and plan and not (self.finalized or self.raised):
            plan.append({"who": who, "how": "clean", "wait": "isr", "pause_s": 0.0, "to": up.source.version, "downgrade": True})
        if not plan and self.finalized:
            return {"target": "all", "targets": [], "skipped": f"every node runs {target} and the features are finalized"}
        if not plan and self.unregistered:  # each broker registers again, now through B's controller
            plan = [{**s, "to": target, "again": "registered without a feature B has"} for s in order if s["who"] in brokers]
        return {"target": "all", "targets": list(dict.fromkeys(s["who"] for s in plan)) or brokers, "steps": plan}

    # --- acting ------------------------------------------------------------------------------------
    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        """roll's apply (every step in turn, until the fault phase ends), recorded as this package's
        `upgrade`; then the features, then `upgraded` (record() below turns roll's events into these)."""
        if plan.get("skipped"):
            return self.skip(UPGRADE.start, {"target": plan.get("target", "all"), "targets": []}, plan["skipped"])
        rolled = super().apply(plan)
        left = plan["steps"][len(rolled["steps"]):]
        # Once the fault phase has ended (the heal began during the last node's step, or before the
        # steps left: aborted) the features are left as they are: a finalize then ran on after the
        # heal had given up waiting for this thread, into the drain and the teardown (run
        # 20261126T060918-252c0a: its answer was never recorded).
        ended = self.stopping.is_set()
        feats = None if ended else self.finalize(self.anchor, plan.get("finalize_after_s"))
        if ended and not self.upgrade.features:  # config.json says why nothing was finalized
            self.upgrade.features = {"dropped": "the fault phase ended before the finalize"}
        self.record(UPGRADE.stop, {**self.rolled, "versions": self.versions(),
                                   **({"downgrade_dropped": True} if any(s.get("downgrade") for s in left) else {}),
                                   **({"finalize_dropped": "the fault phase ended first"} if ended else {}),
                                   "features": None if feats is None else {k: feats.get(k) for k in ("exit", "refused", "after")},
                                   "took_s": round(time.monotonic() - self.anchor, 2)})
        return {**rolled, "finalize_after_s": None if feats is None else feats["after_s"]}

    def step(self, step: dict[str, Any], anchor: float, until: float | None = None) -> dict[str, Any]:
        """roll's step (stop clean, start, wait for the ISRs) with the node's next start on `to`'s jars."""
        assert self.cluster is not None and self.upgrade is not None
        node = self.cluster.node(int(step["who"]))
        self.switching[node.node_id] = self.switching.get(node.node_id) or self.upgrade.version_of(node)
        self.upgrade.use(node, step["to"])
        done = super().step(step, anchor, until)
        self.switching.pop(node.node_id, None)  # started (or left down for the heal, which starts it on `to`)
        if step.get("downgrade"):
            self.downgraded = True
        return {**done, "to": step["to"], **({"downgrade": True} if step.get("downgrade") else {}),
                **({"again": step["again"]} if step.get("again") else {})}

    def finalize(self, anchor: float, after_s: float | None) -> dict[str, Any]:
        """Kafka's feature upgrade (harness/cluster/features.py finalize) as a band of its own."""
        assert self.cluster is not None and self.upgrade is not None
        if after_s is not None:  # a replay: the recorded moment, never before
            steps.wait_until(anchor + float(after_s))
        at = round(time.monotonic() - anchor, 3)
        brokers = self.brokers
        via = next((b for b in brokers if b.pid() is not None), brokers[0])
        ids = [b.node_id for b in brokers]
        self.record(FEATURES.start, {"targets": ids, "via": via.node_id, "to_version": self.upgrade.target.version,
                                     "versions": self.versions()})
        began = time.monotonic()
        result = features.finalize(self.upgrade, via, brokers)
        self.upgrade.features = result  # config.json's upgrade.features (harness/run/steps.py)
        self.finalized = not result.get("refused")
        self.raised = self.raised or bool(result.get("metadata_finalized"))
        last = (result.get("staged") or [result])[-1]
        self.unregistered = bool(result.get("refused")) and features.MISSING in str(last.get("answer") or "")
        self.record(FEATURES.stop, {"targets": ids, **result, "took_s": round(time.monotonic() - began, 2)})
        return {**result, "after_s": at}

    def record(self, f: str, value: dict[str, Any]) -> None:
        """roll's `roll` is this package's `upgrade`, with every node's version; roll's `rolled` waits for
        the features and becomes `upgraded` (apply). Every node-stop names the version the node ran and
        the one it starts on; every node-start (roll's, the supervisor's, the heal's) the versions its
        nodes started on."""
        up = self.upgrade
        if f == ROLL.start and up is not None:
            self.anchor = self.struck_at or time.monotonic()  # roll's anchor: its steps' after_s count from it
            f, value = UPGRADE.start, {**value, "from_version": up.source.version, "to_version": up.target.version,
                                       "versions": self.versions()}
        elif f == ROLL.stop:
            self.rolled = value
            return
        if up is not None and self.cluster is not None and f in (NODE_DOWN.start, NODE_DOWN.stop) and value.get("targets"):
            nodes = [self.cluster.node(int(i)) for i in value["targets"]]
            if f == NODE_DOWN.start:
                value = {**value, "from_version": self.switching.get(nodes[0].node_id) or up.version_of(nodes[0]),
                         "to_version": up.version_of(nodes[0])}
            else:
                value = {**value, "versions": {str(n.node_id): up.version_of(n) for n in nodes}}
        super().record(f, value)


PACKAGES = (
    Package("upgrade", make=lambda s: UpgradeNemesis(), heal_rank=26,
            requires=frozenset({"signals", "restart", "kafka_tools", "own_data"}),
            summary="a rolling upgrade to --upgrade-to's version, node by node under load; on a coin one broker "
                    "rolled back; then the features finalized (kafka-features upgrade)"),
)
