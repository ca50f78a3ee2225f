"""Real Spark servers on loopback, started from PySpark's own jars (no download): a standalone
master with one worker, and a Spark Connect server. For the tests that hold a check run there to
the embedded one (issue 19, item 9). Every process is bounded: started with a deadline to come up,
and stopped (then killed) when its context ends."""

from __future__ import annotations

import os
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from analysis.checking.spark_conf import SPARK_HOME, free_port
from analysis.checking.spark_server import LOOPBACK, listening


def _env(work: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": LOOPBACK, "SPARK_WORKER_DIR": str(work / "worker"),
            "SPARK_LOG_DIR": str(work / "logs"), "SPARK_NO_DAEMONIZE": "1"}


@contextmanager
def _process(args: list[str], log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _wait(ready, what: str, log: Path, proc: subprocess.Popen, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        if ready():
            return
        time.sleep(0.5)
    raise RuntimeError(f"{what} not ready after {timeout_s:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")


@contextmanager
def standalone_cluster(work: Path, cores: int = 2, memory: str = "2g") -> Iterator[str]:
    """A standalone master and one worker on loopback; yields the master URL (spark://...)."""
    work.mkdir(parents=True, exist_ok=True)
    env, spark_class = _env(work), str(SPARK_HOME / "bin" / "spark-class")
    port = free_port()
    master_log, worker_log = work / "master.log", work / "worker.log"
    with _process([spark_class, "org.apache.spark.deploy.master.Master", "--host", LOOPBACK, "--port", str(port),
                   "--webui-port", str(free_port())], master_log, env) as master:
        _wait(lambda: listening(port), "the Spark master", master_log, master)
        url = f"spark://{LOOPBACK}:{port}"
        with _process([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK, "--webui-port",
                       str(free_port()), "--cores", str(cores), "--memory", memory, url], worker_log, env) as worker:
            _wait(lambda: "Successfully registered with master" in worker_log.read_text(errors="replace"),
                  "the Spark worker", worker_log, worker)
            yield url


@contextmanager
def connect_server(work: Path) -> Iterator[str]:
    """A Spark Connect server (embedded local[2] Spark) on loopback; yields its sc:// URL."""
    work.mkdir(parents=True, exist_ok=True)
    port, log = free_port(), work / "connect.log"
    args = [str(SPARK_HOME / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--master", "local[2]", "--conf", f"spark.connect.grpc.binding.port={port}",
            "--conf", f"spark.connect.grpc.binding.address={LOOPBACK}", "--conf", f"spark.driver.host={LOOPBACK}",
            "--conf", f"spark.driver.bindAddress={LOOPBACK}", "--conf", "spark.ui.enabled=false", "spark-internal"]
    with _process(args, log, _env(work)) as server:
        _wait(lambda: listening(port), "the Spark Connect server", log, server)
        yield f"sc://{LOOPBACK}:{port}"
