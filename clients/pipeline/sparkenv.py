"""Building the SparkSession the pipeline runs on, and the progress line.

Owns: `build_session` (local-mode loopback binding, the Python used by workers,
shipping the queuebox code executors run to a cluster, registering the `queuebox`
data source), `code_zip` (that archive) and `Progress`, a background thread that
prints a one-line status of running stages by polling `SparkContext.statusTracker()`.

Must not touch: server/, drivers/, storage/. Imports pyspark only inside functions so
that importing this module costs nothing when the `spark` extra is absent.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import zipfile
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOOPBACK = "127.0.0.1"
# The subpackages of queuebox that executors import to run the data source: the
# pipeline with the client it puts through, and the wire codec. msgpack is not
# shipped: a zip can only carry its slow pure-Python fallback, and executors need
# an environment with pyspark and pyarrow anyway (docs/pipeline.md).
SHIPPED_PACKAGES = ("clients", "protocol")
CODE_ZIP = "queuebox_pipeline.zip"
LOCAL_SHUFFLE_PARTITIONS = 8
QUIET_INTERVAL = 2.0  # seconds between progress lines when stderr is not a terminal


def is_local(master: str) -> bool:
    return master.startswith("local")


def build_session(
    master: str = "local[*]",
    app_name: str = "queuebox-pipeline",
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """Start (or reuse) a SparkSession and register the `queuebox` data source.

    In local mode everything binds to 127.0.0.1 and the UI is off, so nothing listens
    on a public interface. For any other master the queuebox code executors run is
    shipped to them as a zip (`code_zip`), so their Python needs only pyspark,
    pyarrow and msgpack; that Python is PYSPARK_PYTHON, this interpreter unless set.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings: dict[str, str] = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
    }
    if is_local(master):
        _export_project_path()
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        settings |= {
            "spark.driver.host": LOOPBACK,
            "spark.driver.bindAddress": LOOPBACK,
            "spark.ui.enabled": "false",
            # One machine: Spark's default of 200 shuffle partitions is mostly overhead.
            "spark.sql.shuffle.partitions": str(LOCAL_SHUFFLE_PARTITIONS),
        }
    settings |= conf or {}
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not is_local(master):
        spark.sparkContext.addPyFile(str(code_zip(Path(tempfile.mkdtemp(prefix="queuebox-")))))
    register(spark)
    return spark


def register(spark: SparkSession) -> None:
    """Make `spark.read/write.format("queuebox")` available in this session."""
    from queuebox.clients.pipeline.source import QueueboxDataSource

    spark.dataSource.register(QueueboxDataSource)


def _export_project_path() -> None:
    """Let local Python workers import the project even when it is not pip-installed.

    Spark builds the workers' PYTHONPATH from its own and the JVM's environment, which
    it inherits from this process.
    """
    import queuebox

    # The folder holding the queuebox package: the checkout, or site-packages.
    root = str(Path(queuebox.__file__).resolve().parents[1])
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *parts])


def code_zip(directory: Path) -> Path:
    """Write `queuebox_pipeline.zip` into `directory`: the queuebox package root and
    its SHIPPED_PACKAGES, laid out as `queuebox/...` like an installed wheel (the
    checkout's links are followed), ready for `--py-files` or `addPyFile`."""
    import queuebox

    root = Path(queuebox.__file__).parent
    target = directory / CODE_ZIP
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(root / "__init__.py", "queuebox/__init__.py")
        for package in SHIPPED_PACKAGES:
            for path in sorted((root / package).rglob("*.py")):
                archive.write(path, f"queuebox/{path.relative_to(root).as_posix()}")
    return target


class Progress:
    """Prints `[label] stage N: done/total tasks (k running)` while a job runs.

    Use as a context manager around an action. The line is rewritten in place on a
    terminal and printed at most once per change otherwise.
    """

    def __init__(
        self,
        spark: SparkSession,
        label: str,
        interval: float = 0.5,
        stream: TextIO | None = None,
    ) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._label = label
        self._interval = interval
        self._stream = stream if stream is not None else sys.stderr
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="queuebox-progress", daemon=True)
        self._last = ""

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        outcome = "failed" if exc_type else "done"
        self._emit(f"[{self._label}] {outcome}", final=True)

    def snapshot(self) -> str:
        """One line describing the active stages, or '' when none runs."""
        parts = []
        for stage_id in sorted(self._tracker.getActiveStageIds()):
            info: Any = self._tracker.getStageInfo(stage_id)
            if info is None:
                continue
            parts.append(
                f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} tasks"
                f" ({info.numActiveTasks} running)"
            )
        return "; ".join(parts)

    def _run(self) -> None:
        interval = self._interval if self._stream.isatty() else max(self._interval, QUIET_INTERVAL)
        while not self._stop.wait(interval):
            line = self.snapshot()
            if line:
                self._emit(f"[{self._label}] {line}")

    def _emit(self, line: str, final: bool = False) -> None:
        if line == self._last:
            return
        self._last = line
        if self._stream.isatty():
            end = "\n" if final else ""
            self._stream.write(f"\r\x1b[K{line}{end}")
        else:
            self._stream.write(line + "\n")
        self._stream.flush()
