"""The permissions table must read profiles as `harness run` writes them (a misread profile is a false alarm)."""

from __future__ import annotations

import pytest

from analysis.rules.permissions import allowed, effective_profile
from workloads.profiles import PROFILES

LOSS = {"lost-write", "unseen", "poll-skip"}


@pytest.mark.parametrize(
    "name,must_allow,must_forbid",
    [
        ("safe", set(), LOSS | {"duplicate", "inconsistent-offsets"}),
        ("unclean", LOSS | {"inconsistent-offsets"}, {"duplicate", "aborted-read"}),
        ("minisr1", LOSS, {"inconsistent-offsets", "duplicate"}),
        ("acks1", LOSS | {"inconsistent-offsets"}, {"aborted-read"}),
        ("no-idempotence", {"duplicate", "nonmonotonic-send"}, LOSS),
        ("short-timeout", {"duplicate"}, LOSS | {"nonmonotonic-send"}),
    ],
)
def test_each_named_profile_permits_what_its_settings_permit(name, must_allow, must_forbid):
    permitted, _ = allowed({"profile": PROFILES[name].as_dict(), "workload": "queue"})
    assert must_allow <= permitted
    assert not (must_forbid & permitted)


def test_text_booleans_are_parsed_not_taken_for_truthiness():
    profile = effective_profile({"profile": {"topic": {"unclean.leader.election.enable": "false", "min.insync.replicas": "2"}}})
    assert profile["unclean.leader.election.enable"] is False
    assert allowed({"profile": {"topic": {"unclean.leader.election.enable": "false"}}})[0] == set()
