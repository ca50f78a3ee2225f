"""Which delivery-report errors make a send `fail` (provably not written) rather than `info`
(librdkafka's errors, as its driver hands them to the workloads)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from workloads.drivers.librdkafka import client_error
from workloads.outcomes import send_outcome


@pytest.mark.parametrize("code", [KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError._MSG_TIMED_OUT,
                                  KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._PURGE_INFLIGHT])
def test_a_report_that_may_follow_a_write_is_unknown(code: int) -> None:
    # _UNKNOWN_PARTITION: on 0.10.2.2 (issue 21) librdkafka reported it for values a consumer had
    # already read; counted as `fail`, those reads became 3,080 false aborted-reads.
    assert send_outcome(client_error(KafkaError(code))) == "info"


@pytest.mark.parametrize("code", [KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError._INVALID_ARG])
def test_a_static_property_of_the_message_is_a_definite_failure(code: int) -> None:
    assert send_outcome(client_error(KafkaError(code))) == "fail"
