"""The workload registry (workloads/registry.py): every workload the run command accepts is
made through it, takes its own settings, and names every topic it needs."""

from __future__ import annotations

import inspect

import pytest

from harness.run.config import WORKLOADS, RunConfig
from workloads import registry
from workloads.profiles import get_profile


def test_the_run_accepts_exactly_the_registered_workloads(tmp_path):
    assert WORKLOADS == registry.names() == ("queue", "txn", "eos")
    from harness.errors import HarnessError

    with pytest.raises(HarnessError, match="unknown workload 'bogus'"):
        RunConfig(store=tmp_path, workload="bogus").check()


@pytest.mark.parametrize("name", registry.names())
def test_each_workload_follows_the_protocol_and_takes_its_settings(name, tmp_path):
    config = RunConfig(store=tmp_path, workload=name, partitions=3, producers=1, consumers=1, rate=10, seed=5,
                       abort_probability=0.4, crash_clients_s=7.0 if name == "queue" else None)
    workload = registry.make(name, config, get_profile("safe"), None, "127.0.0.1:1", "queue", "r1")
    assert workload.name == name and workload.errors == []
    for method in ("start", "stop", "drain"):
        assert callable(getattr(workload, method)) and "timeout_s" in str(inspect.signature(getattr(workload, method)))
    assert workload.topics[0] == "queue" and (workload.topics[1:] == ("queue-out",) if name == "eos" else len(workload.topics) == 1)
    assert (workload.partitions, workload.producers, workload.consumers, workload.group_id) == (3, 1, 1, f"{name}-r1")
    if name == "queue":
        assert workload.crash_clients_s == 7.0
    else:
        assert workload.abort_probability == 0.4 and workload.profile.isolation_level == "read_committed"
