"""KillSequence: the base of the compound packages (flap, rejoin, heir, transfer), whose start is one
seeded sequence of kills and restarts, recorded step by step as ordinary `kill`/`restart` events.

They plan apart from acting, as the other nemeses do (nemesis/base.py): `plan(params, rng)` decides
from one look and touches nothing, `apply(plan)` acts. What makes a sequence different is that its
later steps depend on what the cluster does after its first one: flap's second victim is the leader
elected after the first kill, which no look taken before it can name. So a plan names such a step by
the role it strikes, and apply resolves the role when the step comes:

    "then": {"who": "new-leader", "within_s": 20.0, "wait_s": 1.7}  # fresh: the leader the live brokers
                                                                   # name next, struck 1.7 s after it is seen
    "then": {"who": 3, "after_s": 8.2}                             # a replay: broker 3, 8.2 s after the anchor
    "then": {"who": None, "why": "..."}                            # a replay whose original struck nobody

Every coin and delay is drawn in plan; apply draws nothing. What apply resolved goes into the step's
event (its targets and roles) and into the start's value, whose replay keys the schedule keeps, so
`run --replay` gives back a plan that names the broker and the moment instead of the role: one path
through apply for a run and for its replay.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from harness.history.faults import KILL
from nemesis import steps
from nemesis.base import Nemesis
from nemesis.targets import Roles


class KillSequence(Nemesis):
    """Kills and restarts recorded one by one; the victims restarted on stop."""

    faults = (KILL,)
    stop_f = KILL.stop  # what the supervisor records a refused restart's start again as
    poll_s = 0.5

    def __init__(self) -> None:
        super().__init__()
        self.victims: dict[int, int | None] = {}  # node id -> PID killed

    def replayed(self, params: dict[str, Any]) -> dict[str, Any]:
        """A replay's recorded parameters (the replay keys of an earlier start's value: every broker it
        struck, in order, and the measured delays) as a plan that names those brokers."""
        raise NotImplementedError

    # --- acting ------------------------------------------------------------------------------------
    def kill(self, node: Any, value: dict[str, Any]) -> None:
        value["pids"] = {str(node.node_id): node.pid_on_file()}
        self.record(KILL.start, value)  # recorded as it strikes, as the kill package does
        self.victims[node.node_id] = steps.kill(node)

    def restart(self, node: Any, step: str) -> None:
        pid = steps.start(node, supervised_by=self, why=step)
        self.victims.pop(node.node_id, None)
        self.record(KILL.stop, {"targets": [node.node_id], "pids": {str(node.node_id): pid}, "step": step})

    def teardown(self) -> dict[str, Any]:
        assert self.cluster is not None
        undone = {str(i): steps.start(self.cluster.node(i), supervised_by=self, why=f"{self.name}: heal")
                  for i in sorted(self.victims)}
        self.victims.clear()
        value = {"targets": [int(k) for k in undone], "pids": undone}
        if undone:  # a restart naming nobody would end every open kill band, the kill package's too
            self.record(KILL.stop, value)
        return value

    def opening(self, plan: dict[str, Any], step: str, count: int = 1) -> tuple[list[Any], dict[str, Any]]:
        """The brokers the plan's first step strikes (its first `count` targets) and that step's event
        value: the target, the brokers, their roles as the start's look saw them, the partition
        aimed at, the step, and the replay's note."""
        assert self.cluster is not None
        nodes = [self.cluster.node(i) for i in plan["targets"][:count]]
        value: dict[str, Any] = {"target": plan["target"], "targets": [n.node_id for n in nodes], "roles": self.roles(nodes)}
        if "partition" in plan:
            value["partition"] = plan["partition"]
        value["step"] = step
        if plan.get("replay") is not None:
            value["replay"] = plan["replay"]
        return nodes, value

    def resolve(self, then: dict[str, Any], anchor: float, partition: int | None, exclude: set[int],
                nobody: Callable[[Roles | None, int | None], str]) -> tuple[Any, dict[str, Any]]:
        """A later step's broker, at its moment: `after_s` past `anchor`, the broker a replay names, or
        the partition's leader as the live brokers name it (none of `exclude`), looked for during
        `within_s` and struck `wait_s` after it is seen. Returns the node (None: nobody, with `why`
        in the fields, from `nobody(last look, leader seen)`) and the fields its event records:
        targets, roles, and `after_s`, the seconds from the anchor to the strike."""
        assert self.cluster is not None
        steps.wait_until(anchor + float(then.get("after_s") or 0.0))
        who = then.get("who")
        if who is None:
            return None, {"targets": [], "roles": {}, "why": then.get("why") or "nobody to strike"}
        if not isinstance(who, str):  # a replay names the broker that the original resolved
            node = self.cluster.node(int(who))
            return node, {"targets": [node.node_id], "roles": {str(node.node_id): []},
                          "after_s": round(time.monotonic() - anchor, 3), "replay": "recorded targets"}
        polled = steps.wait_leader(self.fresh_look, lambda look: steps.leader_in(look, partition),
                                   lambda leader: leader >= 0 and leader not in exclude,
                                   float(then.get("within_s") or 0.0), self.poll_s)
        if not polled.ok:
            return None, {"targets": [], "roles": {}, "why": nobody(polled.value, polled.leader)}
        steps.wait_until(time.monotonic() + float(then.get("wait_s") or 0.0))
        node = self.cluster.node(polled.leader)  # type: ignore[arg-type]
        return node, {"targets": [node.node_id], "roles": polled.value.of([node]),
                      "after_s": round(time.monotonic() - anchor, 3)}

    # --- looking -----------------------------------------------------------------------------------
    def live_views(self) -> Any:
        """Every broker not held down by this nemesis, asked for its metadata: a killed broker's
        bootstrap would hold each poll for the full ask timeout."""
        from harness.cluster.metadata_views import collect_views

        assert self.cluster is not None
        live = {b.node_id: f"127.0.0.1:{b.host_port}" for b in self.brokers if b.node_id not in self.victims}
        return collect_views(live, timeout_s=2.0, rounds=2)

    def fresh_look(self) -> Roles:
        assert self.cluster is not None
        return self.observe(self.topic, views=self.live_views)

    def wait_until(self, deadline: float) -> None:
        steps.wait_until(deadline)

    @staticmethod
    def partition_of(aimed: str | None) -> int | None:
        return int(aimed.rsplit("-", 1)[1]) if aimed else None
