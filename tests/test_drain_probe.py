"""The drain's high-watermark probe asks the partitions in rounds: one partition that stays
offline does not use up the budget of another that is only between leaders (workloads/drain.py)."""

from __future__ import annotations

import time

from workloads.drain import probe_high_watermarks
from workloads.drivers.base import ClientError, ClientException


class Probe:
    def __init__(self, answers):
        self.answers, self.asked = answers, []

    def high_watermark(self, topic, p, timeout_s):
        self.asked.append(p)
        answer = self.answers[p](len([q for q in self.asked if q == p]))
        if isinstance(answer, ClientError):
            raise ClientException(answer)
        return answer

    def close(self):
        pass


class Driver:
    def __init__(self, probe):
        self.probe = probe

    def consumer(self, settings, report_eof=False):
        return self.probe


def test_an_offline_partition_does_not_starve_one_whose_leader_is_moving():
    offline = ClientError("_UNKNOWN_PARTITION", "Local: Unknown partition")
    moving = ClientError("NOT_LEADER_FOR_PARTITION", "Broker: Not leader for partition")
    probe = Probe({
        2: lambda n: offline,                        # no leader for good
        4: lambda n: moving if n < 3 else 31199,     # answers from its third try
        5: lambda n: 31482,
    })
    began = time.monotonic()
    high, failed = probe_high_watermarks("-", "queue", [2, 4, 5], "g", timeout_s=2.0, driver=Driver(probe))
    assert high == {4: 31199, 5: 31482}
    assert list(failed) == [2] and "_UNKNOWN_PARTITION" in failed[2]
    assert time.monotonic() - began < 4.0


def test_an_error_that_is_no_leaders_fails_the_partition_at_once():
    probe = Probe({0: lambda n: ClientError("TOPIC_AUTHORIZATION_FAILED", "denied"), 1: lambda n: 7})
    high, failed = probe_high_watermarks("-", "queue", [0, 1], "g", timeout_s=5.0, driver=Driver(probe))
    assert high == {1: 7} and probe.asked.count(0) == 1 and "TOPIC_AUTHORIZATION_FAILED" in failed[0]
