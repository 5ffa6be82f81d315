"""The `queuebox` Spark data source (PySpark 4 Python Data Source API).

Owns: `QueueboxDataSource` -- its read side (WAL segments and snapshots of a data
directory as rows of schema.RECORD_COLUMNS, split into partitions) and its option
parsing. The write side lives in `sink.py`. Must not touch server/, drivers/,
storage/. Runs inside Spark's Python workers: everything it needs travels with it.

Read options (`spark.read.format("queuebox").option(...).load()`):
    path        the data directory (required; `load(path)` works too)
    tube        keep only the records of this space/tube
    snapshots   latest (default: the newest complete snapshot), all, none
    splitBytes  byte-range size of one partition (default 16 MiB). Every file is at
                least one partition; a larger one is cut into ranges of splitBytes,
                each starting at the first valid frame at or after its start offset
                (frames carry a marker and a CRC), so no pre-scan is needed.
    damage      fail (default): a corrupt frame stops the job naming file and byte;
                skip: damaged bytes are skipped. A torn tail of the newest WAL
                segment (a crash or a write in progress) is always skipped.
    batchRows   rows per Arrow batch handed to Spark (default 8192)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter, InputPartition
from pyspark.sql.types import StructType

from queuebox.clients.pipeline import records, walfile
from queuebox.clients.pipeline.schema import RECORD_DDL
from queuebox.protocol.walformat import HEADER_SIZE

DEFAULT_SPLIT = 16 << 20
DEFAULT_BATCH = 8192
SNAPSHOT_MODES = ("latest", "all", "none")


@dataclass
class FileRange(InputPartition):  # type: ignore[misc]
    """Frames of one file that start in [start, end)."""

    path: str
    name: str
    kind: str
    lsn: int
    start: int
    end: int
    tail_ok: bool

    def __post_init__(self) -> None:
        self.value = (self.path, self.start)


def _option(options: Any, name: str, default: str | None = None) -> str | None:
    value = options.get(name)
    return default if value is None or value == "" else str(value)


def _positive(options: Any, name: str, default: int) -> int:
    raw = _option(options, name)
    try:
        value = default if raw is None else int(raw)
    except ValueError:
        raise ValueError(f"queuebox: option {name} must be an integer, not {raw!r}") from None
    if value <= 0:
        raise ValueError(f"queuebox: option {name} must be positive, not {value}")
    return value


def _choice(options: Any, name: str, choices: tuple[str, ...]) -> str:
    value = (_option(options, name, choices[0]) or choices[0]).lower()
    if value not in choices:
        raise ValueError(f"queuebox: option {name} must be one of {', '.join(choices)}")
    return value


def _complete_snapshot(file: walfile.DataFile) -> bool:
    try:
        with walfile.FileReader(file.path) as reader:
            return reader.snapshot_end() is not None
    except walfile.FormatError:
        return False


def pick_files(data_dir: str, snapshots: str) -> list[walfile.DataFile]:
    """The files a read covers: every WAL segment plus the chosen snapshots."""
    if not Path(data_dir).is_dir():
        raise ValueError(f"queuebox: data directory {data_dir} does not exist")
    files = walfile.list_files(data_dir)
    wal = [f for f in files if f.kind == "wal"]
    snaps = [f for f in files if f.kind == "snap"]
    if snapshots == "none":
        snaps = []
    else:
        complete = [f for f in snaps if _complete_snapshot(f)]
        for skipped in sorted(set(snaps) - set(complete), key=lambda f: f.name):
            print(f"queuebox: incomplete snapshot {skipped.path} not read", file=sys.stderr)
        snaps = complete[-1:] if snapshots == "latest" else complete
    return wal + snaps


def split(files: list[walfile.DataFile], split_bytes: int) -> list[FileRange]:
    """One partition per file, or per `split_bytes` of a larger file."""
    last_wal = max((f.name for f in files if f.kind == "wal"), default=None)
    parts = []
    for file in files:
        tail_ok = file.name == last_wal
        for start in range(0, max(file.size, 1), split_bytes):
            end = min(start + split_bytes, file.size)
            parts.append(FileRange(file.path, file.name, file.kind, file.lsn, start, end, tail_ok))
    return parts


class QueueboxReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: Any) -> None:
        path = _option(options, "path")
        if path is None:
            raise ValueError('queuebox: set the data directory with .option("path", DIR)')
        self.path = path
        self.tube = _option(options, "tube")
        self.snapshots = _choice(options, "snapshots", SNAPSHOT_MODES)
        self.skip_damage = _choice(options, "damage", ("fail", "skip")) == "skip"
        self.split_bytes = _positive(options, "splitBytes", DEFAULT_SPLIT)
        self.batch_rows = _positive(options, "batchRows", DEFAULT_BATCH)

    def partitions(self) -> list[FileRange]:
        files = pick_files(self.path, self.snapshots)
        for file in files:  # fail early, on the driver, on unreadable headers / versions
            with open(file.path, "rb") as handle:
                walfile.read_header(file.path, handle.read(HEADER_SIZE))
        return split(files, self.split_bytes)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa

        assert isinstance(partition, FileRange)
        schema = arrow_schema()
        maker = records.RowMaker(partition.kind, partition.name, partition.lsn, self.tube)
        pending: list[records.Row] = []
        with walfile.FileReader(
            partition.path, tail_ok=partition.tail_ok, skip_damage=self.skip_damage
        ) as reader:
            for offset, body in reader.records(partition.start, partition.end):
                pending.extend(maker.rows(offset, body))
                if len(pending) >= self.batch_rows:
                    yield pa.RecordBatch.from_pydict(records.columns(pending), schema=schema)
                    pending = []
            for damage in reader.damage:
                print(f"queuebox: skipped damaged bytes: {damage}", file=sys.stderr)
        if pending:
            yield pa.RecordBatch.from_pydict(records.columns(pending), schema=schema)


def arrow_schema() -> Any:
    import pyarrow as pa

    kinds = {
        "string": pa.string(),
        "bigint": pa.int64(),
        "int": pa.int32(),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }
    from queuebox.clients.pipeline.schema import RECORD_COLUMNS

    return pa.schema([(name, kinds[kind]) for name, kind, _ in RECORD_COLUMNS])


class QueueboxDataSource(DataSource):  # type: ignore[misc]
    """`spark.read.format("queuebox")` (records) and `df.write.format("queuebox")` (tasks)."""

    @classmethod
    def name(cls) -> str:
        return "queuebox"

    def schema(self) -> str:
        return RECORD_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return QueueboxReader(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from queuebox.clients.pipeline.sink import QueueboxWriter

        if overwrite:
            raise ValueError('queuebox: a queue can only be appended to; use .mode("append")')
        return QueueboxWriter(self.options, schema)
