"""Read a run's history (format v1, see docs/history.md) into a Spark DataFrame.

`history.parquet` is preferred when present (columnar, written at a clean end); otherwise
`history.jsonl`. Both are normalised to one explicit schema:

    index long, time long, process string, pid long (null for "nemesis"), type string,
    f string, value struct<key, value, offset, epoch, records[], sends[], keys[], seek, producer_id,
    producer_epoch>, error string

Malformed input raises HistoryError naming the file, the line (JSONL) or index (Parquet) and why.
A last JSONL line cut off mid-write (a SIGKILLed recorder) is not an error: it is dropped and
the history is marked truncated, which makes an otherwise clean verdict `unknown`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from harness.errors import HarnessError
from harness.history.format import CLIENT_FS, NAME, NEMESIS, NOT_NAMES, READ_FS, RESET_FS, SEEKS, TYPES as OP_TYPES, event_problem

RECORD = T.StructType(
    [T.StructField(n, T.LongType()) for n in ("key", "offset", "value", "epoch")]
)
SEND = T.StructType([T.StructField(n, T.LongType()) for n in ("key", "value", "offset", "epoch")])
VALUE = T.StructType(
    [
        T.StructField("key", T.LongType()),
        T.StructField("value", T.LongType()),
        T.StructField("offset", T.LongType()),
        T.StructField("epoch", T.LongType()),
        T.StructField("records", T.ArrayType(RECORD)),
        T.StructField("sends", T.ArrayType(SEND)),
        T.StructField("keys", T.ArrayType(T.LongType())),
        T.StructField("seek", T.StringType()),
        # f "producer": an idempotent producer's id and epoch (workloads/producer_ids.py)
        T.StructField("producer_id", T.LongType()),
        T.StructField("producer_epoch", T.LongType()),
    ]
)
# JSONL as read: `process` and `value` kept as raw JSON text (they differ in shape by `f`,
# e.g. process "nemesis" vs 3, nemesis values are free-form) and parsed in a second step.
RAW_JSONL = T.StructType(
    [
        T.StructField("index", T.LongType()),
        T.StructField("time", T.LongType()),
        T.StructField("process", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("f", T.StringType()),
        T.StructField("value", T.StringType()),
        T.StructField("error", T.StringType()),
        T.StructField("_corrupt", T.StringType()),
    ]
)
VALUE_FS = ("send", "poll", "txn", "assign", "subscribe", "producer")


# A Parquet history whose `value` is JSON text (harness/history/files.py writes it so) is parsed
# once and kept, as JSONL is: unkept, every scan of it parsed every value again. A 30 s run's
# 88,787 events, checked in one JVM alternating (2026-12-02, embedded, idle 2-core machine):
# warm checks 10.9, 12.8, 10.9, 9.1 s kept against 12.4, 12.9, 14.8, 11.3 s unkept.
PERSIST_TEXT = True  # bench/ A/B scripts may turn it off

# A value field that should hold an int (or null) but holds a string, a bool, an object, an
# array or a non-integral number. from_json nulls such a field instead of failing, and a null
# offset is legal, so without this rule `"offset": "7"` would pass Spark and fail the plain
# validator. One regex over the value's text; applied to client events only.
TYPE_RULE = True  # bench/bench_history_rules.py turns it off to measure what it costs


def _above(limit: str) -> str:
    """A regex for the digit strings of `limit`'s length that are greater than it."""
    alts = [limit[:i] + f"[{int(d) + 1}-9]" + (f"[0-9]{{{len(limit) - i - 1}}}" if i < len(limit) - 1 else "")
            for i, d in enumerate(limit) if d != "9"]
    return "|".join(alts)


# An integer outside int64, which from_json also reads as null (Hypothesis found `"epoch":
# -1180591620717411303424` in a txn invoke's records passing Spark and failing the plain validator):
# 20 digits or more, or 19 greater than 2^63-1 (or, negative, than 2^63).
BEYOND_INT64 = (r"(?:[1-9][0-9]{19,}|" + _above(str(2**63 - 1)) + r"|-(?:[1-9][0-9]{19,}|"
                + _above(str(2**63)) + r"))(?![0-9])")
WRONG_INT = (r'"(key|value|offset|epoch)"\s*:\s*("|t|f|\{|\[|-?[0-9]+[.eE]|' + BEYOND_INT64 + ")"
             + r'|"keys"\s*:\s*\[[^\]]*[^-0-9,\s\]]|"keys"\s*:\s*\[(?:[^\]]*[\s,])?' + BEYOND_INT64)


# Where the rules a HistoryError's text refers to are written.
HISTORY_HINT = "the history format is docs/history.md; config.json's fields are in docs/checker.md"


class HistoryError(HarnessError):
    """The history cannot be checked: missing, unreadable or malformed (exit code 2). Its text
    names the file, the line or index and what is wrong; the hint says where the rules are."""

    def __init__(self, message: str, hint: str = HISTORY_HINT) -> None:
        super().__init__(message, hint)


@dataclass
class History:
    events: DataFrame
    path: Path
    format: str  # "jsonl" | "parquet"
    truncated: bool  # a cut-off last line was dropped
    count: int
    op_stats: dict[str, dict[str, int]]  # f → {invoke, ok, fail, info} counts
    cached: DataFrame | None = None  # the persisted parse, to unpersist when done

    def release(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()


# ---------------------------------------------------------------------------- error path (plain Python)
def scan_jsonl(path: Path) -> tuple[int, str] | None:
    """First bad line (1-based line number, reason) of a JSONL history, or None. Error path only:
    a streaming plain-Python pass, so it never holds the history in memory."""
    last_index = None
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, start=1):
            line = raw.strip()
            if not line:
                return n, "empty line"
            try:
                e = json.loads(line)
            except ValueError as err:
                if not raw.endswith(b"\n"):
                    return None  # a cut-off last line: truncation, not malformation
                return n, f"not valid JSON ({err})"
            problem = event_problem(e)
            if problem:
                return n, problem
            if last_index is not None and e["index"] <= last_index:
                return n, f"index {e['index']} does not increase (previous line had {last_index})"
            if last_index is not None and e["index"] > last_index + 1:
                # Named by the line before the gap, which is where it is: naming the next line
                # (as this once did) blames a line that is fine (issue 19).
                missing = f"index {last_index + 1}" if e["index"] == last_index + 2 else f"indexes {last_index + 1}..{e['index'] - 1}"
                return n - 1, (f"a gap after this line's index {last_index}: the next line (line {n}) has index "
                               f"{e['index']}, so {missing} missing (was a line removed?)")
            last_index = e["index"]
    return None


def _cut_off_tail(path: Path) -> str | None:
    """The text of a last line that has no newline and does not parse (a recorder killed
    mid-write), else None."""
    size = path.stat().st_size
    if size == 0:
        return None
    with open(path, "rb") as fh:
        fh.seek(max(0, size - (1 << 20)))
        tail = fh.read()
    if tail.endswith(b"\n"):
        return None
    last = tail.rsplit(b"\n", 1)[-1]
    try:
        json.loads(last)
        return None
    except ValueError:
        return last.decode("utf-8", "replace")


# ---------------------------------------------------------------------------- Spark side
def _has_null(arr: Column) -> Column:
    """Whether an array holds a null element. Array set operations treat null as an element, so
    this stays in generated code (a lambda in `exists` is interpreted, row by row: on the records
    of a large history that was most of the load time)."""
    return F.size(F.array_intersect(arr, F.array(F.lit(None).cast(T.LongType())))) > 0


def _problem_column(df: DataFrame, has_corrupt: bool, value_text: Column | None) -> Column:
    """Spark twin of `harness.history.event_problem`: a reason string for rows the checker cannot
    use. `value_text` is the value's JSON text when the source holds it (JSONL, our Parquet)."""
    v, f, type_ = F.col("value"), F.col("f"), F.col("type")
    client = F.col("process") != F.lit(NEMESIS)
    # A null record or send has null fields too (array<struct>.field yields null for it).
    rec_bad = lambda a: _has_null(a["key"]) | _has_null(a["offset"]) | _has_null(a["value"])  # noqa: E731
    send_bad = lambda a: _has_null(a["key"]) | _has_null(a["value"])  # noqa: E731
    c = F.when(F.lit(False), F.lit(None))
    if has_corrupt:
        c = c.when(F.col("_corrupt").isNotNull(), F.lit("not valid JSON, or a field has the wrong type"))
    c = (
        c.when(F.col("index").isNull() | (F.col("index") < 0), F.lit("field 'index' must be a non-negative int"))
        .when(F.col("time").isNull() | (F.col("time") < 0), F.lit("field 'time' must be a non-negative int"))
        .when(F.col("process").isNull(), F.lit("field 'process' is missing"))
        .when(~type_.isin(*OP_TYPES) | type_.isNull(), F.lit("field 'type' is not invoke/ok/fail/info"))
        .when(f.isNull(), F.lit("field 'f' is missing"))
        .when(~f.rlike(NAME) | f.isin(*NOT_NAMES), F.lit("field 'f' must be a name"))
        .when(client & ~f.isin(*CLIENT_FS), F.lit(f"a client event's f must be one of {', '.join(CLIENT_FS)}"))
    )
    if value_text is not None:
        c = c.when(client & f.isin(*CLIENT_FS) & value_text.rlike(WRONG_INT),
                   F.lit("a value field that must be an int holds something else"))
    seeks = [s for s in SEEKS if s is not None]
    return (
        c.when(client & (f == "send") & (v.isNull() | v["key"].isNull() | v["value"].isNull()),
               F.lit("a send's value must be {key: int, value: int, ...}"))
        .when(client & f.isin(*READ_FS) & (type_ == "ok") & (v.isNull() | v["records"].isNull() | rec_bad(v["records"])),
              F.lit("an ok poll/txn must hold records of {key: int, offset: int, value: int}"))
        .when(client & (f == "txn") & (type_ != "invoke") & (v.isNull() | v["sends"].isNull() | send_bad(v["sends"])),
              F.lit("a txn completion must hold sends of {key: int, value: int, ...}"))
        .when(client & f.isin(*RESET_FS) & (v.isNull() | v["keys"].isNull() | _has_null(v["keys"])
                                            | (v["seek"].isNotNull() & ~v["seek"].isin(*seeks))),
              F.lit("an assign/subscribe must hold keys [int, ...] and a seek of beginning, committed or null"))
    )


def _normalise_value(df: DataFrame) -> Column:
    """`value` as the VALUE struct whether the source holds JSON text or a (partial) struct."""
    dtype = df.schema["value"].dataType
    wanted = F.col("f").isin(*VALUE_FS)
    if isinstance(dtype, T.StringType):
        return F.when(wanted, F.from_json(F.col("value"), VALUE))
    if dtype == VALUE:
        # Already typed (e.g. history_parquet's layout): passed through as is. Every reader
        # filters on `f` first, and a CASE around the struct would cost nested-column pruning: a
        # projection referencing it twice keeps it whole, so a scan of sends would read every
        # poll's records too.
        return F.col("value")
    if isinstance(dtype, T.StructType):
        # A struct written by another tool: rebuild field by field so missing fields become null.
        have = {f.name: f.dataType for f in dtype.fields}

        def field(name: str, typ: T.DataType) -> Column:
            if name not in have:
                return F.lit(None).cast(typ)
            col = F.col("value")[name]
            if have[name] == typ:
                return col  # already the wanted type: no per-element rebuild (an interpreted lambda)
            if isinstance(typ, T.ArrayType) and isinstance(typ.elementType, T.StructType):
                inner = have[name].elementType if isinstance(have[name], T.ArrayType) else None
                names = {f.name for f in inner.fields} if isinstance(inner, T.StructType) else set()
                return F.transform(col, lambda x: F.struct(*[
                    (x[s.name] if s.name in names else F.lit(None)).cast(s.dataType).alias(s.name)
                    for s in typ.elementType.fields]))
            return col.cast(typ)

        # No CASE on `f` around the rebuilt struct, as none around a VALUE one (above): a field of
        # a struct built here is the source's own column to the optimiser, so a scan reads only the
        # fields its query takes. Under `when(wanted, ...)` every scan read every field: the
        # bench's history (a struct without the producer fields) read each poll's records in its
        # scans of sends, assigns and txns too.
        return F.struct(*[field(s.name, s.dataType).alias(s.name) for s in VALUE.fields])
    raise HistoryError(f"column 'value' has type {dtype.simpleString()}; expected JSON text or a struct")


def _normalise(df: DataFrame) -> DataFrame:
    proc = F.col("process").cast("string")
    cols = [
        F.col("index").cast("long").alias("index"),
        F.col("time").cast("long").alias("time"),
        proc.alias("process"),
        # Numeric process ids; "nemesis" (and anything else non-numeric) becomes null.
        F.when(proc.rlike(r"^-?[0-9]+$"), proc.cast("long")).alias("pid"),
        F.col("type"),
        F.col("f"),
        _normalise_value(df).alias("value"),
        (F.col("error") if "error" in df.columns else F.lit(None).cast("string")).alias("error"),
    ]
    if "_corrupt" in df.columns:
        cols.append(F.col("_corrupt"))
    if isinstance(df.schema["value"].dataType, T.StringType):
        cols.append(F.col("value").alias("_value_text"))  # for the type rules; dropped once validated
    return df.select(*cols)


def event_problems(spark: SparkSession, jsonl: Path | str) -> DataFrame:
    """Each event of JSONL file(s) as the loader judges it: columns `file` (the source file, so a
    caller can name events by file) and `problem` (null when the checker can use the event). The
    loader's per-event rules laid bare, so that tests can hold them to `event_problem` on events
    that Hypothesis makes up (tests/analysis/test_validation_agreement.py)."""
    raw = spark.read.schema(RAW_JSONL).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", "_corrupt").json(str(jsonl))
    events = _normalise(raw)
    text = F.col("_value_text") if TYPE_RULE and "_value_text" in events.columns else None
    # input_file_name() is evaluated in the scan's task, through these projections (no shuffle).
    return events.select(F.input_file_name().alias("file"), _problem_column(events, True, text).alias("problem"))


def find_history(run_dir: Path) -> tuple[Path, str]:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise HistoryError(f"{run_dir}: not a directory; pass a run directory holding history.jsonl or history.parquet")
    for name, fmt in (("history.parquet", "parquet"), ("history.jsonl", "jsonl")):
        p = run_dir / name
        if p.is_file():
            return p, fmt
    raise HistoryError(f"{run_dir}: no history.jsonl or history.parquet; is this a run directory?")


def load_history(spark: SparkSession, run_dir: Path | str, prefer: str | None = None) -> History:
    """Load and validate a run's history. `prefer` ("jsonl"/"parquet") overrides the default
    choice when both files exist."""
    path, fmt = find_history(Path(run_dir))
    if prefer and (Path(run_dir) / f"history.{prefer}").is_file():
        path, fmt = Path(run_dir) / f"history.{prefer}", prefer
    if not os.access(path, os.R_OK):
        raise HistoryError(f"{path}: not readable; check its permissions")
    truncated = False
    if fmt == "jsonl":
        tail = _cut_off_tail(path)
        truncated = tail is not None
        raw = (
            spark.read.schema(RAW_JSONL)
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", "_corrupt")
            .json(str(path))
        )
        if tail is not None:
            raw = raw.filter(F.col("_corrupt").isNull() | (F.col("_corrupt") != F.lit(tail.rstrip("\r"))))
    else:
        try:
            raw = spark.read.parquet(str(path))
        except Exception as err:  # noqa: BLE001 - Spark raises many kinds; all mean unreadable
            raise HistoryError(f"{path}: not a readable Parquet file ({str(err).splitlines()[0]})") from err
        missing = [c for c in ("index", "time", "process", "type", "f", "value") if c not in raw.columns]
        if missing:
            raise HistoryError(f"{path}: missing column(s) {', '.join(missing)}; history format v1 needs them")
    events = _normalise(raw)
    text = F.col("_value_text") if TYPE_RULE and "_value_text" in events.columns else None
    # The text is dropped at once (before the persist below): _problem is computed from it in the same projection.
    events = events.withColumn("_problem", _problem_column(events, "_corrupt" in events.columns, text)).drop("_value_text")
    cached = None
    if fmt == "jsonl" or (PERSIST_TEXT and isinstance(raw.schema["value"].dataType, T.StringType)):
        # Parsing JSON text dominates a check of it (JSONL, or Parquet holding the text): parse once,
        # reuse for every anomaly.
        events = cached = events.persist(StorageLevel.MEMORY_AND_DISK)
    # One pass validates and counts ops per (f, type): a handful of groups, summed here.
    groups = events.groupBy("f", "type").agg(
        F.count(F.lit(1)).alias("n"),
        F.min("index").alias("lo"),
        F.max("index").alias("hi"),
        F.count("_problem").alias("bad"),
    ).collect()
    n, bad = sum(g["n"] for g in groups), sum(g["bad"] for g in groups)
    lo = min((g["lo"] for g in groups if g["lo"] is not None), default=None)
    hi = max((g["hi"] for g in groups if g["hi"] is not None), default=None)
    if bad or (n and hi - lo + 1 != n):
        if cached is not None:
            cached.unpersist()
        raise HistoryError(_describe_problem(events, path, fmt, bad, n, lo, hi))
    events = events.drop("_problem", *(["_corrupt"] if "_corrupt" in events.columns else []))
    op_stats: dict[str, dict[str, int]] = {}
    for g in groups:
        op_stats.setdefault(g["f"], dict.fromkeys(OP_TYPES, 0))[g["type"]] = g["n"]
    return History(events=events, path=path, format=fmt, truncated=truncated, count=n,
                   op_stats=dict(sorted(op_stats.items())), cached=cached)


def _describe_problem(events: DataFrame, path: Path, fmt: str, bad: int, n: int, lo: int, hi: int) -> str:
    fix = "fix or remove that line (history format v1: docs/history.md)"
    if fmt == "jsonl":
        found = scan_jsonl(path)
        if found:
            line, why = found
            return f"{path}: line {line}: {why}; {fix}"
    if bad:
        first = events.filter(F.col("_problem").isNotNull()).select("index", "_problem").limit(1).collect()[0]
        return f"{path}: event with index {first['index']}: {first['_problem']} ({bad} bad event(s) in all)"
    return (f"{path}: indexes run {lo}..{hi} over {n} events; they must be 0,1,2,... with no gaps "
            "or repeats (was the file concatenated or edited?)")
