"""Brokers that refused to truncate and are stuck exiting: the heal stops waiting for their replicas.

A follower of Kafka before 2.x (unclean election off) whose new leader holds fewer records than it
does refuses to truncate ("Exiting because log truncation is not allowed for partition ...") and
exits. On 0.10.2.2 the exit hangs (KAFKA-4039: System.exit from the fetcher thread waits for the
fetcher to stop), so the JVM stays up, fetching nothing, and a restart refuses again from the same
offsets (read in run 20261129T080436-b21ba3: broker 1 refused at 08:06:03, started again at
08:06:24, refused again at 08:06:40 with the same offsets). Its replicas never rejoin the ISR.
In design 12's sweep on 0.10.2.2 (2026-11-29) 8 of 20 runs had such a broker and each waited the
heal's full 120 s for ISRs that could not fill; every other run's ISRs were full within 21 s.

`Refusals.stuck()` reads each broker's server.log from where it last stopped (no file is read
twice) and names the brokers whose last refusal came after their last start.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

REFUSED = re.compile(r"Exiting because log truncation is not allowed")
# 0.10.x-2.x (ZooKeeper) and KRaft-era brokers say so once started.
STARTED = re.compile(r"\], started \(kafka\.server\.KafkaServer\)|Kafka Server started|\] started \(kafka\.server")


class Refusals:
    def __init__(self, nodes: Iterable[Any]) -> None:
        self._nodes = list(nodes)
        self._read: dict[int, int] = {}  # node id -> bytes of server.log read
        self._partial: dict[int, str] = {}  # node id -> a line not yet ended
        self._refused: dict[int, str] = {}  # node id -> its last refusal since its last start

    def stuck(self) -> dict[int, str]:
        """Node id -> its refusal line, for every broker whose last refusal followed its last start."""
        for node in self._nodes:
            nid = node.node_id
            try:
                text, end = node.read_log(self._read.get(nid, 0), "server.log")
            except Exception:  # a log that cannot be read names no refusal; the heal waits as before
                continue
            if end < self._read.get(nid, 0):  # the file was replaced: read it again from the start
                self._read[nid], self._partial[nid] = 0, ""
                continue
            self._read[nid] = end
            lines = (self._partial.get(nid, "") + text).split("\n")
            self._partial[nid] = lines.pop()  # the last piece has no newline yet (or is empty)
            for line in lines:
                if REFUSED.search(line):
                    self._refused[nid] = line.strip()[:400]
                elif STARTED.search(line):
                    self._refused.pop(nid, None)
        return dict(self._refused)
