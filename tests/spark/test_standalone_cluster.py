"""The pipeline on a Spark standalone cluster: one master and one worker on 127.0.0.1.

The module starts both JVMs from the pyspark install (`spark-class`), then runs
`queuebox pipeline load` and `queuebox pipeline report` as a user would, with
`--master spark://...`, against a real queuebox subprocess. The executors run a
Python that has pyspark, pyarrow and msgpack but cannot import queuebox (site
processing is off, so neither an installed nor an editable copy is visible): the
queuebox code reaches them only through the zip that build_session ships. Both
JVMs bind 127.0.0.1 on free ports, are always stopped, and every wait is bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from queuebox.clients import blocking
from queuebox.clients.calls import modern
from tests.e2e.serverproc import ServerProc
from tests.waiting import wait_for as wait_until

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 90.0  # seconds for a JVM to come up on a busy 2-core box
RUN_TIMEOUT = 240.0  # seconds for one `queuebox pipeline` run
ROWS, TAKEN = 2_000, 500


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(done: Callable[[], bool], what: str, proc: subprocess.Popen[bytes]) -> None:
    """Until `done()`, failing at once if the JVM exits meanwhile."""

    def ready() -> bool:
        assert proc.poll() is None, f"{what}: the JVM exited with {proc.returncode}"
        return done()

    wait_until(ready, what, START_TIMEOUT)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the JVM's process group (a worker's executors included), then SIGKILL."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


@dataclass
class Cluster:
    url: str
    work_dir: Path  # the worker's: one folder per application, one per executor in it
    executor_python: Path


def executor_python(directory: Path) -> Path:
    """A Python for the executors without queuebox: `-S` skips site processing, so
    the editable install's .pth finder never runs; the packages executors need come
    from their own site-packages folders on PYTHONPATH (after Spark's own entries)."""
    import msgpack
    import pyarrow
    import pyspark

    folders = dict.fromkeys(
        str(Path(m.__file__ or "").parents[1]) for m in (pyspark, pyarrow, msgpack)
    )
    script = directory / "executor-python"
    script.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{os.pathsep.join(folders)}" '
        f'exec "{sys.executable}" -S "$@"\n'
    )
    script.chmod(0o755)
    return script


def spark_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    pyspark = pytest.importorskip("pyspark", reason="pip install '.[spark]' (tests/run.sh does)")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime (tests/run.sh installs openjdk-17-jre-headless)")
    home = Path(pyspark.__file__).parent
    spark_class = str(home / "bin" / "spark-class")
    base = tmp_path_factory.mktemp("standalone")
    env = spark_env(home)
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    master_log = base / "master.log"
    procs: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [spark_class, *args], env=env, cwd=base, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        procs.append(proc)
        return proc

    try:
        master = start(
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(free_port())],
            master_log,
        )  # fmt: skip
        wait_for(lambda: "I have been elected leader" in master_log.read_text(), "master", master)
        work_dir = base / "work"
        worker = start(
            ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
             "--webui-port", str(free_port()), "--cores", "2", "--memory", "1g",
             "--work-dir", str(work_dir), url],
            base / "worker.log",
        )  # fmt: skip
        wait_for(lambda: "Registering worker" in master_log.read_text(), "worker", worker)
        yield Cluster(url, work_dir, executor_python(base))
    finally:
        for proc in reversed(procs):
            stop(proc)


def pipeline(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """`queuebox pipeline ...` on the cluster, the driver on 127.0.0.1."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
    env |= {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(cluster.executor_python)}
    conf = [
        "spark.executor.memory=512m",
        "spark.driver.host=127.0.0.1",
        "spark.ui.enabled=false",
        # Spark's 200 shuffle partitions are 200 tasks per stage: minutes here.
        "spark.sql.shuffle.partitions=4",
    ]
    command = [sys.executable, "-m", "queuebox", "pipeline", *args, "--master", cluster.url]
    for setting in conf:
        command += ["--conf", setting]
    result = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    assert result.returncode == 0, f"{args[0]} failed:\n{result.stdout}\n{result.stderr[-4000:]}"
    return result


def test_the_executor_python_cannot_import_queuebox_by_itself(cluster: Cluster) -> None:
    # Without this the cluster test below would pass with no zip at all.
    # The worker's environment, as its executors inherit it: no PYTHONPATH (a local
    # session of this test process exports the checkout there).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def probe(code: str) -> subprocess.CompletedProcess[str]:
        command = [str(cluster.executor_python), "-c", code]
        return subprocess.run(command, cwd="/", env=env, capture_output=True, text=True, timeout=60)

    assert probe("import pyspark, pyarrow, msgpack").returncode == 0
    assert "No module named 'queuebox'" in probe("import queuebox").stderr


def test_load_and_report_run_on_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = tmp_path / "rows.parquet"
    pq.write_table(
        pa.table({"n": list(range(ROWS)), "text": [f"row {i}" for i in range(ROWS)]}), rows
    )
    server = ServerProc(tmp_path / "server").start()
    try:
        loaded = pipeline(
            cluster, "load", "--input", str(rows), "--format", "parquet", "--tube", "jobs",
            "--create-tube", "fifo", "--port", str(server.port), "--partitions", "2",
        )  # fmt: skip
        assert f"loaded {ROWS} of {ROWS} rows into tube 'jobs'" in loaded.stdout
        with blocking.connect("127.0.0.1", server.port) as conn:
            taken = conn.run_many([modern.take("jobs", 0) for _ in range(TAKEN)], window=64)
            assert all(task is not None for task in taken)
            conn.run_many([modern.by_id("jobs", "ack", t.id) for t in taken], window=64)
            assert conn.statistics("jobs")["tasks"]["ready"] == ROWS - TAKEN
        # The executors read the WAL from this path: it is on their (shared) disk.
        out = tmp_path / "report"
        reported = pipeline(
            cluster, "report", "--data-dir", str(server.data_dir), "--out", str(out),
            "--bucket", "1",
        )  # fmt: skip
    finally:
        server.stop()
    assert f"jobs: put {ROWS}, taken {TAKEN}, acked {TAKEN}" in reported.stdout
    [totals] = json.loads((out / "summary.json").read_text())["totals"]
    assert (totals["tube"], totals["put"], totals["taken"], totals["acked"]) == (
        "jobs", ROWS, TAKEN, TAKEN,
    )  # fmt: skip
    # Both runs were applications of this cluster, and their executors got the zip.
    apps = sorted(cluster.work_dir.glob("app-*"))
    assert len(apps) == 2, apps
    for app in apps:
        logs = " ".join(p.read_text(errors="replace") for p in app.glob("*/stderr"))
        assert "queuebox_pipeline.zip" in logs, f"{app.name}: no zip fetched"
