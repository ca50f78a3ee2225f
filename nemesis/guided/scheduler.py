"""`--schedule guided`: a fault schedule that steers toward abstract states not seen before.

Design: Mallory's (Meng et al., CCS 2023) Q-learning, over this harness's abstract states
(nemesis/guided/state.py). Each package decides for itself on its own thread, at the random
schedule's cadence, sharing one Q table:

- the state s is the coarse `decision_state` the run's StateWatch sees when the decision is made;
- an action is a start of the package with one of its targets, or its stop; the fault strikes at
  once, and the package's next decision comes a delay later drawn as the random schedule's gaps
  (uniform DELAY_RANGE × the nemesis interval);
- the reward of an action, counted when the next decision comes: n = the sum over every partition
  state and transition first seen in this run since the action of 1/sqrt(1 + N), N being how often
  earlier guided runs of the store saw it (the coverage map; Mallory's count-based novelty, so a
  state no run has seen counts 1 and a common one almost nothing), squashed to r = n / (1 + n),
  below 1, averaged with the danger: 1 if acknowledged writes were at risk since the action
  (nemesis/guided/risk.py), else CUT_REWARD if the package's own fault made a cut, the step before
  a risk (design 11), else 0;
- Q(s, a) += ALPHA (r + GAMMA max Q(s', ·) − Q(s, a)); an action not yet tried in a state is
  worth its mean over the states where it was tried, and one never tried anywhere OPTIMISM =
  1 / (1 − GAMMA), more than any return can be; the best is taken, ties drawn, and with probability
  EPSILON a random one.
  The Q table persists in the coverage map, so a store's later runs start where the earlier ones
  stopped.

The design history (designs 1 to 9, each measured against random on 0.10.2.2) is in
docs/guided.md, "The scheduler". In short: design 3 gave each package its own decisions at the
random cadence; design 4 also decides the moment the decision state gains a log flag
(REACT_FLAGS), within random's budget of one decision per interval (TOKEN_CAP saved); design 6
added a reward for writes at risk, r = (n / (1 + n) + min(1, k)) / 2 with k the risks since the
action; design 7 sharpened the risk (nemesis/guided/risk.py); design 9 holds one start per
package at a time, as the random schedule does. Q values of another design in the coverage map
are not loaded; the counts of states and transitions are. The novelty first seen since a
package's last action is credited to that action, whichever package caused it.

Why Q-learning and not Mallory's simpler power schedule: the KIPs' bugs need two faults in order
with the right gap (a leader killed, then within the 6 s ZooKeeper session the replica that will
be elected next), and the second fault's value shows only in the state the first one made. A
power schedule scores single faults; Q values carry the reward back one decision (GAMMA).

Design 10 (2026-11-28): learn in the budget. Design 9's table after its ten runs on 0.10.2.2 held
325 values in 144 states, every one below OPTIMISM (1.73-2.00), and 85 of the states had one
action tried of the 12-16 (a start's target × 4 delays): an untried action was always preferred,
so in 120 s runs guided never exploited what it had learned and chose as random does, in another
order. Design 10 makes an action the move alone (a start with its target, or the stop; 1-4 per
package), draws the delay as the random schedule draws its gaps (uniform 0.5-1.5 intervals, from
the package's stream), and values an action not yet tried in a state at its mean value over the
states where it was tried (what that fault has been worth elsewhere), OPTIMISM only when it was
never tried anywhere. And it ends a lockstep that designs 4 to 9 had: a decision at its delay
waited for a token, and every package's tokens filled on one clock from the phase's start, so the
packages decided together on the interval's grid (25 % of design 9's faults within 0.3 s of a
multiple of the interval, random's 8 %; 50 % in design 10's first run before this;
bench/guided_holds.py). Another package's fault came 3-8 s after a kill's restart (a truncated
follower's window) after 31 % of design 9's kill stops against random's 47 %, though after 49 % of
design 8's against 44 %. Now a decision comes at its delay whatever the tokens; tokens pay
only for reactions, and every decision spends one (a debt, when it had none). Everything else is design 9's.
Measured against random, 10 seeds each side by side on 0.10.2.2 (2026-11-28): 1 find against 2,
1.09x random's states (the first design above 1.0x), learned values used in about 90 % of the
decisions from the second run on, but the table flat (each action's mean 1.47-1.53): novelty pays
every fault alike (docs/guided.md "Design 10 against random").

Design 11 (2026-11-28): design 10 with the danger above. Design 10's table was flat because
novelty pays every fault alike and a risk came in too few runs to tell faults apart; a cut comes in
every run, and it is credited to the package whose fault made it (named by the cut), not to
whichever package decided last. Measured against random, 10 seeds each side by side on 0.10.2.2
(2026-11-28): 3 finds against 0 (p = 0.21; random found 2 of the same seeds in design 10's sweep),
1.00x random's states; the table still flat (each action's mean 1.51-1.57), a cut credited to 32 of
187 starts (docs/guided.md "Design 11 against random").

Design 12 (2026-11-29): design 11 with a strike that is not learned (STRIKE_PACKAGES, above):
a cut made by a partition alone makes kill, else pause, strike that partition's leader at once, so
that the election the cut needs comes while the truncated follower is still in the ISR. It names
no role beyond `leader` aimed at a partition the watch named; random has no such rule.

No step names a role that only exists mid-sequence (heir's "the replica it will elect next"), so
`heir`, `transfer`, `flap` and `rejoin` are refused.

Every choice draws from its package's seeded random stream and is recorded (config.json
nemesis_config.guided.decisions: the state, the action, its Q value, the reward); the executed
schedule, with the brokers each fault resolved, is what `run --replay` repeats. The same seed and
the same observations give the same choices (tests/test_guided_scheduler.py); a second live run
of a seed observes a different cluster, so it may choose differently: replay it instead.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from nemesis.guided import coverage
from nemesis.guided.state import WINDOW_S
from nemesis.schedule import GAP_RANGE, FaultEvent, package_rng

log = logging.getLogger("nemesis")

REFUSED = ("heir", "transfer", "flap", "rejoin")  # recipes: sequences written after the bugs were known
# × the nemesis interval: from a package's action to its next decision. They span the random
# schedule's gaps (uniform 0.5-1.5 intervals) with the same mean, 1.0: design 2 chose among 0.1-1.2
# for one decision stream and struck 22 faults in 120 s where the random schedule struck 35-39
# (0.10.2.2, 2026-11-26), so guided lost on budget before it could win on choices.
DELAY_RANGE = GAP_RANGE  # design 10: drawn, as the random schedule's gaps; designs 3-9 chose among 0.5, 0.8, 1.2, 1.5
HOLD_LIMIT = 3.0  # × the interval: a fault held longer is stopped without asking (the run goes on)
DESIGN = 12  # the decision streams and moments, the reward's scale, the optimism (the module docstring); kept with the Q table
ALPHA, GAMMA, EPSILON = 0.3, 0.5, 0.1
# Design 11: a cut (nemesis/guided/risk.py: a follower truncated below an acknowledged offset and kept
# from its leader by a fault) pays the action of each package whose fault made it this much of a risk's
# share. Replayed offline through the watch, design 10's 20 runs on 0.10.2.2 each had 4-22 cuts below an
# acknowledged offset and 0-5 risks (risks in 11 of them); live, design 11's 20 runs counted 2-28 cuts
# each: a cut comes in every run, a risk in half.
CUT_REWARD = 0.5
# Design 12: a strike, not learned. When the watch reads a cut made by a partition alone (a follower
# truncated below an acknowledged offset, its leader alive but across the cut), the first of these
# packages free to act (holding no fault, a decision in its budget, none in the last REACT_MIN_S)
# strikes that partition's leader at once, within STRIKE_WITHIN_S of the cut being read: the
# leader's loss of its ZooKeeper session or its controller lease then elects among the ISR, which
# still names the truncated follower until the leader drops it (replica.lag.time.max.ms, 10 s by
# default on these versions). Offline and live, designs 7 and 11 read 2-28 cuts a run, and the
# loss came only when an election followed one (nemesis/guided/risk.py): the Q table, flat after
# ten runs, never learned to follow a cut with its leader's fall. Measured on 0.10.2.2 (2026-11-29,
# docs/guided.md "Design 12"): 4 strikes in 10 runs (45 cuts, most made by kills and pauses, whose
# elections come by themselves), no find after one; 3 finds of 10 against random's 2.
STRIKE_PACKAGES = ("kill", "pause")
STRIKE_WITHIN_S = 5.0
OPTIMISM = 1.0 / (1.0 - GAMMA)  # the largest return rewards below 1 can add up to
# Design 4: a decision state that gains one of these flags makes a package decide at once (one
# package per change, at most once per REACT_MIN_S each), paid from its budget of one decision per
# interval, of which it saves at most TOKEN_CAP.
REACT_FLAGS = frozenset({"trunc", "trunc-hw", "trunc-epoch", "truncation-refused", "shrink", "expand", "unclean",
                         "elr", "restart"})
REACT_MIN_S = 1.0
TOKEN_CAP = 2.0
POLL_S = 0.2  # how often a waiting package looks at the state (the watch ticks once a second)
# The start parameter each package's nemesis takes from its params, and where its choices are.
CHOICE_OF = {"partition": ("shape", "shapes"), "clock": ("mode", "modes")}


def refuse_recipes(packages: list[str]) -> None:
    refused = [p for p in packages if p in REFUSED]
    if refused:
        raise HarnessError(f"--schedule guided uses generic fault packages only; {', '.join(refused)} "
                           f"{'is a recipe' if len(refused) == 1 else 'are recipes'} written after the bug "
                           "it finds was known.",
                           hint="drop them from --nemesis (kill, partition, pause, clock, power, disk), or use --schedule random")


def flags_of(state: str) -> set[str]:
    """The log flags of a decision state (its last field: `kill|isr2|trunc-hw,shrink`)."""
    return set(state.rsplit("|", 1)[-1].split(",")) - {"-", ""}


def choices_of(name: str, nemesis: Any) -> tuple[str | None, tuple[str, ...]]:
    """(param key, its values) a start of this package chooses among: kill's targets, partition's shapes..."""
    key, attr = CHOICE_OF.get(name, ("target", "targets"))
    values = getattr(nemesis, attr, None)
    return (key, tuple(values)) if values else (None, ("-",))


class GuidedScheduler:
    name = "guided"
    observes = True  # the runner starts its StateWatch (nemesis/guided/watch.py)

    def __init__(self, nemeses: dict[str, Any], time_limit_s: float, interval_s: float, seed: int,
                 coverage_path: Path | str | None = None, version: str = "unknown") -> None:
        refuse_recipes(list(nemeses))
        self.time_limit_s, self.interval_s, self.seed, self.version = time_limit_s, interval_s, seed, version
        self.choices = {name: choices_of(name, n) for name, n in nemeses.items()}
        # One seeded stream per package (as the random schedule has), so that the packages' threads
        # never draw from one stream in an order the machine's load decides.
        self.rngs = {p: random.Random(f"{seed}:guided:{p}") for p in nemeses}
        self.coverage_path = Path(coverage_path) if coverage_path is not None else None
        self.prior = coverage.read(self.coverage_path, version) if self.coverage_path else coverage.VersionCoverage()
        self.q: dict[str, dict[str, float]] = ({s: dict(a) for s, a in self.prior.q.items()}
                                               if self.prior.q_design == DESIGN else {})
        self.held: dict[str, list[float]] = {p: [] for p in nemeses}  # start times of the faults each holds
        self.decisions: list[dict[str, Any]] = []
        self.saved: dict[str, Any] | None = None
        self._last: dict[str, tuple[str, str]] = {}  # package -> (state, action) of its last decision
        self._novel: list[float] = []  # the novelty of each item the watch saw first, in order
        self._mark: dict[str, int] = {}  # package -> len(_novel) at its last decision
        self._risky = 0  # times writes were at risk so far (designs 6 and 7)
        self._risk_mark: dict[str, int] = {}  # package -> _risky at its last decision
        self._cuts_owed = {p: 0 for p in nemeses}  # package -> cuts its faults made since its last decision
        self._cond = threading.Condition()
        self._closed = False
        self._began: float | None = None
        # When each package's next decision is due (seconds into the fault phase): its first at the
        # random schedule's own first moment for the seed, then its previous action's delay later.
        self._decide_at = {p: package_rng(seed, p, "timing").uniform(0, interval_s) for p in nemeses}
        self._tokens = {p: 1.0 for p in nemeses}  # decisions a package may make now (design 4's budget)
        self._filled_at: dict[str, float] = {}  # package -> when its tokens were last topped up
        self._decided_at: dict[str, float] = {}  # package -> when it last decided
        self._reacted_at: dict[str, float] = {}  # flag -> when a package last reacted to it
        self._sites: list[tuple[float, int]] = []  # design 12: (read at, partition) of cuts not yet struck

    # --- the Scheduler protocol ----------------------------------------------------------------
    def planned(self) -> list[FaultEvent]:
        return []  # decided as the run goes; config.json gets the executed schedule

    def next(self, package: str, now_s: float, observer: Any = None) -> FaultEvent | None:
        """This package's next event, decided when it is due (its previous action's delay after that
        action struck) from what the watch sees then; it strikes at once."""
        watch = getattr(observer, "watch", None)
        with self._cond:
            if self._began is None:
                self._began = time.monotonic() - now_s
            while True:
                now_s = time.monotonic() - self._began
                if self._closed or now_s >= self.time_limit_s:
                    return None
                self.refill(package, now_s)
                site = self._strike_site(package, now_s, watch)
                if site is not None:
                    return self.decide(package, now_s, watch, on="cut", aim=site)
                if now_s >= self._decide_at[package]:  # its delay: random's cadence, tokens or not (design 10)
                    return self.decide(package, now_s, watch)
                if self._tokens[package] >= 1.0:
                    who, flags = self._reaction(now_s, watch)
                    if who == package:
                        self._reacted_at.update(dict.fromkeys(flags, now_s))
                        return self.decide(package, now_s, watch, on="state change")
                self._cond.wait(POLL_S)

    def close(self) -> None:
        """The fault phase is over: waiting threads return None."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # --- when (design 4) ---------------------------------------------------------------------------
    def refill(self, package: str, now_s: float) -> None:
        """One decision earned per interval of the fault phase, at most TOKEN_CAP saved."""
        last = self._filled_at.get(package, now_s)
        self._tokens[package] = min(TOKEN_CAP, self._tokens[package] + (now_s - last) / self.interval_s)
        self._filled_at[package] = now_s

    def reactor(self, now_s: float, watch: Any) -> str | None:
        """The package that decides now because the state gained a flag since its last decision: of
        those with a decision to spend and none in the last REACT_MIN_S, the one whose best action
        is worth most in the state (ties by name). None when nothing changed that way."""
        return self._reaction(now_s, watch)[0]

    def _reaction(self, now_s: float, watch: Any) -> tuple[str | None, set[str]]:
        """(reactor(), the new flags it reacts to), from one look at the state."""
        if watch is None:
            return None, set()
        state = watch.decision_state()
        now_flags = {f for f in flags_of(state) & REACT_FLAGS if now_s - self._reacted_at.get(f, -WINDOW_S) >= WINDOW_S}
        ready = [p for p in sorted(self.choices) if p in self._last and self._tokens[p] >= 1.0
                 and now_s - self._decided_at.get(p, -REACT_MIN_S) >= REACT_MIN_S
                 and now_flags - flags_of(self._last[p][0])]
        if not ready:
            return None, set()
        # max keeps the first of equals: `ready` is sorted, so ties go by name
        who = max(ready, key=lambda p: max((self.value(state, a) for a in self.actions(p)), default=0.0))
        return who, now_flags - flags_of(self._last[who][0])

    def _strike_site(self, package: str, now_s: float, watch: Any) -> str | None:
        """Design 12: "<topic>-<p>" whose leader this package strikes now, or None. A cut made by a
        partition alone, read at most STRIKE_WITHIN_S ago, is struck once, by the first package of
        STRIKE_PACKAGES free to act that has `leader` among its targets."""
        take = getattr(watch, "take_cut_sites", None)
        if take is not None:
            self._sites += [(now_s, p) for p, _, _, by in take() if tuple(by) == ("partition",)]
        self._sites = [x for x in self._sites if now_s - x[0] <= STRIKE_WITHIN_S]
        if (not self._sites or package not in STRIKE_PACKAGES or self.held[package] or self._tokens[package] < 1.0
                or f"start:{package}:leader" not in self.actions(package) or getattr(watch, "topic", None) is None
                or now_s - self._decided_at.get(package, -REACT_MIN_S) < REACT_MIN_S):
            return None
        _, partition = self._sites.pop(0)
        return f"{watch.topic}-{partition}"

    @property
    def strikes(self) -> int:
        """Design 12's strikes so far: the decisions a cut brought."""
        return sum(1 for d in self.decisions if d["on"] == "cut")

    # --- deciding -------------------------------------------------------------------------------
    def actions(self, package: str) -> list[str]:
        if self.held[package]:  # one start at a time (design 9): a package that holds one may only stop it
            return [f"stop:{package}"]
        return [f"start:{package}:{v}" for v in self.choices[package][1]]

    def value(self, state: str, action: str) -> float:
        """Q(state, action); not yet tried there, the action's mean over the states where it was
        (design 10: what this fault has been worth elsewhere); never tried, OPTIMISM."""
        row = self.q.get(state)
        if row is not None and action in row:
            return row[action]
        elsewhere = [acts[action] for acts in self.q.values() if action in acts]
        return round(sum(elsewhere) / len(elsewhere), 4) if elsewhere else OPTIMISM

    def decide(self, package: str, now_s: float, watch: Any, on: str = "its delay", aim: str | None = None) -> FaultEvent:
        rng = self.rngs[package]
        # No floor: a decision at its delay without a token is a debt that later reactions wait out,
        # so the package still decides once per interval on average, as random (with a floor at 0,
        # design 10's first run with it made 43 decisions where random's runs strike 36-39 faults).
        self._tokens[package] -= 1.0
        self._decided_at[package] = now_s
        state = watch.decision_state() if watch is not None else "unobserved"
        if watch is not None:
            self._novel += [1.0 / math.sqrt(1 + self.prior.count(x)) for x in watch.take_fresh()]
            take_risky = getattr(watch, "take_risky", None)
            self._risky += len(take_risky()) if take_risky is not None else 0
            take_cuts = getattr(watch, "take_cuts", None)
            for by in (take_cuts() if take_cuts is not None else []):
                for cutter in by:
                    if cutter in self._cuts_owed:
                        self._cuts_owed[cutter] += 1
        novelty = sum(self._novel[self._mark.get(package, 0):])  # first seen since this package's last action
        self._mark[package] = len(self._novel)
        risky = self._risky - self._risk_mark.get(package, 0)  # writes at risk since this package's last action
        self._risk_mark[package] = self._risky
        cuts, self._cuts_owed[package] = self._cuts_owed[package], 0
        danger = max(min(1, risky), CUT_REWARD * min(1, cuts))  # a risk, else the step before one (design 11)
        reward = round((novelty / (1.0 + novelty) + danger) / 2, 4)
        actions = self.actions(package)
        if package in self._last:
            s, a = self._last[package]
            best = max((self.value(state, b) for b in actions), default=0.0)
            old = self.value(s, a)
            self.q.setdefault(s, {})[a] = round(old + ALPHA * (reward + GAMMA * best - old), 4)
        starts = self.held[package]
        values = {a: self.value(state, a) for a in actions}  # once: a value not tried here averages the table
        if aim is not None:  # design 12's strike (_strike_site): the leader of the cut partition
            action, why = f"start:{package}:leader", f"strike {aim}'s leader"
        elif starts and now_s - starts[0] > HOLD_LIMIT * self.interval_s:
            action, why = f"stop:{package}", "held too long"
        elif rng.random() < EPSILON:
            action, why = rng.choice(actions), "explore"
        else:
            top = max(values.values())
            action, why = rng.choice([a for a in actions if values[a] == top]), "best"
        self._last[package] = (state, action)
        parts = action.split(":", 2)  # start:kill:leader, or stop:kill
        kind, choice = parts[0], parts[2] if len(parts) == 3 else ""
        at_s = round(now_s, 3)
        delay = round(rng.uniform(*DELAY_RANGE), 3)  # × the interval, as the random schedule's gaps
        self._decide_at[package] = now_s + delay * self.interval_s
        params: dict[str, Any] = {}
        key = self.choices[package][0]
        if kind == "start":
            starts.append(at_s)
            if key is not None:
                params[key] = choice
            if aim is not None:
                params["partition"] = aim
        else:
            self.held[package] = []
        self.decisions.append({"at_s": at_s, "package": package, "state": state, "action": action, "why": why,
                               "on": on, "q": round(values[action], 4), "delay_x_interval": delay,
                               "reward_of_previous": reward,
                               "at_risk_since_previous": risky, "cuts_since_previous": cuts})
        log.info("guided: %s in state %s (%s, on %s)", action, state, why, on)
        return FaultEvent(at_s, package, kind, params)

    # --- the end of the fault phase ------------------------------------------------------------------
    def finish(self, observer: Any) -> None:
        """Add this run's states and transitions, and the Q table, to the store's coverage map."""
        watch = getattr(observer, "watch", None)
        if self.coverage_path is None or watch is None or watch.ticks == 0:
            return
        states, transitions = watch.snapshot()
        new_states = sum(1 for s in states if s not in self.prior.states)
        new_transitions = sum(1 for t in transitions if t not in self.prior.transitions)
        entry = coverage.add_run(self.coverage_path, self.version, states, transitions, self.q, DESIGN)
        self.saved = {"path": str(self.coverage_path), "version": self.version, "runs_before": self.prior.runs,
                      "states_before": len(self.prior.states), "transitions_before": len(self.prior.transitions),
                      "new_states": new_states, "new_transitions": new_transitions,
                      "states_after": len(entry.states), "transitions_after": len(entry.transitions)}

    def describe(self) -> dict[str, Any]:
        return {"seed": self.seed, "version": self.version, "decisions": list(self.decisions), "coverage": self.saved,
                "design": f"q-learning {DESIGN}", "react_flags": sorted(REACT_FLAGS), "writes_at_risk": self._risky, "cut_reward": CUT_REWARD, "strikes": self.strikes, "alpha": ALPHA, "gamma": GAMMA, "epsilon": EPSILON, "delay_range_x_interval": list(DELAY_RANGE)}
