"""Restart=on-failure for the brokers a nemesis starts again, on ZooKeeper-era clusters.

A ZooKeeper-era broker registers an ephemeral znode, /brokers/ids/N, which lives as long as its
ZooKeeper session. A broker killed with SIGKILL leaves its session open until it expires
(zookeeper.session.timeout.ms, 6 s), and a new JVM that registers before then exits:
"A broker is already registered on the path /brokers/ids/3. This probably indicates that you
either have configured a brokerid that is already in use, or else you have shutdown this broker
and restarted it faster than the zookeeper timeout". On 0.10.2.2 each of 5 detection runs of
2026-11-25 had one to three such refusals (rejoin restarts its follower 0.5-3 s after the kill),
and the broker then stayed down until the heal: a two-broker cluster for most of the run, with
min.insync.replicas 2. An operator's supervisor (systemd's Restart=on-failure) starts it again.

`restart(nemesis, node, step)` starts the JVM and, on a ZooKeeper-era cluster, watches that
JVM's server.log (read on the host, no exec) for a bounded window: if Kafka refused it for that
reason, it starts it again after a second, recorded as the nemesis's own end event, its
`stop_f` (`restart` after a kill, `power-on` after a power cut, `disk-healed` after a disk
fault), with the refusal quoted. Any other death (a later fault's kill) is not its business.
KRaft brokers register with the controller quorum, which fences the old incarnation instead of
refusing the new one.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any


log = logging.getLogger("nemesis")

REFUSED = "is already registered on the path /brokers/ids/"
STARTED = "started (kafka.server.KafkaServer)"  # 0.10: "[Kafka Server 1], started", 1.x: "[KafkaServer id=1] started"
WINDOW_S = 40.0  # a 0.10.2.2 JVM logs the refusal 3-6 s after its start on this 2-core machine
EVERY_S = 0.5
RETRY_AFTER_S = 1.0  # systemd's RestartSec
MAX_RESTARTS = 8  # about WINDOW_S / (JVM start + 1 s): bounded whatever Kafka does


def restart(nemesis: Any, node: Any, step: str) -> int | None:
    """Start `node`'s JVM (a no-op if it runs) and, before KRaft, keep it started as above; a
    start again is recorded as `nemesis.stop_f`."""
    watched = hasattr(node, "read_log") and nemesis.cluster is not None and not nemesis.cluster.is_kraft
    mark = node.log_size() if watched else 0
    pid = node.start_process()
    if watched:
        threading.Thread(target=_watch, args=(nemesis, node, pid, mark, step), daemon=True,
                         name=f"supervise-{node.node_id}").start()
    return pid


def _watch(nemesis: Any, node: Any, pid: int | None, mark: int, step: str) -> None:
    began = time.monotonic()
    restarts = 0
    while time.monotonic() - began < WINDOW_S and restarts < MAX_RESTARTS:
        time.sleep(EVERY_S)
        if node.pid_on_file() != pid:
            return  # someone else started (or restarts) it: theirs now
        text = node.read_log(mark)[0]
        if STARTED in text and REFUSED not in text:
            return  # registered and started
        if REFUSED not in text or node.pid() is not None:
            continue  # still starting, or still shutting down after the refusal
        refusal = next((line.strip() for line in text.splitlines() if REFUSED in line), "")[:300]
        time.sleep(RETRY_AFTER_S)
        mark, restarts = node.log_size(), restarts + 1
        try:
            pid = node.start_process()
        except Exception as exc:  # the heal starts any JVM still gone (nemesis/runner.py)
            log.warning("supervisor: node %s did not start again: %s", node.node_id, exc)
            return
        log.warning("supervisor: node %s refused its restart (%s); started again as PID %s", node.node_id, refusal, pid)
        try:
            nemesis.record(nemesis.stop_f, {"targets": [node.node_id], "pids": {str(node.node_id): pid},
                                       "step": f"supervisor: started again after Kafka refused the restart ({step})",
                                       "refused": refusal, "attempt": restarts + 1})
        except Exception as exc:  # a restart from the heal may outlive the history (closed after the drain)
            log.warning("supervisor: node %s's restart not recorded: %s", node.node_id, exc)
