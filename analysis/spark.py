"""SparkSession factory: embedded local[*] by default, a cluster via --spark-master, or Spark
Connect via SPARK_REMOTE. One place decides memory, partitions and how quiet Spark is."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

# Spark's own INFO/WARN chatter drowns the verdict; only errors reach the terminal.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


# The throughput collector, not G1: a check is one batch on a small heap, where G1's barriers
# and concurrent threads cost CPU the 2 task threads need (10M-event check, warm JVM: 36.0 s
# mean of 5 against 38.8 s; 50M still completes with a 2 GB driver).
# JDK 9-21 can throw OutOfMemoryError with the heap half empty when a thread allocates while
# others hold JNI critical sections (compression codecs): the allocation gives up after 2 waits
# for the GC locker (JDK-8192647). Spark's 32 MB memory pages hit it at 50M events with a 2 GB
# driver. Waiting longer is the documented workaround (Trino ships the same setting).
_GC_OPTIONS = "-XX:+UseParallelGC -XX:+UnlockDiagnosticVMOptions -XX:GCLockerRetryAllocationCount=100"


def _log4j_file() -> str:
    path = Path(tempfile.gettempdir()) / "kafka-chaos-analysis-log4j2.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        path.write_text(_LOG4J2)
    return str(path)


def get_session(
    master: str | None = None,
    driver_memory: str = "2g",
    shuffle_partitions: int | None = None,
    app_name: str = "kafka-chaos-checker",
) -> SparkSession:
    """A SparkSession for the checker.

    master: None → SPARK_REMOTE (Spark Connect) if set, else ``local[*]``; or any Spark master URL
    (``spark://host:7077``, ``yarn``, ``k8s://…``). driver_memory only takes effect when this call
    starts the JVM (an already running session is reused as is).
    """
    remote = os.environ.get("SPARK_REMOTE")
    if master is None and remote:
        builder = SparkSession.builder.remote(remote).appName(app_name)
        spark = builder.getOrCreate()
        if shuffle_partitions:
            spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
        return spark

    master = master or "local[*]"
    local = master.startswith("local")
    # Python workers (analysis/cycles.py's grouped pandas function) run this interpreter, whose
    # pandas and pyarrow they need, not whichever python3 is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    cores = os.cpu_count() or 2
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "true")
        # Half the heap for Spark's managed memory, not 60 %: the rest holds what Spark does not
        # account (row buffers, codecs, cached-batch building). At 0.6 a 50M-event check ran out
        # of heap with a 2 GB driver; at 0.5 it completes.
        .config("spark.memory.fraction", "0.5")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_log4j_file()} {_GC_OPTIONS}")
        .config(
            "spark.sql.shuffle.partitions",
            str(shuffle_partitions or (max(4, 4 * cores) if local else 200)),
        )
    )
    if local:
        # Loopback only: the embedded driver must not listen on external interfaces.
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
