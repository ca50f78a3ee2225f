"""The exactly-once pipeline's two topics in one history (docs/history.md, "The eos workload").

History format v1 names a record by (key, offset) with key the partition of *the* workload topic.
The eos workload has two topics, so its history keeps input and output apart by key: partition k
of the input topic is key k, partition k of the output topic is key OUTPUT_KEY_BASE + k. Every v1
reader and checker then sees two disjoint sets of logs, as it should.

An output record's value names the input value it was made from: V' = v + VALUE_STRIDE * a, where
v < VALUE_STRIDE is the input value and a >= 1 the transaction attempt (unique in the run) that
made it. Output values stay unique in the run (a reprocessed input gets a new V'), so the
value-level checks (duplicate, aborted-read) keep their meaning, and any reader recovers v from V'.
"""

from __future__ import annotations

OUTPUT_KEY_BASE = 1000  # the output topic's partition k is key 1000 + k; the input's partitions stay below
VALUE_STRIDE = 1_000_000_000  # input values below 1e9: ~11 days at 1000 sends/s; V' fits int64 to a ~9e9th attempt


def output_key(partition: int) -> int:
    return OUTPUT_KEY_BASE + partition


def is_output_key(key: int) -> bool:
    return key >= OUTPUT_KEY_BASE


def output_value(input_value: int, attempt: int) -> int:
    return input_value + VALUE_STRIDE * attempt


def source_value(output_value_: int) -> int:
    """The input value an output value was made from."""
    return output_value_ % VALUE_STRIDE
