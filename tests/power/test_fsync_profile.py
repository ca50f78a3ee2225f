"""The `fsync` profile: `safe` plus flush.messages=1 on the workload topic, and nothing more permitted."""

from __future__ import annotations

from analysis.rules.permissions import allowed
from workloads.profiles import PROFILES


def test_fsync_profile_is_safe_with_every_append_flushed() -> None:
    fsync, safe = PROFILES["fsync"], PROFILES["safe"]
    assert fsync.topic_config() == {**safe.topic_config(), "flush.messages": "1"}
    assert fsync.producer_config() == safe.producer_config() and fsync.consumer_config() == safe.consumer_config()
    assert fsync.as_dict()["flush.messages"] == 1 and "flush.messages" not in safe.as_dict()
    assert allowed({"profile": fsync.as_dict(), "workload": "queue"}) == allowed({"profile": safe.as_dict(), "workload": "queue"})
