"""PySpark stays optional: the server, the CLI table and the pipeline package import
without loading it (checked in a fresh interpreter, so nothing else preloaded it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import sys
import queuebox.server.app, queuebox.server.serve, queuebox.cli, queuebox.clients.pipeline
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
