"""`queuebox pipeline report`: run the lifecycle job and write its outputs.

Owns: the output directory layout of a report run --

    records_by_op.parquet/ records per kind (wal/snap), tube and op
    events.parquet/        one row per task change (lifecycle.events)
    tasks.parquet/         one row per task incarnation (lifecycle.task_lives)
    buckets.parquet/       per tube and time bucket (lifecycle.buckets)
    totals.parquet/        per tube over the whole log (lifecycle.totals)
    summary.json           totals, record counts and buckets, machine-readable
    summary.md             the same for people
    throughput.png         events per second over time, per tube and metric
    wait_times.png         histogram of put -> first take, per tube

Must not touch: server/, drivers/, storage/; sockets.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Sequence
from functools import reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any

from queuebox.clients.cli.tables import markdown_table
from queuebox.clients.pipeline import charts, lifecycle
from queuebox.clients.pipeline.classify import METRICS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SUMMARY_BUCKET_ROWS = 60  # rows of the per-bucket table printed per tube in summary.md


def _records(spark: SparkSession, data_dir: str, tube: str | None) -> DataFrame:
    reader = spark.read.format("queuebox").option("path", data_dir)
    return (reader if tube is None else reader.option("tube", tube)).load()


def run_report(
    spark: SparkSession,
    data_dirs: str | Path | Sequence[str | Path],
    out_dir: str | Path,
    bucket_seconds: float = 60.0,
    tube: str | None = None,
) -> dict[str, Any]:
    """Read `data_dirs` (one server's, or one per shard of a sharded cluster: task ids
    name their shard, so the shards' records never share a task), compute the
    lifecycle tables, write them under `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dirs = [str(data_dirs)] if isinstance(data_dirs, str | Path) else [str(d) for d in data_dirs]
    frames = [_records(spark, d, tube) for d in dirs]
    records = reduce(lambda a, b: a.unionByName(b), frames).cache()
    events = lifecycle.events(records).cache()
    lives = lifecycle.task_lives(events)
    by_bucket = lifecycle.buckets(events, bucket_seconds)
    per_tube = lifecycle.totals(events, lives)
    by_op = records.groupBy("kind", "tube", "op").count().orderBy("kind", "tube", "op")

    for name, frame in (
        ("records_by_op", by_op),
        ("events", events),
        ("tasks", lives),
        ("buckets", by_bucket),
        ("totals", per_tube),
    ):
        frame.write.mode("overwrite").parquet(str(out / f"{name}.parquet"))

    tube_records, internal = split_records(
        _rows(spark.read.parquet(str(out / "records_by_op.parquet")))
    )
    summary: dict[str, Any] = {
        "data_dirs": dirs,
        "bucket_seconds": bucket_seconds,
        "records": tube_records,
        "internal_records": internal,
        "totals": _rows(spark.read.parquet(str(out / "totals.parquet"))),
        "buckets": _rows(
            spark.read.parquet(str(out / "buckets.parquet"))
            .drop("bucket")
            .orderBy("tube", "bucket_ts")
        ),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(markdown(summary))
    charts.throughput(summary["buckets"], bucket_seconds, out / "throughput.png")
    charts.wait_histogram(*_wait_histogram(events), out / "wait_times.png")
    records.unpersist()
    events.unpersist()
    return summary


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [{k: _clean(v) for k, v in row.asDict().items()} for row in frame.collect()]


def _wait_histogram(events: DataFrame) -> tuple[dict[str, list[tuple[float, int]]], float]:
    """Per tube: (bin centre seconds, count) of first-take waits, binned over the
    overall range by charts.histogram_layout; and the bin width."""
    from pyspark.sql import functions as F

    waits = events.where(F.col("wait_s").isNotNull()).select("tube", "wait_s")
    bounds = waits.agg(F.min("wait_s"), F.max("wait_s")).first()
    if bounds is None or bounds[0] is None:
        return {}, 1.0
    start, width = charts.histogram_layout(float(bounds[0]), float(bounds[1]))
    last = charts.HISTOGRAM_BINS - 1  # the maximum itself falls on the last bin's edge
    index = F.least(F.floor((F.col("wait_s") - start) / width), F.lit(last))
    counts = waits.groupBy("tube", index.alias("bin")).count().orderBy("tube", "bin").collect()
    histogram: dict[str, list[tuple[float, int]]] = {}
    for row in counts:
        centre = start + (row["bin"] + 0.5) * width
        histogram.setdefault(row["tube"], []).append((centre, row["count"]))
    return histogram, width


def split_records(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(records of tubes, internal records) from the records_by_op rows. Internal
    records have no tube: space definitions (`create_space`) and the rows of system
    spaces such as the `_queue` registry; they are no task events."""
    return [r for r in rows if r["tube"] is not None], [r for r in rows if r["tube"] is None]


def _utc(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[
        :-3
    ]


def _seconds(value: Any) -> str:
    return "" if value is None else f"{value:.3f}"


def markdown(summary: dict[str, Any]) -> str:
    """The human-readable report of a `run_report` summary."""
    metrics = list(METRICS)
    lines = [
        "# queuebox task lifecycle report",
        "",
        f"Data: {', '.join(f'`{d}`' for d in summary['data_dirs'])}; "
        f"bucket: {summary['bucket_seconds']} s.",
        "Times are seconds: wait = put -> first take, run = last take -> ack.",
        "",
        "## Records read",
        "",
    ]
    lines += markdown_table(
        ["kind", "tube", "op", "records"],
        [[r["kind"], r["tube"], r["op"], r["count"]] for r in summary["records"]],
    )
    internal = summary.get("internal_records", [])
    if internal:
        kinds = ", ".join(f"{r['kind']} {r['op']} {r['count']}" for r in internal)
        total = sum(r["count"] for r in internal)
        lines += ["", f"Also read: {total} internal records, not tube events ({kinds})."]
    lines += ["", "## Per tube", ""]
    header = ["tube", *metrics, "tasks", "attempts mean", "attempts max"]
    header += ["wait p50", "wait p95", "wait max", "run p50", "run p95", "run max"]
    rows = []
    for t in summary["totals"]:
        row = [t["tube"], *(t[m] for m in metrics), t["tasks"] or 0]
        row += [_seconds(t["attempts_mean"]), t["attempts_max"] or 0]
        row += [_seconds(t[f"{k}_{p}"]) for k in ("wait_s", "run_s") for p in ("p50", "p95", "max")]
        rows.append(row)
    lines += markdown_table(header, rows)
    for tube in sorted({b["tube"] for b in summary["buckets"]}):
        lines += ["", f"## Tube `{tube}` by bucket", ""]
        picked = [b for b in summary["buckets"] if b["tube"] == tube]
        shown = picked[:SUMMARY_BUCKET_ROWS]
        lines += markdown_table(
            ["bucket start (UTC)", *metrics, "wait p50", "run p50"],
            [
                [_utc(b["bucket_ts"]), *(b[m] for m in metrics)]
                + [_seconds(b["wait_s_p50"]), _seconds(b["run_s_p50"])]
                for b in shown
            ],
        )
        if len(picked) > len(shown):
            lines.append(f"\n({len(picked) - len(shown)} more buckets in buckets.parquet)")
    lines += ["", "![throughput](throughput.png)", "", "![wait times](wait_times.png)", ""]
    return "\n".join(lines)
