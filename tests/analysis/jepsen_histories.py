"""Jepsen's published Kafka test histories (jepsen/test/jepsen/tests/kafka_test.clj), written in our
history format v1 as our own test data. The histories are facts; this code is ours.

Translation. Keys :x, :y are partitions 0, 1. Values are per key in Jepsen and unique per run here,
so each (key, symbol) gets its own int. A Jepsen op of one send is a `send`; of one poll, a
`poll`; an op of several micro-ops (sends, polls or both) is one `txn` whose `sends` and
`records` keep the micro-ops' order (our int- anomalies are scoped to a txn: Jepsen's multi-poll
and multi-send ops are its transactions). A send without an offset in Jepsen has a null offset.
"""

from __future__ import annotations

from typing import Any

KEYS = {"x": 0, "y": 1}


class Jepsen:
    """Builds a v1 history from Jepsen-style ops: op(process, type, [mops]) where a mop is
    ("send", key, sym) / ("send", key, (offset, sym)) or ("poll", {key: [(offset, sym), ...]})."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.ids: dict[tuple[str, str], int] = {}

    def v(self, key: str, sym: str) -> int:
        return self.ids.setdefault((key, sym), len(self.ids) + 1)

    def _add(self, process: int, type_: str, f: str, value: Any) -> int:
        i = len(self.events)
        self.events.append({"index": i, "time": i * 1000, "process": process, "type": type_, "f": f, "value": value})
        return i

    def op(self, process: int, type_: str, mops: list[tuple], invoke: bool = True, txn: bool = False) -> int:
        """Record the invoke (unless invoke=False: a completion whose invoke came earlier) and the
        completion, as a txn when `txn` or when it has several micro-ops; returns its index."""
        sends, records = [], []
        for mop in mops:
            if mop[0] == "send":
                _, k, v = mop
                off, sym = v if isinstance(v, tuple) else (None, v)
                sends.append({"key": KEYS[k], "value": self.v(k, sym), "offset": off, "epoch": None})
            else:
                for k, pairs in mop[1].items():
                    records += [{"key": KEYS[k], "offset": o, "value": self.v(k, s), "epoch": 0} for o, s in pairs]
        polls = [m for m in mops if m[0] == "poll"]
        if len(sends) == 1 and not polls and not txn:
            s = sends[0]
            if invoke:
                self._add(process, "invoke", "send", {"key": s["key"], "value": s["value"]})
            return self._add(process, type_, "send", s)
        if not sends and len(polls) == 1 and not txn:
            if invoke:
                self._add(process, "invoke", "poll", None)
            return self._add(process, type_, "poll", {"records": records} if type_ == "ok" else None)
        if invoke:
            self.invoke_txn(process, mops)
        return self._add(process, type_, "txn", {"sends": sends, "records": records})

    def reset(self, process: int, f: str, keys: list[str], type_: str = "ok") -> None:
        """Jepsen's {:f :assign/:subscribe, :value [k ...]}. Ours carries a seek: a subscribe always
        seeks the group's committed offsets; Jepsen's assign seeks nothing (null)."""
        value = {"keys": [KEYS[k] for k in keys], "seek": "committed" if f == "subscribe" else None}
        self._add(process, "invoke", f, value)
        self._add(process, type_, f, value)

    def invoke_txn(self, process: int, mops: list[tuple]) -> None:
        sends = [{"key": KEYS[m[1]], "value": self.v(m[1], m[2][1] if isinstance(m[2], tuple) else m[2])}
                 for m in mops if m[0] == "send"]
        self._add(process, "invoke", "txn", {"sends": sends, "records": []})


def int_nonmonotonic_send() -> list[dict]:
    """int-nonmonotonic-send-test: offsets directly out of order (c@3 then a@1 in one op), and an
    info op whose order (d then b) contradicts the offsets a poll read them at."""
    j = Jepsen()
    j.op(0, "ok", [("send", "x", (3, "c")), ("send", "x", (1, "a"))])
    j.op(0, "info", [("send", "y", "d"), ("send", "y", "b")])
    j.op(1, "info", [("send", "y", "c")])
    j.op(0, "ok", [("poll", {"y": [(2, "b"), (3, "c"), (4, "d")]})])
    return j.events


def int_send_skip() -> list[dict]:
    """int-send-skip-test: one op sends a@1 and c (offset unknown); another writer's b is read at
    2 and c at 3, so b landed between the op's two sends."""
    j = Jepsen()
    j.op(0, "ok", [("send", "x", (1, "a")), ("send", "x", "c")])
    j.op(1, "info", [("send", "x", "b")])
    j.op(2, "ok", [("poll", {"x": [(2, "b"), (3, "c")]})])
    return j.events


def int_poll_skip() -> list[dict]:
    """int-poll-skip-test: one op reads x 1 then 4 in one poll, another in two polls, while a
    third read shows offset 2 exists. The two reading ops are transactions here (see module doc)."""
    j = Jepsen()
    j.op(1, "info", [("send", "x", "a"), ("send", "x", "b"), ("send", "x", "d")])
    j.op(0, "ok", [("poll", {"x": [(1, "a"), (4, "d")]})], txn=True)
    j.op(0, "ok", [("poll", {"x": [(1, "a")]}), ("poll", {"x": [(4, "d")]})])
    j.op(0, "ok", [("poll", {"x": [(2, "b")]})])
    return j.events


def int_nonmonotonic_poll() -> list[dict]:
    """int-nonmonotonic-poll-test: one poll returns x 3 then 1; another op reads b c and then c
    again in its second poll."""
    j = Jepsen()
    j.op(0, "info", [("send", "x", "a"), ("send", "x", "b"), ("send", "x", "c")])
    j.op(0, "ok", [("poll", {"x": [(3, "c"), (1, "a")]})], txn=True)
    j.op(0, "ok", [("poll", {"x": [(2, "b"), (3, "c")]}), ("poll", {"x": [(3, "c")]})])
    return j.events


def precommitted_read() -> list[dict]:
    """precommitted-read-test: a txn sends x a@0 and its own poll returns it."""
    j = Jepsen()
    j.op(0, "ok", [("send", "x", (0, "a")), ("poll", {"x": [(0, "a")]})])
    return j.events


def g0() -> list[dict]:
    """g0-test: two ops each write x and y; x orders a before b, y orders b before a."""
    j = Jepsen()
    j.invoke_txn(0, [("send", "x", "a"), ("send", "y", "a")])
    j.invoke_txn(1, [("send", "x", "b"), ("send", "y", "b")])
    j.op(0, "ok", [("send", "x", (0, "a")), ("send", "y", (1, "a"))], invoke=False)
    j.op(1, "ok", [("send", "x", (1, "b")), ("send", "y", (0, "b"))], invoke=False)
    return j.events


def g1c_pure_wr() -> list[dict]:
    """g1c-pure-wr-test: t1 writes x a and reads t2's y b; t2 writes y b and reads t1's x a."""
    j = Jepsen()
    j.invoke_txn(0, [("send", "x", "a")])
    j.invoke_txn(1, [("send", "y", "b")])
    j.op(0, "ok", [("send", "x", (0, "a")), ("poll", {"y": [(0, "b")]})], invoke=False)
    j.op(1, "ok", [("send", "y", (0, "b")), ("poll", {"x": [(0, "a")]})], invoke=False)
    return j.events


def g1c_ww_wr() -> list[dict]:
    """g1c-ww-wr-test: t1 writes x a@0 and y c@2; t2 reads x a and writes y b@1 (before c)."""
    j = Jepsen()
    j.invoke_txn(0, [("send", "x", "a"), ("send", "y", "c")])
    j.invoke_txn(1, [("send", "y", "b")])
    j.op(0, "ok", [("send", "x", (0, "a")), ("send", "y", (2, "c"))], invoke=False)
    j.op(1, "ok", [("poll", {"x": [(0, "a")]}), ("send", "y", (1, "b"))], invoke=False)
    return j.events


# name -> (history, the anomaly Jepsen reports on it, its count there)
HISTORIES = {
    "int-nonmonotonic-send": (int_nonmonotonic_send, "int-nonmonotonic-send", 2),
    "int-send-skip": (int_send_skip, "int-send-skip", 1),
    "int-poll-skip": (int_poll_skip, "int-poll-skip", 2),
    "int-nonmonotonic-poll": (int_nonmonotonic_poll, "int-nonmonotonic-poll", 2),
    "precommitted-read": (precommitted_read, "precommitted-read", 1),
    "G0": (g0, "G0", 1),
    "G1c-pure-wr": (g1c_pure_wr, "G1c", 1),
    "G1c-ww-wr": (g1c_ww_wr, "G1c", 1),
}


# --- What consumers saw, even in a transaction that failed (issue 35 item 7) ----------------------
# Jepsen compares each poll's records with its process's read sequence whatever the op's outcome,
# but only `ok` ops move that sequence on (kafka.clj, poll-skip+nonmonotonic-cases-per-process:
# last-reads is updated for :ok only); and its version orders take every poll's records, :info and
# :fail ones included ("pollers ... are *always* supposed to emit safe data"). Assigns and
# subscribes keep the sequence of every key they still cover (select-keys).


def poll_skip(reset: str | None = None) -> list[dict]:
    """poll-skip-test: process 0 reads x 1 2, then 4, then 7, while others show 3 and 6 exist.
    reset: None; "xy" (the "with intermediate subscribe" case that still covers x: a subscribe
    [x y] before the read of 4, an assign [x y] before the read of 7); "y" (a subscribe [y] and an
    info assign [y]: x is dropped each time)."""
    j = Jepsen()
    j.op(0, "ok", [("poll", {"x": [(1, "a"), (2, "b")]})])
    j.op(1, "ok", [("poll", {"x": [(3, "c")]})])
    if reset:
        j.reset(0, "subscribe", ["x", "y"] if reset == "xy" else ["y"])
    j.op(0, "ok", [("poll", {"x": [(4, "d")]})])
    if reset:
        j.reset(0, "assign", ["x", "y"] if reset == "xy" else ["y"], "ok" if reset == "xy" else "info")
    j.op(2, "ok", [("send", "x", (6, "f"))])
    j.op(0, "ok", [("poll", {"x": [(7, "g")]})])
    j.op(3, "info", [("send", "x", s) for s in "abcdg"])
    return j.events


def nonmonotonic_poll(reset: tuple[str, list[str]] | None = None) -> list[dict]:
    """nonmonotonic-poll-test: process 0 reads x 1 2 3, then 2 3 4, with `reset` = (f, keys)
    between: a subscribe or assign of [x y] keeps x's sequence, of [y] drops it."""
    j = Jepsen()
    j.op(0, "ok", [("send", "x", s) for s in "abcd"])
    j.op(0, "ok", [("poll", {"x": [(1, "a"), (2, "b"), (3, "c")]})])
    if reset:
        j.reset(0, *reset)
    j.op(0, "ok", [("poll", {"x": [(2, "b"), (3, "c"), (4, "d")]})])
    return j.events


def _ints(j: Jepsen, n: int) -> None:
    """Process 0 sends x 0 .. n-1 at offsets 0 .. n-1 in one op (Jepsen's "a simple series of ints")."""
    j.op(0, "ok", [("send", "x", (i, str(i))) for i in range(n)])


def txn_abort_good() -> list[dict]:
    """poll-skip-test "txn abort" / "good": process 1 reads 0 (ok), then 1 2 in a txn that aborts,
    1 2 in one whose outcome is unknown, and 1 2 in one that commits: it rewound each time."""
    j = Jepsen()
    _ints(j, 3)
    j.op(1, "ok", [("poll", {"x": [(0, "0")]})], txn=True)
    for outcome in ("fail", "info", "ok"):
        j.op(1, outcome, [("poll", {"x": [(1, "1"), (2, "2")]})], txn=True)
    return j.events


def txn_abort_no_rollback() -> list[dict]:
    """poll-skip-test "txn abort" / "abort doesn't roll back": after reading 0 (ok) and 1 2 in an
    aborted txn, process 1 reads 3 4 in another aborted txn and then 5 (ok): it never rewound."""
    j = Jepsen()
    _ints(j, 6)
    j.op(1, "ok", [("poll", {"x": [(0, "0")]})], txn=True)
    j.op(1, "fail", [("poll", {"x": [(1, "1"), (2, "2")]})], txn=True)
    j.op(1, "fail", [("poll", {"x": [(3, "3"), (4, "4")]})], txn=True)
    j.op(1, "ok", [("poll", {"x": [(5, "5")]})], txn=True)
    return j.events


def txn_info_poll_skip() -> list[dict]:
    """poll-skip-test "txn abort" / "info can be a poll-skip": as above, but the txn that reads
    3 4 ends unknown (info), and nothing follows it."""
    j = Jepsen()
    _ints(j, 6)
    j.op(1, "ok", [("poll", {"x": [(0, "0")]})], txn=True)
    j.op(1, "fail", [("poll", {"x": [(1, "1"), (2, "2")]})], txn=True)
    j.op(1, "info", [("poll", {"x": [(3, "3"), (4, "4")]})], txn=True)
    return j.events


def duplicate_aborted_txns() -> list[dict]:
    """duplicate-test "aborted txns": x 0 is sent ok at offset 1, x 1 fails (at offset 2); a poll
    that fails returns 0 at 11 and 1 at 12. 0 sits at two offsets: a duplicate; 1's write never
    happened, so its one position is no duplicate. Jepsen's op is a failed :poll; ours is a
    failed txn of that one poll (only a txn's completion carries records when it is not ok)."""
    j = Jepsen()
    j.op(0, "ok", [("send", "x", (1, "0"))])
    j.op(0, "fail", [("send", "x", (2, "1"))])
    j.op(1, "fail", [("poll", {"x": [(11, "0"), (12, "1")]})], txn=True)
    return j.events


# name -> (history, {anomaly: the count Jepsen's test expects}); the anomalies not named are Jepsen
# asserting nothing about them, except txn-abort-good, where Jepsen expects no error at all.
READ_SEQUENCE_HISTORIES = {
    "poll-skip": (poll_skip, {"poll-skip": 2}),
    "poll-skip subscribe [x y], assign [x y]": (lambda: poll_skip("xy"), {"poll-skip": 2}),
    "poll-skip subscribe [y], assign [y] info": (lambda: poll_skip("y"), {"poll-skip": 0}),
    "nonmonotonic-poll": (nonmonotonic_poll, {"nonmonotonic-poll": 1}),
    "nonmonotonic-poll subscribe [x y]": (lambda: nonmonotonic_poll(("subscribe", ["x", "y"])), {"nonmonotonic-poll": 1}),
    "nonmonotonic-poll assign [x y]": (lambda: nonmonotonic_poll(("assign", ["x", "y"])), {"nonmonotonic-poll": 1}),
    "nonmonotonic-poll subscribe [y]": (lambda: nonmonotonic_poll(("subscribe", ["y"])), {"nonmonotonic-poll": 0}),
    "nonmonotonic-poll assign [y]": (lambda: nonmonotonic_poll(("assign", ["y"])), {"nonmonotonic-poll": 0}),
    "txn abort good": (txn_abort_good, {}),
    "txn abort doesn't roll back": (txn_abort_no_rollback, {"poll-skip": 2}),
    "txn info can be a poll-skip": (txn_info_poll_skip, {"poll-skip": 1}),
    "duplicate aborted txns": (duplicate_aborted_txns, {"duplicate": 1}),
}


def nonmonotonic_send(reset: tuple[str, list[str]] | None = None) -> list[dict]:
    """nonmonotonic-send-test: process 0 sends x c@3 d@4, then a@1 b@2, with `reset` = (f, keys)
    between. Jepsen: 1 nonmonotonic-send, also across a subscribe/assign of [x y]; none across one
    of [y] (its client is producer and consumer in one, and a subscribe resets its send sequence).
    Ours: 1 in every case, a difference kept on purpose: a consumer's assignment says nothing of a
    producer's order, and our producers and consumers are separate processes anyway."""
    j = Jepsen()
    j.op(0, "ok", [("send", "x", (3, "c")), ("send", "x", (4, "d"))])
    if reset:
        j.reset(0, *reset)
    j.op(0, "ok", [("send", "x", (1, "a")), ("send", "x", (2, "b"))])
    return j.events
