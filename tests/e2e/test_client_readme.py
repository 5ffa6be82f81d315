"""The examples of docs/client.md run as written against a queuebox subprocess: the
producer, the consumer (stopped by SIGTERM once the tube is empty) and the blocking worker.
Only the port is changed, from 3301 to the test server's."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from queuebox.clients import blocking
from tests.e2e.serverproc import REPO, ServerProc
from tests.waiting import wait_for

BLOCK = re.compile(r"^```python\n# (\S+\.py)\n(.*?)^```", re.S | re.M)


def examples() -> dict[str, str]:
    manual = (REPO / "docs" / "client.md").read_text(encoding="utf-8")
    return {name: code for name, code in BLOCK.findall(manual)}


@pytest.fixture(scope="module")
def scripts(server: ServerProc, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("readme")
    found = {}
    for name, code in examples().items():
        assert '"127.0.0.1", 3301' in code, f"{name} connects somewhere else"
        found[name] = folder / name
        found[name].write_text(code.replace('"127.0.0.1", 3301', f'"127.0.0.1", {server.port}'))
    assert set(found) == {"producer.py", "consumer.py", "worker.py"}
    return found


def run(script: Path, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, str(script)], cwd=script.parent, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs,  # type: ignore[call-overload]
    )  # fmt: skip


def finish(proc: subprocess.Popen[str], timeout: float = 30) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    return out, err


def test_readme_examples_run_as_written(server: ServerProc, scripts: dict[str, Path]) -> None:
    out, _ = finish(run(scripts["producer.py"]))
    assert out.splitlines() == ["queued task 0 READY", "queued 100 more"]

    consumer = run(scripts["consumer.py"])
    try:
        with blocking.connect("127.0.0.1", server.port) as conn:
            jobs = conn.tube("jobs")

            def drained() -> bool:
                assert consumer.poll() is None, consumer.communicate()
                return not jobs.statistics()["tasks"]["total"]

            wait_for(drained, "the consumer through every task", timeout=20)
            assert jobs.statistics()["calls"]["ack"] == 101
    finally:
        consumer.send_signal(signal.SIGTERM)
    out, _ = finish(consumer)
    lines = out.splitlines()
    assert lines[-1] == "handled 101 tasks"
    assert sum(line.startswith("working on") for line in lines) == 101

    out, _ = finish(run(scripts["worker.py"]))
    assert out.splitlines() == ["blocking worker got one more"]
