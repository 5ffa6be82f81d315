"""The archive build_session ships to cluster executors, checked without Spark.

A fresh interpreter with no site processing (so no installed or editable queuebox)
and only the zip and msgpack's folder on its path must import the modules an
executor runs; tests/spark/test_standalone_cluster.py runs them on a real cluster.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import msgpack

from queuebox.clients.pipeline.sparkenv import CODE_ZIP, code_zip

EXECUTOR_MODULES = (
    "queuebox.clients.pipeline.walfile",
    "queuebox.clients.pipeline.records",
    "queuebox.clients.pipeline.schema",
    "queuebox.clients.blocking",
    "queuebox.clients.calls",
)


def test_the_zip_is_laid_out_like_the_wheel(tmp_path: Path) -> None:
    archive = code_zip(tmp_path)
    assert archive == tmp_path / CODE_ZIP
    names = set(zipfile.ZipFile(archive).namelist())
    assert "queuebox/__init__.py" in names
    assert "queuebox/clients/pipeline/source.py" in names
    assert "queuebox/protocol/__init__.py" in names
    assert all(name.startswith("queuebox/") and name.endswith(".py") for name in names)
    # The server side never reaches executors.
    assert not any(name.startswith(("queuebox/server/", "queuebox/storage/")) for name in names)


def test_executor_modules_import_from_the_zip_alone(tmp_path: Path) -> None:
    archive = code_zip(tmp_path)
    site = str(Path(msgpack.__file__).parents[1])
    probe = (
        f"import sys; sys.path[:0] = [{str(archive)!r}]; sys.path.append({site!r})\n"
        f"import queuebox, {', '.join(EXECUTOR_MODULES)}\n"
        "print(queuebox.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe], cwd=tmp_path,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{archive}/queuebox/__init__.py"
