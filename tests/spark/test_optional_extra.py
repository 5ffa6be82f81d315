"""PySpark stays optional: the server, the CLI table and the pipeline package import
without loading it (checked in a fresh interpreter, so nothing else preloaded it)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import sys
import queuebox.server.core.app, queuebox.server.start.serve, queuebox.cli
import queuebox.clients.pipeline
import queuebox.clients.pipeline.cli
import queuebox.clients.pipeline.walfile, queuebox.clients.pipeline.records
import queuebox.clients.pipeline.classify
heavy = sorted(m for m in ("pyspark", "pyarrow", "pandas", "matplotlib") if m in sys.modules)
print(",".join(heavy))
"""


def test_server_and_pipeline_import_without_pyspark() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


PANDAS_CHECK = """
from pyspark.sql.pandas.utils import require_minimum_pandas_version
require_minimum_pandas_version()
"""


def test_the_spark_extra_gets_a_pandas_pyspark_supports() -> None:
    # PySpark runs this check when a session converts to or from pandas/Arrow
    # (the README snippet does): with pandas 3 it prints a FutureWarning, which
    # `-W error` turns into a failure here. The extra pins pandas below 3.
    pytest.importorskip("pyspark", reason="pip install '.[spark]' (tests/run.sh does)")
    out = subprocess.run(
        [sys.executable, "-W", "error::FutureWarning", "-c", PANDAS_CHECK],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["spark"]
    assert "pandas>=2.2,<3" in extra
