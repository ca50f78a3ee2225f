"""confluent-kafka 2.16.1 can raise a KafkaError as it is: no exception class, so no `except
Exception` catches it. A fence run of 2026-11-26 (20261126T224836-a85d91) lost a transactional
producer's thread that way, with its transaction unrecorded and nothing in the run's errors. The
driver turns it into its ClientException (a fenced producer is then replaced, as for any fatal
error), and a client thread that still meets such an object records it. The object is raised here
the way confluent-kafka's C code raises it (PyErr_SetObject), through ctypes."""

from __future__ import annotations

import ctypes

import pytest
from confluent_kafka import KafkaError

from workloads.drivers.base import ClientException
from workloads.drivers.librdkafka import LibrdkafkaProducer
from workloads.threads import ClientThreads

_set_object = ctypes.pythonapi.PyErr_SetObject
_set_object.argtypes = [ctypes.py_object, ctypes.py_object]
_set_object.restype = None
FENCED = KafkaError(KafkaError._FENCED, "Failed to add partitions to transaction: fenced", fatal=True)


def raise_as_it_is(err: KafkaError = FENCED) -> None:
    _set_object(KafkaError, err)  # ctypes' PyDLL raises what the call left set


def test_such_an_object_escapes_except_exception():
    caught = None
    try:
        try:
            raise_as_it_is()
        except Exception:  # what every handler of the workloads says
            caught = "except Exception"
    except:  # noqa: E722 - only a bare except catches it (pytest.raises does not either)
        caught = caught or "bare except"
    assert caught == "bare except"


class Raw:
    """confluent-kafka's Producer, as far as the calls here go: each raises the object as it is."""

    def flush(self, timeout: float) -> int:
        raise_as_it_is()
        return 0

    def commit_transaction(self, timeout: float) -> None:
        raise_as_it_is()


def driver_error(call) -> ClientException | str:
    """What `call` raised: the driver's ClientException, or a word on what else came out."""
    try:
        call()
    except ClientException as exc:
        return exc
    except:  # noqa: E722 - the raw object must not reach pytest's own handlers
        return "the KafkaError itself escaped the driver"
    return "nothing was raised"


def test_the_driver_turns_it_into_its_fatal_client_exception():
    producer = LibrdkafkaProducer({"bootstrap.servers": "127.0.0.1:1"}, lambda *a: None, lambda *a: None, None)
    producer.raw = Raw()  # type: ignore[assignment]
    flushed = driver_error(lambda: producer.flush(1.0))
    assert isinstance(flushed, ClientException), flushed
    assert (flushed.error.name, flushed.error.fatal) == ("_FENCED", True)
    committed = driver_error(lambda: producer.commit_transaction(1.0))
    assert isinstance(committed, ClientException), committed
    assert committed.error.name == "_FENCED" and "fenced" in committed.error.message


def test_a_client_thread_that_meets_one_records_it():
    threads = ClientThreads()
    threads.spawn("producer-0", lambda _: raise_as_it_is(), None)
    threads.join(5.0)
    assert len(threads.errors) == 1 and threads.errors[0].startswith("producer-0: KafkaError:")
    assert "_FENCED" in threads.errors[0]



def test_it_is_recorded_even_when_logging_it_fails():
    """A handler whose stream fails makes logging print the failure with its context, the raised
    object, which has no __traceback__: logging itself raised. The entry is made before the log line."""
    import logging

    class Broken(logging.Handler):
        def emit(self, record):
            raise ValueError("I/O operation on closed file.")

    broken = Broken()
    logging.getLogger().addHandler(broken)
    try:
        threads = ClientThreads()
        threads.spawn("producer-0", lambda _: raise_as_it_is(), None)
        threads.join(5.0)
    finally:
        logging.getLogger().removeHandler(broken)
    assert len(threads.errors) == 1 and "_FENCED" in threads.errors[0]
