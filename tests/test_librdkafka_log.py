"""librdkafka's lines go to the run's librdkafka.log, not the terminal (harness/run/librdkafka_log.py)."""

from __future__ import annotations

import io
import logging
import time

from confluent_kafka import Producer

from harness.run import librdkafka_log
from harness.run.librdkafka_log import LibrdkafkaLog


def test_a_real_clients_errors_reach_the_file_and_not_the_terminal(tmp_path):
    # The terminal: a handler on the root logger, as `harness`'s basicConfig installs one; its
    # stream is this test's own, and the handler goes when the test ends (a root handler left on a
    # closed stream made a later test's logging raise).
    terminal = io.StringIO()
    screen = logging.StreamHandler(terminal)
    logging.getLogger().addHandler(screen)
    logging.getLogger("librdkafka").setLevel(logging.CRITICAL)  # what `harness` sets without -v
    path = tmp_path / "librdkafka.log"
    try:
        _produce_into(path)
    finally:
        logging.getLogger().removeHandler(screen)
        logging.getLogger("librdkafka").setLevel(logging.NOTSET)
    text = path.read_text()
    assert "librdkafka.producer" in text and "127.0.0.1:1" in text, text
    assert "librdkafka.zombie CRITICAL: fenced by a newer instance" in text
    assert "librdkafka" not in terminal.getvalue() and "fenced" not in terminal.getvalue()
    logger = logging.getLogger("librdkafka")
    assert (logger.propagate, logger.handlers) == (True, [])  # given back


def _produce_into(path):
    with LibrdkafkaLog(path):
        # Nothing listens on port 1: librdkafka logs its connection errors through the logger.
        p = Producer({"bootstrap.servers": "127.0.0.1:1", "logger": logging.getLogger("librdkafka.producer"),
                      "reconnect.backoff.ms": 50})
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (path.exists() and "127.0.0.1:1" in path.read_text()):
            p.poll(0.2)
        logging.getLogger("librdkafka.zombie").critical("fenced by a newer instance")
        p.flush(0)
        del p
        assert logging.getLogger("librdkafka").level == logging.WARNING  # the file gets warnings too
    assert logging.getLogger("librdkafka").level == logging.CRITICAL  # given back


def test_under_v_the_terminal_keeps_them_too(tmp_path, caplog):
    logging.getLogger().setLevel(logging.INFO)  # what -v sets
    try:
        with caplog.at_level(logging.INFO), LibrdkafkaLog(tmp_path / "librdkafka.log"):
            logging.getLogger("librdkafka.admin").warning("broker down")
    finally:
        logging.getLogger().setLevel(logging.WARNING)
    assert "broker down" in caplog.text and "broker down" in (tmp_path / "librdkafka.log").read_text()


def test_past_its_bound_the_file_moves_aside_once_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(librdkafka_log, "MAX_BYTES", 2000)
    path = tmp_path / "librdkafka.log"
    with LibrdkafkaLog(path):
        for n in range(100):
            logging.getLogger("librdkafka.consumer").error("line %03d %s", n, "x" * 40)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["librdkafka.log", "librdkafka.log.1"]
    assert path.read_text().startswith("(the lines before this one are in librdkafka.log.1; older ones were dropped)\n")
    assert "line 099" in path.read_text()
