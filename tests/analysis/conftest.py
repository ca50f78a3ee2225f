"""One Spark session for the whole test session: starting a JVM costs ~10 s."""

from __future__ import annotations

import pytest

# The session-wide `spark` fixture lives in the root conftest.py (one JVM for every test folder).
