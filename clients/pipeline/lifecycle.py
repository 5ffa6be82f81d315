"""The task-lifecycle job: WAL/snapshot records -> events, tasks and time buckets.

Owns: the Spark transformations from the record rows of `schema.RECORD_COLUMNS` to
    events  -- one row per task change, with its event name (classify.RULES), the
               task's incarnation, `wait_s` on a task's first take (put -> first take)
               and `run_s` on an ack (last take -> ack);
    tasks   -- one row per task incarnation: put/first take/end times, attempts
               (number of takes), releases, wait and run times, how it ended;
    buckets -- per tube and time bucket: each metric of classify.METRICS and the wait
               and run time distribution (mean, p50, p95, max);
    totals  -- the same per tube over the whole log.
Must not touch files (report.py writes the outputs), sockets, server/ or storage/.

Ids are reused by the queue, so a task is (tube, task_id, incarnation), where an
incarnation starts at each insert (or at a snapshot row with no earlier history).
Snapshot rows only give the state a task had when older WAL files are gone; events
come from WAL records alone. Times are epoch seconds (double) in the outputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from queuebox.clients.pipeline.classify import FINAL_EVENTS, METRICS, RULES, Rule

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Positions of `ttl` (µs) and `created` (epoch µs) in a ttl driver's task tuple
# (fifottl, limfifottl, utubettl): id, status, next_event, ttl, ttr, pri, created, ...
TTL_FIELD, CREATED_FIELD, TTL_TUPLE_MIN = 3, 6, 8
PERCENTILES = (0.5, 0.95)


def _rule_condition(rule: Rule, cols: dict[str, Column]) -> Column:
    from pyspark.sql import functions as F

    condition = F.lit(True)
    if rule.op is not None:
        condition = condition & (cols["op"] == rule.op)
    for name, allowed in (("before", rule.before), ("after", rule.after), ("call", rule.calls)):
        if allowed is not None:
            condition = condition & F.coalesce(cols[name].isin(*sorted(allowed)), F.lit(False))
    if rule.ttl_passed is not None:
        condition = condition & (cols["ttl_passed"] == F.lit(rule.ttl_passed))
    return condition


def event_column(cols: dict[str, Column]) -> Column:
    """RULES compiled into one CASE expression (first matching rule wins)."""
    from pyspark.sql import functions as F

    expr: Any = F
    for rule in RULES:
        expr = expr.when(_rule_condition(rule, cols), F.lit(rule.event))
    return expr.otherwise(F.lit("other"))


def _ttl_passed(records: DataFrame) -> Column:
    from pyspark.sql import functions as F

    ttl = F.get_json_object("tuple", f"$[{TTL_FIELD}]").cast("double")
    created = F.get_json_object("tuple", f"$[{CREATED_FIELD}]").cast("double")
    long_enough = F.coalesce(F.json_array_length("tuple") >= TTL_TUPLE_MIN, F.lit(False))
    passed = F.unix_micros("time").cast("double") >= created + ttl
    return long_enough & F.coalesce(passed, F.lit(False))


def events(records: DataFrame) -> DataFrame:
    """One row per WAL change of a task, classified, with incarnation and wait/run times."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    tasks = records.where(F.col("tube").isNotNull() & F.col("task_id").isNotNull())
    tasks = tasks.where(F.col("op").isin("insert", "replace", "delete"))
    # A snapshot row with LSN n holds the state after record n: order it after that record.
    order = [F.col("lsn"), F.when(F.col("kind") == "snap", 1).otherwise(0), F.col("offset")]
    by_task = Window.partitionBy("tube", "task_id").orderBy(*order)
    prior = F.lag("status").over(by_task)
    starts = (F.col("kind") == "wal") & (F.col("op") == "insert") | (F.col("kind") == "snap") & (
        prior.isNull() | (prior == "-")
    )
    tasks = tasks.withColumn("ts", F.unix_micros("time") / F.lit(1e6))
    tasks = tasks.withColumn("before", F.coalesce("old_status", prior))
    tasks = tasks.withColumn("ttl_passed", _ttl_passed(tasks))
    tasks = tasks.withColumn("incarnation", F.sum(F.when(starts, 1).otherwise(0)).over(by_task))
    cols = {
        "op": F.col("op"),
        "before": F.col("before"),
        "after": F.col("status"),
        "call": F.col("call"),
        "ttl_passed": F.col("ttl_passed"),
    }
    changes = tasks.where(F.col("kind") == "wal").withColumn("event", event_column(cols))
    life = Window.partitionBy("tube", "task_id", "incarnation")
    upto = life.orderBy("lsn").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    is_take = F.col("event") == "take"
    changes = changes.withColumn(
        "put_ts", F.min(F.when(F.col("event") == "put", F.col("ts"))).over(life)
    )
    changes = changes.withColumn("take_no", F.sum(F.when(is_take, 1).otherwise(0)).over(upto))
    changes = changes.withColumn("last_take_ts", F.max(F.when(is_take, F.col("ts"))).over(upto))
    first_take = is_take & (F.col("take_no") == 1)
    changes = changes.withColumn("wait_s", F.when(first_take, F.col("ts") - F.col("put_ts")))
    changes = changes.withColumn(
        "run_s", F.when(F.col("event") == "ack", F.col("ts") - F.col("last_take_ts"))
    )
    return changes.select(
        "tube", "task_id", "incarnation", "lsn", "time", "ts", "op", "before",
        F.col("status").alias("after"), "call", "event", "wait_s", "run_s", "data",
    )  # fmt: skip


def task_lives(events_df: DataFrame) -> DataFrame:
    """One row per task incarnation seen in the WAL."""
    from pyspark.sql import functions as F

    ev = F.col("event")
    final = ev.isin(*FINAL_EVENTS)
    return events_df.groupBy("tube", "task_id", "incarnation").agg(
        F.min(F.when(ev == "put", F.col("ts"))).alias("put_ts"),
        F.min(F.when(ev == "take", F.col("ts"))).alias("first_take_ts"),
        F.max(F.when(final, F.col("ts"))).alias("end_ts"),
        F.max_by(F.when(final, ev), F.when(final, F.col("lsn"))).alias("end_event"),
        F.count(F.when(ev == "take", 1)).alias("attempts"),
        F.count(F.when(ev.isin(*METRICS["released"]), 1)).alias("releases"),
        F.count(F.when(ev == "bury", 1)).alias("buries"),
        F.max("wait_s").alias("wait_s"),
        F.max("run_s").alias("run_s"),
    )


def _metric_columns() -> list[Column]:
    from pyspark.sql import functions as F

    return [
        F.count(F.when(F.col("event").isin(*names), 1)).alias(metric)
        for metric, names in METRICS.items()
    ]


def _distribution(column: str) -> list[Column]:
    from pyspark.sql import functions as F

    col = F.col(column)
    stats = [F.avg(col).alias(f"{column}_mean")]
    for p in PERCENTILES:
        label = f"p{round(p * 100)}"
        stats.append(F.percentile_approx(col, p, 10000).alias(f"{column}_{label}"))
    stats.append(F.max(col).alias(f"{column}_max"))
    return stats


def buckets(events_df: DataFrame, bucket_seconds: float) -> DataFrame:
    """Per tube and bucket (start second, as epoch seconds and timestamp): metrics + times."""
    from pyspark.sql import functions as F

    if bucket_seconds <= 0:
        raise ValueError("bucket must be a positive number of seconds")
    width = F.lit(float(bucket_seconds))
    start = F.floor(F.col("ts") / width) * width
    grouped = events_df.withColumn("bucket_ts", start.cast("double")).groupBy("tube", "bucket_ts")
    table = grouped.agg(*_metric_columns(), *_distribution("wait_s"), *_distribution("run_s"))
    table = table.withColumn("bucket", F.timestamp_micros((F.col("bucket_ts") * 1e6).cast("long")))
    return table.orderBy("tube", "bucket_ts")


def totals(events_df: DataFrame, lives: DataFrame) -> DataFrame:
    """Per tube over the whole log: metrics, wait/run distributions, attempts."""
    from pyspark.sql import functions as F

    counts = events_df.groupBy("tube").agg(
        *_metric_columns(), *_distribution("wait_s"), *_distribution("run_s")
    )
    attempts = lives.groupBy("tube").agg(
        F.count(F.lit(1)).alias("tasks"),
        F.avg("attempts").alias("attempts_mean"),
        F.max("attempts").alias("attempts_max"),
        F.count(F.when(F.col("attempts") > 1, 1)).alias("tasks_retried"),
    )
    return counts.join(attempts, "tube", "left").orderBy("tube")
