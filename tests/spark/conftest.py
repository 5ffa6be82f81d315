"""Fixtures of the Spark pipeline tests: one SparkSession for the whole test session.

JVM startup is slow, so a single local[2] session (loopback only, no UI, few shuffle
partitions) serves every test. Tests that need it skip when pyspark or Java is
missing; tests/run.sh installs both. The server subprocess fixture comes from
tests/e2e/serverproc.py (imported, not duplicated).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

SPARK_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="pip install '.[spark]' (tests/run.sh does)")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime (tests/run.sh installs openjdk-17-jre-headless)")
    from queuebox.clients.pipeline.sparkenv import build_session

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = build_session("local[2]", "queuebox-tests", SPARK_CONF)
    try:
        yield session
    finally:
        session.stop()
