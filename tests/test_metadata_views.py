"""Trusting what a majority of brokers reports, not whichever broker a client asked."""

from __future__ import annotations

from harness.cluster.metadata_views import BrokerView, collect_views, majority_view


def view(responder: int, isr: list[int], other_topic_isr: list[int] | None = None) -> BrokerView:
    topics = {"t": {0: {"leader": 2, "replicas": [1, 2, 3], "isr": isr}}}
    if other_topic_isr is not None:
        topics["u"] = {0: {"leader": 2, "replicas": [1, 2, 3], "isr": other_topic_isr}}
    return BrokerView(responder, (1, 2, 3), topics)


def test_an_isolated_brokers_stale_view_loses_to_the_majority():
    views = {1: view(1, [1, 2, 3]), 2: view(2, [2, 3]), 3: view(3, [2, 3])}
    assert majority_view(views, "t").topics["t"][0]["isr"] == [2, 3]


def test_no_view_is_trusted_without_a_majority_of_the_answers():
    assert majority_view({1: view(1, [1, 2, 3]), 2: view(2, [2, 3])}, "t") is None  # one against one: unknown
    assert majority_view({}, "t") is None
    # The only broker that answers (the others killed or paused) has nobody to be outvoted by.
    assert majority_view({3: view(3, [2, 3])}, "t").topics["t"][0]["isr"] == [2, 3]


def test_agreement_about_one_topic_ignores_disagreement_about_others():
    views = {1: view(1, [1, 2, 3], [1, 2]), 2: view(2, [1, 2, 3], [1, 2, 3])}
    assert majority_view(views, "t") is not None
    assert majority_view(views) is None  # about everything, they differ


def test_brokers_that_never_answer_are_not_waited_for():
    # Nothing listens on port 1: the ask ends after its timeout, once, with no view.
    assert collect_views({1: "127.0.0.1:1"}, timeout_s=0.5, rounds=3) == {}
