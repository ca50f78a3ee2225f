"""Across runs: every `<store>/<run>/results.json` aggregated by Kafka version, nemesis set,
workload and client profile (runs, verdicts, anomaly counts and rates, the longest stretch of a fault
band with no ok write and no ok read), overall and per day.
Writes `runs/`, `groups/` and `daily/` as Parquet plus `summary.json` for the dashboard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from analysis.rules.registry import ANOMALIES
from analysis.checking.results_file import run_dirs
from harness.errors import HarnessError

GROUP = ["kafka_version", "nemesis", "workload", "profile"]

RESULTS_SCHEMA = T.StructType([
    T.StructField("verdict", T.StringType()),
    T.StructField("checked_at", T.StringType()),
    T.StructField("counts", T.StructType([T.StructField(a, T.LongType()) for a in ANOMALIES])),
    T.StructField("headline", T.StructType([T.StructField(h, T.LongType())
                                            for h in ("lost", "duplicated", "reordered", "diverged")])),
    T.StructField("history", T.StructType([T.StructField("events", T.LongType())])),
    T.StructField("unavailability", T.StructType([T.StructField("bands", T.ArrayType(T.StructType([
        T.StructField("operation", T.BooleanType()), T.StructField("no_write_s", T.DoubleType()),
        T.StructField("no_read_s", T.DoubleType())])))])),
    T.StructField("run", T.StructType([
        T.StructField("seed", T.LongType()), T.StructField("kafka_version", T.StringType()),
        T.StructField("workload", T.StringType()), T.StructField("profile", T.StringType()),
        T.StructField("nemesis", T.ArrayType(T.StringType())), T.StructField("upgrade_to", T.StringType())])),
])


class TrendsError(HarnessError):
    """The store cannot be aggregated (exit code 2)."""

    def __init__(self, message: str, hint: str = "check the runs first: python -m analysis check RUN_DIR") -> None:
        super().__init__(message, hint)


def _col(a: str) -> str:
    return a.replace("-", "_")


def load_runs(spark: SparkSession, store: str) -> DataFrame:
    """One row per checked run: its group, verdict, counts and event count."""
    # Every checked run of the store and of the shard stores inside it (analysis/checking/results_file.py run_dirs).
    paths = [str(d / "results.json") for d in run_dirs(Path(store)) if (d / "results.json").exists()] if Path(store).is_dir() else []
    try:
        raw = spark.read.schema(RESULTS_SCHEMA).option("multiLine", "true").json(paths or store.rstrip("/") + "/*/results.json")
    except Exception as err:  # noqa: BLE001 - e.g. "Path does not exist"
        raise TrendsError(f"{store}: no checked runs found ({str(err).splitlines()[0]}); run "
                          "`python -m analysis check RUN_DIR` on the runs first") from err
    return raw.select(
        F.regexp_extract(F.input_file_name(), r"([^/]+)/results\.json$", 1).alias("run_id"),
        F.to_timestamp("checked_at").alias("checked_at"),
        # An upgrade run is filed under `A→B`, as the dashboard's rows are (analysis/report/dashboard.py).
        F.concat(F.coalesce(F.col("run.kafka_version"), F.lit("unknown")),
                 F.coalesce(F.concat(F.lit("→"), F.col("run.upgrade_to")), F.lit(""))).alias("kafka_version"),
        F.coalesce(F.array_join(F.array_sort("run.nemesis"), "+"), F.lit("")).alias("nemesis"),
        F.coalesce(F.col("run.workload"), F.lit("unknown")).alias("workload"),
        F.coalesce(F.col("run.profile"), F.lit("safe")).alias("profile"),
        "verdict",
        F.col("history.events").alias("events"),
        *[F.col(f"counts.`{a}`").alias(_col(a)) for a in ANOMALIES],
        *[F.col(f"headline.{h}").alias(h) for h in ("lost", "duplicated", "reordered", "diverged")],
        # The longest stretch of any fault band with no ok write / read (analysis/checking/unavailability.py).
        F.array_max(F.transform("unavailability.bands", lambda b: b["no_write_s"])).alias("max_no_write_s"),
        F.array_max(F.transform("unavailability.bands", lambda b: b["no_read_s"])).alias("max_no_read_s"),
    )


def aggregate(runs: DataFrame, by: list[str]) -> DataFrame:
    """Runs, verdict tallies, anomaly totals, the share of runs with each anomaly, and anomalies
    per million events."""
    aggs = [
        F.count(F.lit(1)).alias("runs"),
        *[F.sum((F.col("verdict") == v).cast("long")).alias(v) for v in ("valid", "invalid", "unknown")],
        F.sum("events").alias("events"),
        F.max("max_no_write_s").alias("max_no_write_s"), F.max("max_no_read_s").alias("max_no_read_s"),
    ]
    for a in ANOMALIES:
        c = _col(a)
        aggs += [F.sum(c).alias(c), F.avg((F.col(c) > 0).cast("double")).alias(f"{c}_run_rate")]
    out = runs.groupBy(*by).agg(*aggs)
    for a in ANOMALIES:
        c = _col(a)
        out = out.withColumn(f"{c}_per_million_events",
                             F.when(F.col("events") > 0, F.col(c) * 1e6 / F.col("events")))
    return out.orderBy(*by)


def build_trends(spark: SparkSession, store: str, out: str | None = None) -> dict[str, Any]:
    out = out or store.rstrip("/") + "/_trends"
    runs = load_runs(spark, store).cache()
    n = runs.count()
    if n == 0:
        raise TrendsError(f"{store}: no <run>/results.json found; check the runs first")
    groups = aggregate(runs, GROUP)
    daily = aggregate(runs.withColumn("day", F.to_date("checked_at")), ["day", *GROUP])
    runs.write.mode("overwrite").parquet(f"{out}/runs")
    groups.write.mode("overwrite").parquet(f"{out}/groups")
    daily.write.mode("overwrite").parquet(f"{out}/daily")
    summary = {
        "runs": n,
        "out": out,
        "groups": [r.asDict() for r in groups.collect()],  # one row per group: small
        "daily": [{**r.asDict(), "day": str(r["day"])} for r in daily.collect()],
    }
    text = json.dumps(summary, indent=2, default=str) + "\n"
    if "://" in out and not out.startswith("file://"):
        spark.createDataFrame([(text,)], "value string").coalesce(1).write.mode("overwrite").text(f"{out}/summary.json")
    else:
        path = Path(out.removeprefix("file://")) / "summary.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    runs.unpersist()
    return summary
