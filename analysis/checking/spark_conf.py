"""What every Spark of the checker shares, the embedded session and the local checker's server
alike: where Spark lives, the JVM's options (quiet log4j, the GC) and the session's conf."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent

# Spark's own INFO/WARN chatter drowns the verdict; only errors reach the JVM's log. The repl
# logger at the root's level too: Spark counts a PySpark driver as a shell, and when the shell's
# level (WARN by default) differs from the root's it prints "Setting default log level to WARN"
# and "To adjust logging level use sc.setLogLevel" to stderr before any config can silence it.
_LOG4J2 = """\
rootLogger.level = error
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


MEMORY_ENV = "KAFKA_CHAOS_CHECKER_MEMORY"


def driver_memory() -> str:
    """The local checker's heap: a quarter of the machine's memory, from 2 to 8 GB (6g on a 24 GB
    machine), or $KAFKA_CHAOS_CHECKER_MEMORY (e.g. 3g). A fixed 2 GB ran out of heap checking the
    45-minute soak's 5.3M-event history (2026-11-25, docs/benchmarks.md); a heap is reserved, not
    used, until a check needs it, and the local checker stops by itself when idle."""
    given = os.environ.get(MEMORY_ENV, "").strip()
    if given:
        return given
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "2g"
    return f"{max(2, min(8, total // 4 // 2**30))}g"


# The throughput collector, not G1: a check is one batch on a small heap, where G1's barriers
# and concurrent threads cost CPU the 2 task threads need (10M-event check, warm JVM: 36.0 s
# mean of 5 against 38.8 s; 50M still completes with a 2 GB driver).
# JDK 9-21 can throw OutOfMemoryError with the heap half empty when a thread allocates while
# others hold JNI critical sections (compression codecs): the allocation gives up after 2 waits
# for the GC locker (JDK-8192647). Spark's 32 MB memory pages hit it at 50M events with a 2 GB
# driver. Waiting longer is the documented workaround (Trino ships the same setting).
_GC_OPTIONS = "-XX:+UseParallelGC -XX:+UnlockDiagnosticVMOptions -XX:GCLockerRetryAllocationCount=100"


def _log4j_file() -> str:
    path = Path(tempfile.gettempdir()) / f"kafka-chaos-analysis-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        tmp.replace(path)  # two JVMs starting at once never read half a file
    return str(path)


def java_options() -> str:
    return f"-Dlog4j2.configurationFile=file:{_log4j_file()} {_GC_OPTIONS}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_partitions() -> int:
    return max(4, 4 * (os.cpu_count() or 2))


# What the embedded session and the local checker's server share (the server takes them at launch).
SERVER_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    # Half the heap for Spark's managed memory, not 60 %: the rest holds what Spark does not
    # account (row buffers, codecs, cached-batch building). At 0.6 a 50M-event check ran out
    # of heap with a 2 GB driver; at 0.5 it completes.
    "spark.memory.fraction": "0.5",
    "spark.sql.session.timeZone": "UTC",
    # Generated code is cached by its text; Spark keeps 100 classes, fewer than one check of the
    # checker's queries compiles, so a warm server recompiled most of them on every check.
    "spark.sql.codegen.cache.maxEntries": "2000",
    "spark.sql.shuffle.partitions": str(default_partitions()),
    # Loopback only: the driver must not listen on external interfaces.
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
