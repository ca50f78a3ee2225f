"""SparkSession factory: embedded local[*] by default, a cluster via --spark-master, or Spark
Connect via SPARK_REMOTE; `checker_session` adds the reused local checker (analysis/checking/spark_server.py).
One place decides memory, partitions and how quiet Spark is."""

from __future__ import annotations

import atexit
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from analysis.checking import spark_server
from analysis.checking.spark_conf import SERVER_CONF, default_partitions, java_options
from analysis.checking.spark_conf import driver_memory as default_driver_memory
from harness.errors import HarnessError

log = logging.getLogger(__name__)
_JVM_LOG: Path | None = None  # where this process's embedded JVM writes (None: the terminal)
_KEEP_LOG = False  # a check failed: the log outlives the process, for the error to point at


def verbose() -> bool:
    """`harness -v` (logging at INFO): the JVM's own lines go to the terminal as they always did."""
    return log.isEnabledFor(logging.INFO)


def _quiet_gateway(builder: Any) -> None:
    """Start the py4j gateway JVM ourselves, its stdout and stderr into a log file: the JVM prints
    "WARNING: Using incubator modules: jdk.incubator.vector" (Spark 4 adds the module on its
    command line) before log4j exists, so only a redirect keeps it off the terminal. The log is
    removed at exit, and named in the error when the JVM does not come up."""
    from pyspark import SparkConf
    from pyspark.core.context import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or verbose() or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf(loadDefaults=False)
    for key, value in builder._options.items():
        conf.set(key, value)
    fd, name = tempfile.mkstemp(prefix="kafka-chaos-spark-", suffix=".log")
    path = Path(name)
    with os.fdopen(fd, "wb") as out:
        try:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": out})
        except Exception as err:
            tail = path.read_text(errors="replace").strip().splitlines()[-5:]
            raise HarnessError(f"Spark's JVM did not start: {' / '.join(tail) or err}",
                               hint=f"is Java 17 or later installed (`java -version`)? The JVM's output is in {path}") from err
    global _JVM_LOG
    _JVM_LOG = path
    atexit.register(lambda: path.unlink(missing_ok=True) if not _KEEP_LOG else None)
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm
    log.info("Spark's JVM writes to %s", path)


def get_session(
    master: str | None = None,
    driver_memory: str | None = None,
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
    # Python workers (analysis/checking/cycles.py's grouped pandas function) run this interpreter, whose
    # pandas and pyarrow they need, not whichever python3 is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = {k: v for k, v in SERVER_CONF.items() if local or not k.startswith("spark.driver.")}
    conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions or (default_partitions() if local else 200))
    memory = driver_memory or default_driver_memory()
    builder = SparkSession.builder.master(master).appName(app_name).config("spark.driver.memory", memory)
    builder = builder.config("spark.driver.extraJavaOptions", java_options()).config(map=conf)
    _quiet_gateway(builder)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def checker_session(master: str | None = None, driver_memory: str | None = None,
                    shuffle_partitions: int | None = None) -> SparkSession:
    """The session a check runs on: `master` or SPARK_REMOTE when given; else the local checker,
    a Spark Connect server reused by every check until it idles out (analysis/checking/spark_server.py),
    unless KAFKA_CHAOS_CHECKER=embedded asks for a Spark inside this process.

    Why a server: a check of a 60k-event history cost 20.9 s in a fresh JVM, most of it start-up,
    class loading and cold JIT (issue 34); bench/bench_overhead.py measures cold against warm."""
    from pyspark.core.context import SparkContext

    # A Spark already running in this process (the test suite's, a caller's) is warm too: keep it.
    if (master is not None or os.environ.get("SPARK_REMOTE") or os.environ.get("KAFKA_CHAOS_CHECKER") == "embedded"
            or SparkContext._active_spark_context is not None):
        return get_session(master, driver_memory=driver_memory, shuffle_partitions=shuffle_partitions)
    spark_server.claim()  # a warm-up on the checker gives way (analysis/checking/warmup.py)
    state = spark_server.ensure(driver_memory, warm_up=False)
    if state is None:  # a server of older code is still busy with another check
        log.info("the local checker runs older code and is busy: checking on an embedded Spark")
        return get_session(None, driver_memory=driver_memory, shuffle_partitions=shuffle_partitions)
    log.info("checking on the local checker at port %s (log %s)", state["port"], state["log"])
    # One of the checker's reused sessions (warm: analysis/checking/sessions.py), or a new one of
    # this process's, released with its cached tables when the process exits.
    from analysis.checking import sessions

    folder = spark_server.home()
    warming = (spark_server.warmup_status(folder) or {}).get("state") == "running"
    spark = sessions.connect(state, folder, warming)
    try:  # a local server that is gone stays gone: fail in seconds, not after the 10 min of retries meant for a network
        from pyspark.sql.connect.client.retries import DefaultPolicy

        spark.client.set_retry_policies([DefaultPolicy(max_retries=6, max_backoff=5000)])
    except (ImportError, AttributeError, TypeError):
        pass
    spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions or default_partitions()))
    return spark


def server_side(spark: Any) -> bool:
    """The session is a Spark Connect client: relative paths would resolve in the server's folder."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def engine_failure(err: BaseException, spark: Any) -> HarnessError:
    """A failure inside Spark, in the harness's words, pointing at the JVM's log (which no longer
    reaches the terminal); that log is kept."""
    global _KEEP_LOG
    text = str(err)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(err).__name__)[:300]
    log_path: Any = _JVM_LOG
    stopped = False
    if server_side(spark):
        state = spark_server.read_state()
        log_path, stopped = (state["log"] if state else spark_server.home() / "server.log"), state is None
    _KEEP_LOG = True
    where = f"Spark's log: {log_path}" if log_path else "Spark's log is above"
    if "OutOfMemoryError" in text or "Java heap space" in text:
        return HarnessError(f"Spark ran out of memory during the check: {first}",
                            hint=f"give it a larger heap with --driver-memory 4g (the local checker takes it when it "
                                 f"starts: `harness status --stop` first); {where}")
    if stopped:
        return HarnessError(f"the local checker stopped during the check: {first}",
                            hint=f"{where}; the next check starts it again, or check embedded with --spark-master 'local[*]'")
    return HarnessError(f"the check failed in Spark: {type(err).__name__}: {first}",
                        hint=f"{where}; `-v` shows Spark's own lines on the terminal")


# Under about a million events (a 60 s default run has ~120k). One shuffle partition per core for
# those, not 4: a warm local checker checked the 61,018 events of a 30 s run in 6.3 s with 2
# partitions against 7.6 s with 8 (its 5th and 6th checks, load average 6 on 2 cores; the same
# results.json either way). And without adaptive execution, which runs each shuffle's stages one
# after the other to re-plan between them, with nothing to win on a small history: the local
# checker's warm checks of a 30 s run's 87,243 events took 4.61 against 5.45 s with it (medians of
# 6 pairs alternating, faster in each, the same results.json); embedded, 7.50 against 8.58 s
# (medians of 4), and for bench_checker's 1M events 9.52 against 10.01 s (2026-12-02, idle 2-core
# machine, bench/results/small-plan-2026-12-02.txt). At 10M events (204 MB, over the line) the
# small plan would lose: 51.4 s against 42.6 s with the defaults.
SMALL_HISTORY_BYTES = {".parquet": 40 << 20, ".jsonl": 200 << 20}
SMALL_OPEN_COST = 256 << 10


def fit_partitions(spark: Any, run_dir: Path, given: int | None = None) -> None:
    """Shuffle partitions and adaptive execution for this history on a local Spark (embedded or the
    local checker): fewer partitions and no adaptive execution for a small one, the defaults
    otherwise (a reused session keeps what the last check set).
    Nothing when the user gave --shuffle-partitions or the Spark is a cluster's."""
    if given:
        return
    if server_side(spark):
        if os.environ.get("SPARK_REMOTE"):
            return
    elif not spark.sparkContext.master.startswith("local"):
        return
    from analysis.checking.history_load import find_history

    path, _ = find_history(run_dir)
    small = path.stat().st_size < SMALL_HISTORY_BYTES.get(path.suffix, 0)
    spark.conf.set("spark.sql.shuffle.partitions", str(max(2, os.cpu_count() or 2) if small else default_partitions()))
    # A file is opened as if it cost this many bytes: Spark's 4 MB default kept a small history's
    # file (1.5 MB at 100k events) in one split, so one task read it; at 256 KB it is split per
    # core, between its row groups (harness/history/files.py ROW_GROUP_EVENTS).
    spark.conf.set("spark.sql.files.openCostInBytes", str(SMALL_OPEN_COST if small else 4 << 20))
    spark.conf.set("spark.sql.adaptive.enabled", "false" if small else SERVER_CONF["spark.sql.adaptive.enabled"])
