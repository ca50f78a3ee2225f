"""The history (format v1, docs/history.md): the ground every other part meets at.

`format` holds the vocabulary and the one validator, `faults` the fault kinds the nemeses
declare, `recorder` the thread-safe writer, `send_lines` its compiled batch formatter, and
`files` reading and writing on disk.
"""

from harness.history.files import read_history, validate_history, write_json, write_parquet, write_text
from harness.history.format import (CLIENT_FS, FORMAT_VERSION, NEMESIS, READ_FS, RESET_FS, TYPES, event_problem,
                                    validate_events)


def __getattr__(name: str):  # noqa: ANN202 - PEP 562
    # The recorder needs numpy and its compiled formatter (~0.1 s to import); readers of the
    # format (the checker, the CLI's start-up) get the vocabulary without paying for it.
    if name == "Recorder":
        from harness.history.recorder import Recorder

        return Recorder
    raise AttributeError(f"module 'harness.history' has no attribute {name!r}")


__all__ = ["CLIENT_FS", "FORMAT_VERSION", "NEMESIS", "READ_FS", "RESET_FS", "TYPES", "Recorder", "event_problem",
           "read_history", "validate_events", "validate_history", "write_json", "write_parquet", "write_text"]
