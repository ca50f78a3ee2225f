"""librdkafka's own log lines, kept in the run directory rather than printed on the terminal.

confluent-kafka hands librdkafka's lines to the Python logger each client is given
(`librdkafka.producer`, `.consumer`, `.admin`, `.zombie`, ...). Printed on the terminal, a `fence`
run's expected "This instance has been fenced by a newer instance" FATAL lines (about 12 in the
first 60 s of a 4.4.0 run, 2026-11-27) read like the harness failing, and a partition's connection
errors bury the progress lines. So while a run directory is open they go to RUN/librdkafka.log, from
WARNING up, and reach the terminal only under `-v`. What a client's error meant for an operation is
in the history (docs/history.md); this file is the client's side of it, kept as evidence.

Bounded: past MAX_BYTES the file moves to librdkafka.log.1 (one kept), and its first line says so.
"""

from __future__ import annotations

import logging
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any

LOGGER = "librdkafka"
MAX_BYTES = 50 * 1024 * 1024  # two files of 50 MB at most; a 120 s partition run writes a few KB


class _Rotating(RotatingFileHandler):
    def doRollover(self) -> None:  # noqa: N802 (logging's name)
        super().doRollover()
        if self.stream is None:  # opened lazily (delay=True): the mark goes first in the new file
            self.stream = self._open()
        self.stream.write(f"(the lines before this one are in {Path(self.baseFilename).name}.1; older ones were dropped)\n")


class LibrdkafkaLog:
    """`with LibrdkafkaLog(path):` librdkafka's lines go to `path`; the logger's level and
    propagation are given back on exit."""

    def __init__(self, path: Path, level: int = logging.WARNING) -> None:
        self.path, self.level = Path(path), level
        self.handler: logging.Handler | None = None

    def __enter__(self) -> "LibrdkafkaLog":
        logger = logging.getLogger(LOGGER)
        self._saved = (logger.level, logger.propagate)
        # `-v` sets the root logger to INFO (harness/cli.py): the terminal then keeps these lines too.
        verbose = logging.getLogger().getEffectiveLevel() <= logging.INFO
        self.handler = _Rotating(self.path, maxBytes=MAX_BYTES, backupCount=1, delay=True, encoding="utf-8")
        self.handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
        self.handler.setLevel(self.level)
        logger.addHandler(self.handler)
        logger.setLevel(self.level)
        logger.propagate = verbose
        return self

    def __exit__(self, *exc: Any) -> None:
        logger = logging.getLogger(LOGGER)
        if self.handler is not None:
            logger.removeHandler(self.handler)
            self.handler.close()
        logger.setLevel(self._saved[0])
        logger.propagate = self._saved[1]
