"""`fence`: a zombie producer opens a live transactional.id in the middle of the run (issue 36).

A restarted instance of a transactional application calls init_transactions with the same
transactional.id while the old instance may still be running: the coordinator bumps the id's epoch,
aborts the transaction the old instance has open, and fences it (redpanda-data/chaos `hijack_tx_ids`).
The old producer must then fail its transaction, nothing it had committed may be lost, and no
transaction may be torn: the checker's transactional anomalies (G1a aborted reads, torn and lost
transactions) judge that from the history, since the workload records the fenced transaction as it
ends (fail or info) and opens a new producer under the same id, which fences the zombie in turn.

Each start draws one of the workload's transactional ids (`coordinated`: the txn and eos workloads)
and opens the zombie on it (harness/cluster/zombie.py); the band `fence` ... `fenced` lasts while
the zombie holds the id, a seeded 1-5 s (or until the heal), on a thread of its own. A workload with no transactional id gets
a `nemesis-skipped` event that says so.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from harness.cluster.txn_coordinator import coordinator_of
from harness.cluster.zombie import close_zombie, open_zombie
from harness.errors import HarnessError
from harness.history.faults import FENCE
from nemesis.base import Nemesis
from nemesis.registry import Package

HOLD_S = (1.0, 5.0)


class FenceNemesis(Nemesis):
    name = "fence"
    faults = (FENCE,)
    replay_keys = ("target", "targets", "id", "id_index", "hold_s", "struck")

    def __init__(self) -> None:
        super().__init__()
        self.holders: list[threading.Thread] = []  # each zombie's thread: open, hold, let go

    def decide(self, look: Any, rng: random.Random, given: dict[str, Any]) -> dict[str, Any]:
        ids = list(self.coordinated.get("transactional_ids", []))
        hold = round(rng.uniform(*HOLD_S), 2)
        if not ids:
            return {"target": "transactional-id", "targets": [], "hold_s": hold,
                    "why": "the workload has no transactional id (the txn and eos workloads have)"}
        index = rng.randrange(len(ids))
        return {"target": "transactional-id", "targets": [], "id": ids[index], "id_index": index, "hold_s": hold}

    def replayed(self, params: dict[str, Any]) -> dict[str, Any]:
        """The recorded id's position among this run's ids: a replay's workload names its ids after its
        own run id, so the original's id would fence nobody (a first replay test opened one no one used)."""
        ids = list(self.coordinated.get("transactional_ids", []))
        index = params.get("id_index")
        if isinstance(index, int) and ids:
            return {**params, "id": ids[index % len(ids)]}
        return params

    def replay_nodes(self, params: dict[str, Any]) -> tuple[list[Any] | None, str | None]:
        """Its target is an id, not a node: a replay takes the recorded id as it is."""
        return ([], "recorded targets") if params.get("id") or params.get("targets") is not None else (None, None)

    def apply(self, plan: dict[str, Any]) -> dict[str, Any]:
        assert self.cluster is not None
        value: dict[str, Any] = {"target": plan["target"], "targets": [], "hold_s": plan["hold_s"]}
        if plan.get("replay") == "recorded targets" and not plan.get("struck"):
            # Its target is an id, so `targets` is always empty: `struck` says whether the original
            # opened a zombie (a replay once opened one where the original had skipped, a zombie still holding).
            return self.skip(FENCE.start, value, "the run replayed skipped this start")
        if not plan.get("id"):
            return self.skip(FENCE.start, value, plan.get("why") or "no transactional id to open")
        value["id"] = plan["id"]
        if "id_index" in plan:
            value["id_index"] = plan["id_index"]
        value["struck"] = True
        # Recorded as it strikes, before the look at the coordinator (a metadata request, 1-3 s under
        # load): a replay strikes at the recorded moment and would otherwise come that much late.
        self.struck_at = time.monotonic()
        self.record(FENCE.start, value)
        # The zombie lives on a thread of its own: its init_transactions waits up to 30 s for an
        # unavailable coordinator, and the package's next event must not wait with it (a replay's
        # second zombie came 3.2 s late behind its first).
        # Zombies may overlap (two restarted instances do): one still opening against a slow coordinator
        # never makes the next start skip, which a replay, where it opened slower, could not repeat.
        holder = threading.Thread(target=self.hold, args=(plan["id"], self.struck_at + float(plan["hold_s"])),
                                  name="fence-zombie", daemon=True)
        self.holders = [h for h in self.holders if h.is_alive()] + [holder]
        holder.start()
        return value

    def hold(self, transactional_id: str, until: float) -> None:
        """Open the zombie, hold the id until `until` (or the heal), let go; the end event says what happened."""
        assert self.cluster is not None
        settings = getattr(self.cluster, "client_settings", None) or {}
        producer, opened = open_zombie(self.cluster.bootstrap_servers(), transactional_id, settings=settings)
        try:  # which broker fenced: the id's coordinator, as the metadata names it now
            found = coordinator_of(self.cluster, transactional_id)
            opened["coordinator"], opened["partition"] = found["coordinator"], f"__transaction_state-{found['partition']}"
        except HarnessError as exc:
            opened["coordinator_unknown"] = exc.message
        if producer is not None:
            self.stopping.wait(max(0.0, until - time.monotonic()))
        close_zombie(producer)
        self.record(FENCE.stop, {"targets": [], "id": transactional_id, **opened})

    def teardown(self) -> dict[str, Any]:
        """A schedule's stop leaves the zombie to its own end (its hold, or its init_transactions' 30 s
        bound): waiting here made the package's next start 4.3 s late in a replay. The final heal (the
        runner has set `stopping`, which ends every hold) waits for it, bounded."""
        if self.stopping.is_set():
            deadline = time.monotonic() + 40.0
            for holder in self.holders:
                holder.join(max(0.0, deadline - time.monotonic()))
        return {"targets": []}


PACKAGES = (
    Package("fence", make=lambda s: FenceNemesis(), heal_rank=5,
            summary="a zombie producer opens one of the run's live transactional ids (init_transactions), fencing its owner"),
)
