"""Errors the harness reports to its users: each names the problem and the fix.

The CLI turns any `HarnessError` into a message on stderr and exit code 2
(bad input or broken infrastructure), as opposed to a verdict.
"""

from __future__ import annotations

from pathlib import Path


class HarnessError(Exception):
    """A problem the user can fix. `hint` says how; `details` carries logs; `run_dir` is the
    run directory it happened in, when it happened during a run (harness/run/directory.py sets it)."""

    exit_code = 2

    def __init__(self, message: str, hint: str = "", details: str = "", run_dir: Path | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details
        self.run_dir = run_dir

    def __str__(self) -> str:
        parts = [self.message]
        if self.hint:
            parts.append(f"hint: {self.hint}")
        if self.details:
            parts.append(self.details)
        if self.run_dir is not None:
            parts.append(f"run directory: {self.run_dir}")
        return "\n".join(parts)


class BootstrapError(HarnessError):
    """The machine could not be prepared: Docker engine, base image or Kafka jars."""


class KafkaVersionError(HarnessError):
    """The requested Kafka version is malformed or does not exist on Maven Central."""


class ClusterError(HarnessError):
    """A Kafka cluster could not be started, reached or torn down."""
