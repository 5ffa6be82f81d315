"""README.md as a new user meets it: the two commands name what exists (install.py, the
`queuebox serve` entry point) and need nothing but the standard library; the five-minute
producer and worker run as written against a server; its links and commands exist.

The two commands themselves were run in a fresh Debian 12 container and in a virtual
environment by hand (they fetch from PyPI, which a test must not depend on): the
report of issue 28 says how.
"""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from queuebox.cli import COMMANDS
from queuebox.clients import blocking
from tests.e2e.serverproc import REPO, ServerProc
from tests.waiting import wait_for

README = (REPO / "README.md").read_text(encoding="utf-8")
PYTHON_BLOCK = re.compile(r"^```python\n# (\S+\.py)\n(.*?)^```", re.S | re.M)
SHELL_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)


def test_the_readme_is_a_front_door() -> None:
    assert len(README.splitlines()) <= 400
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (REPO / target).exists(), target
    for section in ("## Start", "## Five minutes", "## For users of other queues"):
        assert section in README


def test_the_two_commands_name_what_exists() -> None:
    first = SHELL_BLOCK.findall(README)[0]
    commands = [line.split("#")[0].split() for line in first.splitlines()]
    assert commands == [
        ["python3", "install.py", "&&", ".venv/bin/queuebox", "serve"],
        ["bash", "tests/run.sh"],
    ]
    assert "exec bash tests/run.sh" in (REPO / ".ci" / "run").read_text()  # what CI runs
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"queuebox": "queuebox.cli:main"} and "serve" in COMMANDS
    # install.py runs on a bare python3: the standard library only, no pip, no venv needed.
    tree = ast.parse((REPO / "install.py").read_text())
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
    }
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported
    shown = subprocess.run(
        [sys.executable, "install.py", "--help"], cwd=REPO, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0 and "--extras" in shown.stdout


def test_every_command_the_readme_names_exists() -> None:
    named = set(re.findall(r"`(?:\.venv/bin/)?queuebox ([a-z][a-z-]+)", README))
    named |= set(re.findall(r"^\.venv/bin/queuebox ([a-z][a-z-]+)", README, re.M))
    for row in re.findall(r"^\| (`queuebox [^|]*)\|", README, re.M):  # the commands table
        named |= {segment.split()[0] for segment in re.findall(r"`([a-z][^`]*)`", row)}
    named.discard("queuebox")
    assert len(named) > 15 and named <= set(COMMANDS), named - set(COMMANDS)


@pytest.fixture
def scripts(server: ServerProc, tmp_path: Path) -> Path:
    found = dict(PYTHON_BLOCK.findall(README))
    assert set(found) == {"producer.py", "worker.py"}
    for name, code in found.items():
        assert '"127.0.0.1", 3301' in code or "port=3301" in code, name
        code = code.replace('"127.0.0.1", 3301', f'"127.0.0.1", {server.port}')
        (tmp_path / name).write_text(code.replace("port=3301", f"port={server.port}"))
    return tmp_path


def run(folder: Path, *command: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUEBOX_")}
    return subprocess.Popen(
        [sys.executable, *command], cwd=folder, env={**env, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_the_five_minute_example_runs_as_written(server: ServerProc, scripts: Path) -> None:
    out, err = run(scripts, "producer.py").communicate(timeout=60)
    assert out == "queued 10 tasks\n", err
    port = str(server.port)
    worker = run(scripts, "-m", "queuebox", "worker", "worker:resize", "--port", port)
    try:
        with blocking.connect("127.0.0.1", server.port) as conn:
            images = conn.tube("images")

            def settled() -> bool:
                assert worker.poll() is None, worker.communicate()
                counts = images.statistics()["tasks"]
                return (counts["done"], counts["buried"]) == (9, 1)

            wait_for(settled, "9 images done and 1 buried", timeout=60)
            [buried] = images.tasks("buried")["tasks"]
    finally:
        worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    resized = re.findall(r" INFO (resized \S+ to \d+)$", err, re.M)
    assert sorted(resized) == sorted(f"resized img{n}.png to {100 * n}" for n in range(1, 10))
    tries = re.findall(r"task 0 of images failed \(attempt (\d) of 3; ([a-z]+)", err)
    assert tries == [("1", "again"), ("2", "again"), ("3", "buried")]
    assert buried["reason"] == "3 attempts, the last one raised ValueError: img0.png has no width"
    kicked = run(scripts, "-m", "queuebox", "kick", "images", "--all", "--port", port, "--json")
    assert json.loads(kicked.communicate(timeout=60)[0]) == {"kicked": 1}
