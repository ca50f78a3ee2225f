"""One Spark session for the whole test session: starting a JVM costs ~10 s."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from analysis.spark import get_session

    session = get_session("local[2]", driver_memory="1g", shuffle_partitions=2)
    # Tiny inputs: broadcast everything small, and let AQE collapse partitions.
    session.conf.set("spark.sql.adaptive.coalescePartitions.initialPartitionNum", "4")
    yield session
    session.stop()
