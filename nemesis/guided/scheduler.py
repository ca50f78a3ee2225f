"""`--schedule guided`: a fault schedule that steers toward abstract states not seen before.

Design: Mallory's (Meng et al., CCS 2023) Q-learning, over this harness's abstract states
(nemesis/guided/state.py). Each package decides for itself on its own thread, at the random
schedule's cadence, sharing one Q table:

- the state s is the coarse `decision_state` the run's StateWatch sees when the decision is made;
- an action is (start the package with one of its targets, or stop it) × how long to let it act
  before the package's next decision, one of DELAYS × the nemesis interval (mean 1.0, as the random
  schedule's gaps); the fault strikes at once;
- the reward of an action, counted when the next decision comes: n = the sum over every partition
  state and transition first seen in this run since the action of 1/sqrt(1 + N), N being how often
  earlier guided runs of the store saw it (the coverage map; Mallory's count-based novelty, so a
  state no run has seen counts 1 and a common one almost nothing), squashed to r = n / (1 + n),
  below 1;
- Q(s, a) += ALPHA (r + GAMMA max Q(s', ·) − Q(s, a)); an action never tried in a state is worth
  OPTIMISM = 1 / (1 − GAMMA), more than any return can be, so every action of a state is tried
  before any is repeated; otherwise the best is taken, and with probability EPSILON a random one.
  The Q table persists in the coverage map, so a store's later runs start where the earlier ones
  stopped.

Design 3 (2026-11-26). Design 1 summed n unsquashed against an optimism of 1.0: one fault that
brought a dozen new states made its action worth more than any untried one, and design 1's second
run on 0.10.2.2 (20261126T020431-98745b) spent its first 34 s starting and stopping the same
partition 17 times, a second apart, for no reward. Design 2 fixed that but still made one decision
at a time for every package, with delays of 0.1-1.2 intervals: 22 faults in 120 s against the
random schedule's 35-39. Design 3 gives each package its own decisions at the random cadence.
Q values of another design in the coverage map are not loaded; the counts of states and
transitions are. The novelty first seen since a package's last action is credited to that action,
whichever package caused it (shared credit: the simplest assignment for concurrent faults).

Why Q-learning and not Mallory's simpler power schedule: the KIPs' bugs need two faults in order
with the right gap (a leader killed, then within the 6 s ZooKeeper session the replica that will
be elected next), and the second fault's value shows only in the state the first one made. A
power schedule scores single faults; Q values carry the reward back one decision (GAMMA).

Like the random schedule, a package holds one start at a time and alternates start and stop
(design 9, below). No step names a role that only exists mid-sequence (heir's "the replica it will
elect next"), so `heir`, `transfer`, `flap` and `rejoin` are refused.

Design 4 (2026-11-26): the same learning, new timing. Design 3 decided at fixed moments, 5-15 s
apart per package, and guided found a loss in 1 of 10 runs on 0.10.2.2 against random's 2 of 10
(docs/guided.md): the windows the KIPs' bugs need (a follower just restarted and truncated, its
leader still up) last a second or two, and a decision at a fixed moment rarely falls in one. Now a
package also decides the moment the decision state gains a log flag it did not have at that
package's last decision (REACT_FLAGS: a truncation, an ISR change, a restart...), as Mallory
decides at each observation. The budget stays the random schedule's: each package earns one
decision per nemesis interval (a token, at most TOKEN_CAP saved), and every decision, at its
chosen delay or on a state change, spends one; so guided acts no more often than random does on
average, only at other moments. One package reacts to a change, the one whose best action is
worth most there (ties by name), and a flag that made one package react makes no other react
while it stays in the state (the abstraction's WINDOW_S), so that three packages do not all strike
at one flag; a package reacts at most once per REACT_MIN_S.

Design 6 (2026-11-28): the same timing, a second reward. Novelty alone left guided at random's
rate (design 4: 3 of 10 on 0.10.2.2 each way, covering 0.87x random's states), and it fades as
the map grows: a state earlier runs saw often is worth almost nothing, whether or not it is where
writes get lost. Design 6 also rewards the moment acknowledged writes are at risk (AtRisk in
state.py: a broker elected a partition's leader, by the logs, at most 8 s after it truncated that
partition), the state in which high-watermark truncation lost writes before KIP-101. It says
nothing of which faults lead there. r = (n / (1 + n) + min(1, k)) / 2, with k the times writes
were at risk since the action: below 1 as before, and at least 0.5 for a risk whatever the
novelty, so the squash cannot hide it behind a burst of new states. Measured against random, 10
seeds each side by side on 0.10.2.2 (2026-11-28): 2 finds in 10 each, 0.83x random's states, and
fewer risks than random's runs (11 against 18): no better, no worse (docs/guided.md).

Design 7 (2026-11-28): the same learning, a sharper risk (nemesis/guided/risk.py). Design 6's rule
fired in runs that diverged and runs that did not alike; the new one asks whether a fault kept
the truncated follower from its leader and whether it was back in the ISR before its election.
Read offline from 37 runs, it fired in 13 runs, 7 of which diverged, and in none of the other 24.
Measured against random, 10 seeds each side by side on 0.10.2.2 (2026-11-28): 1 find against 0,
0.89x random's states, and again fewer risks than random's runs (3 against 11) (docs/guided.md).

Design 8 (2026-11-28, reverted): the same risk, credited to its cause. The watch names the
packages whose faults cut the elected follower off, and when; each such package's last start
before then had its value moved toward twice OPTIMISM, so that it outvalued any untried action and
was taken again when its state recurred; the step reward was novelty alone. Measured against
random, 10 seeds each side by side on 0.10.2.2: 1 find against 3, 0.77x random's states, 4 risks
against 5 (docs/guided.md "Design 8"). The credit reached the right start (a pause of the old
leader, 4 times in one run), but only one run of ten had a risk to credit and one decision of 360
was made on a value above OPTIMISM: too rare a reward for ten runs to learn from.

Design 9 (2026-11-28): one start at a time, as the random schedule. Designs 3 to 8 let kill and
pause hold two starts each (kill a leader, then a leader again), hoping for heir's double kill.
Counted over the fault phases of the 0.10.2.2 sweeps of designs 4, 6, 7 and 8 (bench/guided_holds.py):
guided spent 21-28 % of the phase with two or more brokers killed or paused, random 3-5 %; 22-39 %
with none down against random's 44-46 %; 22-25 % with a network partition against 29-33 %; and its
runs saw fewer writes at risk (design 6: 11 against 18; 7: 3 against 11; 8: 4 against 5).
A start drawn among untried actions was three times as likely as a stop (three
targets against one stop), so the second start was the rule, not the aim. Design 9 keeps the
states, the reward, the reactions and the learning, and lets each package hold one start, so
that guided and random differ only in what they choose and when. Measured against random, 10
seeds each side by side on 0.10.2.2 (2026-11-28): 2 finds against 2, 0.88x random's states, two
brokers down 13 % of the phase against 5 %, and writes at risk in 2 runs against 4 (docs/guided.md).

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
from nemesis.schedule import FaultEvent, package_rng

log = logging.getLogger("nemesis")

REFUSED = ("heir", "transfer", "flap", "rejoin")  # recipes: sequences written after the bugs were known
# × the nemesis interval: from a package's action to its next decision. They span the random
# schedule's gaps (uniform 0.5-1.5 intervals) with the same mean, 1.0: design 2 chose among 0.1-1.2
# for one decision stream and struck 22 faults in 120 s where the random schedule struck 35-39
# (0.10.2.2, 2026-11-26), so guided lost on budget before it could win on choices.
DELAYS = (0.5, 0.8, 1.2, 1.5)
HOLD_LIMIT = 3.0  # × the interval: a fault held longer is stopped without asking (the run goes on)
DESIGN = 9  # the decision streams and moments, the reward's scale, the optimism (the module docstring); kept with the Q table
ALPHA, GAMMA, EPSILON = 0.3, 0.5, 0.1
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
                if self._tokens[package] >= 1.0:
                    if now_s >= self._decide_at[package]:
                        return self.decide(package, now_s, watch)
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

    # --- deciding -------------------------------------------------------------------------------
    def actions(self, package: str) -> list[str]:
        values = self.choices[package][1]
        if self.held[package]:  # one start at a time (design 9): a package that holds one may only stop it
            return [f"stop:{package}@{d}" for d in DELAYS]
        return [f"start:{package}:{v}@{d}" for v in values for d in DELAYS]

    def value(self, state: str, action: str) -> float:
        return self.q.get(state, {}).get(action, OPTIMISM)

    def pick(self, tied: list[str], rng: random.Random) -> str:
        """One of equally valued actions: a move (a start with its target, or the stop) first, then its
        delay, so that each target is as likely as another whatever its number of delays."""
        moves = sorted({a.split("@")[0] for a in tied})
        move = rng.choice(moves)
        return rng.choice([a for a in tied if a.split("@")[0] == move])

    def decide(self, package: str, now_s: float, watch: Any, on: str = "its delay") -> FaultEvent:
        rng = self.rngs[package]
        self._tokens[package] -= 1.0
        self._decided_at[package] = now_s
        state = watch.decision_state() if watch is not None else "unobserved"
        if watch is not None:
            self._novel += [1.0 / math.sqrt(1 + self.prior.count(x)) for x in watch.take_fresh()]
            take_risky = getattr(watch, "take_risky", None)
            self._risky += len(take_risky()) if take_risky is not None else 0
        novelty = sum(self._novel[self._mark.get(package, 0):])  # first seen since this package's last action
        self._mark[package] = len(self._novel)
        risky = self._risky - self._risk_mark.get(package, 0)  # writes at risk since this package's last action
        self._risk_mark[package] = self._risky
        reward = round((novelty / (1.0 + novelty) + min(1, risky)) / 2, 4)
        actions = self.actions(package)
        if package in self._last:
            s, a = self._last[package]
            best = max((self.value(state, b) for b in actions), default=0.0)
            old = self.value(s, a)
            self.q.setdefault(s, {})[a] = round(old + ALPHA * (reward + GAMMA * best - old), 4)
        starts = self.held[package]
        if starts and now_s - starts[0] > HOLD_LIMIT * self.interval_s:
            action, why = f"stop:{package}@{DELAYS[0]}", "held too long"
        elif rng.random() < EPSILON:
            action, why = rng.choice(actions), "explore"
        else:
            top = max(self.value(state, a) for a in actions)
            action, why = self.pick([a for a in actions if self.value(state, a) == top], rng), "best"
        self._last[package] = (state, action)
        what, delay = action.rsplit("@", 1)
        parts = what.split(":", 2)  # start:kill:leader, or stop:kill
        kind, choice = parts[0], parts[2] if len(parts) == 3 else ""
        at_s = round(now_s, 3)
        self._decide_at[package] = now_s + float(delay) * self.interval_s
        params: dict[str, Any] = {}
        key = self.choices[package][0]
        if kind == "start":
            starts.append(at_s)
            if key is not None:
                params[key] = choice
        else:
            self.held[package] = []
        self.decisions.append({"at_s": at_s, "package": package, "state": state, "action": action, "why": why,
                               "on": on, "q": round(self.value(state, action), 4), "reward_of_previous": reward,
                               "at_risk_since_previous": risky})
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
                "design": f"q-learning {DESIGN}", "react_flags": sorted(REACT_FLAGS), "writes_at_risk": self._risky, "alpha": ALPHA, "gamma": GAMMA, "epsilon": EPSILON, "delays_x_interval": list(DELAYS)}
