"""Brokers that refused to truncate and are stuck exiting: the heal stops waiting for their replicas.

A follower of Kafka before 2.x (unclean election off) whose new leader holds fewer records than it
does refuses to truncate ("Exiting because log truncation is not allowed for partition ...") and
exits. On 0.10.2.2 the exit hangs (KAFKA-4039: System.exit from the fetcher thread waits for the
fetcher to stop), so the JVM stays up, fetching nothing, and a restart refuses again from the same
offsets (read in run 20261129T080436-b21ba3: broker 1 refused at 08:06:03, started again at
08:06:24, refused again at 08:06:40 with the same offsets). Its replicas never rejoin the ISR.
In design 12's sweep on 0.10.2.2 (2026-11-29) 8 of 20 runs had a refusal; 7 of them waited the
heal's full 120 s for ISRs that could not fill (the 8th refused broker rejoined), and every other
run's ISRs were full within 21 s. Read offline from those logs, this rule stops the 7 and no other.

`Refusals.stuck()` reads each broker's server.log from where it last stopped (the guided watch's
LogTail) with the watch's own patterns for a refusal and a start-up (nemesis/guided/loglines.py),
and names the brokers whose last refusal came after their last start.
"""

from __future__ import annotations

from typing import Any, Iterable

from nemesis.guided.loglines import KINDS, LogTail

REFUSED = dict(KINDS)["truncation-refused"]
STARTED = dict(KINDS)["startup"]


class Refusals:
    def __init__(self, nodes: Iterable[Any]) -> None:
        self._tails = {node.node_id: LogTail(node) for node in nodes}
        self._refused: dict[int, str] = {}  # node id -> its last refusal since its last start

    def stuck(self) -> dict[int, str]:
        """Node id -> its refusal line, for every broker whose last refusal followed its last start."""
        for nid, tail in self._tails.items():
            try:
                lines = tail.lines()
            except Exception:  # a log that cannot be read names no refusal; the heal waits as before
                continue
            for line in lines:
                if REFUSED.search(line):
                    self._refused[nid] = line.strip()[:400]
                elif STARTED.search(line):
                    self._refused.pop(nid, None)
        return dict(self._refused)
