"""The write side of the `queuebox` data source: one task per DataFrame row.

Owns: mapping a row to (task data, put options), the per-partition writer (one
connection per partition, puts pipelined through the bundled blocking client with at
most `window` in flight), the driver-side tube check/creation, and the commit summary.
Must not touch server/, drivers/, storage/; talks to the server only through
clients.blocking.

Write options (`df.write.format("queuebox").mode("append").option(...).save()`):
    host, port        server address (default 127.0.0.1:3301); a router's address
                      for a sharded cluster behind routers
    addresses         "h1:p1,h2:p2": a primary + replicas set, puts follow the writable one
    etcdEndpoints     a sharded cluster without a router: each partition reads the
                      cluster map from etcd and puts straight to the shards
                      (the self-routing client, docs/cluster.md); replaces host/port
    etcdPrefix        with etcdEndpoints: the cluster's prefix (default /queuebox)
    user, password    credentials (default: guest)
    tube              the tube to put into (required)
    createTube        a tube type (fifo, fifottl, limfifottl, utube, utubettl): create
                      the tube if it does not exist; without it a missing tube is an error
    createTubeOptions JSON object of create_tube options (e.g. {"ttl": 60})
    window            puts in flight per partition (default 256)
    optionColumns     comma-separated columns used as put options (default: whichever of
                      pri, ttl, ttr, delay, utube exist; "" for none)
    maxFailures       rows allowed to fail before the job fails (default 0)
    summaryPath       file the commit writes its JSON summary to (optional)

Row -> task: the option columns become put options (null = not set); the remaining
columns are the data: the value itself when one column remains, else a map of
column name -> value. Timestamps/dates become ISO-8601 text, decimals floats, nested
rows maps, binary bytes.
"""

from __future__ import annotations

import datetime
import decimal
import json
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from queuebox.clients.pipeline.target import Target

OPTION_COLUMNS = ("pri", "ttl", "ttr", "delay", "utube")
TUBE_TYPES = ("fifo", "fifottl", "limfifottl", "utube", "utubettl")
DEFAULT_WINDOW = 256
CHUNK_ROWS = 4096  # rows handed to one pipelined batch
log = logging.getLogger("queuebox.pipeline")


@dataclass
class PartitionResult(WriterCommitMessage):  # type: ignore[misc]
    written: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)  # the first few distinct messages


def plain(value: Any) -> Any:
    """A Spark row value as something msgpack can carry."""
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if hasattr(value, "asDict"):
            return {k: plain(v) for k, v in value.asDict().items()}
        return [plain(v) for v in value]
    return value


class RowMapping:
    """Which columns are put options and which form the data."""

    def __init__(self, columns: list[str], option_columns: tuple[str, ...]) -> None:
        self.options = [c for c in columns if c in option_columns]
        self.data = [c for c in columns if c not in option_columns]
        if not self.data:
            raise ValueError("queuebox: no column is left for the task data")
        self.single = len(self.data) == 1

    def task(self, row: Any) -> tuple[Any, dict[str, Any]]:
        values = row.asDict()
        options = {c: plain(values[c]) for c in self.options if values[c] is not None}
        if "utube" in options:
            options["utube"] = str(options["utube"])
        if self.single:
            return plain(values[self.data[0]]), options
        return {c: plain(values[c]) for c in self.data}, options


def _settings(options: Any) -> dict[str, Any]:
    def get(name: str, default: Any = None) -> Any:
        value = options.get(name)
        return default if value is None else value

    tube = get("tube")
    if not tube:
        raise ValueError('queuebox: set the tube with .option("tube", NAME)')
    create = get("createTube")
    if create is not None and create not in TUBE_TYPES:
        raise ValueError(f"queuebox: createTube must be one of {', '.join(TUBE_TYPES)}")
    raw_columns = get("optionColumns")
    return {
        "target": Target.of_options(get),
        "tube": tube,
        "create": create,
        "create_options": json.loads(get("createTubeOptions", "{}")),
        "window": int(get("window", DEFAULT_WINDOW)),
        "option_columns": OPTION_COLUMNS
        if raw_columns is None
        else tuple(c.strip() for c in raw_columns.split(",") if c.strip()),
        "max_failures": int(get("maxFailures", 0)),
        "summary_path": get("summaryPath"),
    }


def ensure_tube(settings: dict[str, Any]) -> None:
    """Fail early, with a clear message, when the tube is missing (or create it)."""
    with settings["target"].connect() as conn:
        if conn.tube_exists(settings["tube"]):
            return
        if settings["create"] is None:
            raise ValueError(
                f"queuebox: tube {settings['tube']!r} does not exist on "
                f"{settings['target'].where()}; create it first or pass "
                f'.option("createTube", "fifo") (or another tube type)'
            )
        conn.create_tube(settings["tube"], settings["create"], **settings["create_options"])
        if not conn.tube_exists(settings["tube"]):
            raise RuntimeError(f"queuebox: could not create tube {settings['tube']!r}")


def _counted_put(tube: str, data: Any, options: dict[str, Any], result: PartitionResult) -> Any:
    """A put whose server error is counted instead of stopping the pipeline."""
    from queuebox.clients.calls import Call, modern

    def tolerate(error: Exception) -> bool:
        result.failed += 1
        message = str(error)
        if len(result.errors) < 5 and message not in result.errors:
            result.errors.append(message)
        return True

    def parse(reply: list[Any]) -> str:
        # A tolerated error parses an empty reply; limfifottl answers [nil] when full.
        if not reply:
            return "error"
        return "full" if reply[0] is None else "ok"

    put = modern.put(tube, data, options)
    return Call(put.function, put.args, parse, wait=put.wait, tolerate=tolerate)


class QueueboxWriter(DataSourceWriter):  # type: ignore[misc]
    def __init__(self, options: Any, schema: StructType) -> None:
        self.settings = _settings(options)
        self.mapping = RowMapping(schema.fieldNames(), self.settings["option_columns"])
        ensure_tube(self.settings)

    def write(self, iterator: Iterator[Any]) -> PartitionResult:
        result = PartitionResult()
        tube, window = self.settings["tube"], self.settings["window"]
        with self.settings["target"].connect() as conn:
            chunk: list[Any] = []
            for row in iterator:
                data, options = self.mapping.task(row)
                chunk.append(_counted_put(tube, data, options, result))
                if len(chunk) >= CHUNK_ROWS:
                    self._send(conn, chunk, window, result)
                    chunk = []
            if chunk:
                self._send(conn, chunk, window, result)
        return result

    @staticmethod
    def _send(conn: Any, calls: list[Any], window: int, result: PartitionResult) -> None:
        outcomes = conn.run_many(calls, window)
        result.written += outcomes.count("ok")
        # A put answered with nil (limfifottl stayed full) is a failure with no error.
        full = outcomes.count("full")
        if full:
            result.failed += full
            if "tube full (put answered nil)" not in result.errors:
                result.errors.append("tube full (put answered nil)")

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        summary = summarize(self.settings["tube"], messages)
        text = json.dumps(summary)
        print(f"queuebox: write committed: {text}", file=sys.stderr)
        if self.settings["summary_path"]:
            with open(self.settings["summary_path"], "w") as handle:
                handle.write(text + "\n")
        if summary["failed"] > self.settings["max_failures"]:
            raise RuntimeError(
                f"queuebox: {summary['failed']} of {summary['rows']} rows failed to enqueue "
                f"into {self.settings['tube']!r} ({summary['written']} were enqueued); "
                f"first errors: {summary['errors']}"
            )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        summary = summarize(self.settings["tube"], messages)
        print(f"queuebox: write aborted: {json.dumps(summary)}", file=sys.stderr)


def summarize(tube: str, messages: list[WriterCommitMessage | None]) -> dict[str, Any]:
    done = [m for m in messages if isinstance(m, PartitionResult)]
    errors: list[str] = []
    for message in done:
        errors += [e for e in message.errors if e not in errors]
    written = sum(m.written for m in done)
    failed = sum(m.failed for m in done)
    return {
        "tube": tube,
        "rows": written + failed,
        "written": written,
        "failed": failed,
        "partitions": len(messages),
        "partitions_failed": len(messages) - len(done),
        "errors": errors[:5],
    }
