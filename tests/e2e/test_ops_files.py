"""What docs/ops ships for running queuebox: the Prometheus alert rules and
the systemd unit, checked by the tools that will read them and, for the unit,
by running its command the way systemd would.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.e2e.serverproc import REPO, clean_env

OPS = REPO / "docs" / "ops"


def need(program: str) -> str:
    # Never a skip: the test command installs both (prometheus, systemd).
    path = shutil.which(program)
    if path is None:
        pytest.fail(f"{program} is not installed: run the tests with tests/run.sh")
    return path


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def test_the_alert_rules_pass_promtool() -> None:
    promtool = need("promtool")
    checked = run(promtool, "check", "rules", "alerts.yml", cwd=OPS)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert re.search(r"SUCCESS: \d+ rules found", checked.stdout)
    tested = run(promtool, "test", "rules", "alerts_test.yml", cwd=OPS)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_promtool_fails_a_rule_test_that_expects_the_wrong_alert(tmp_path: Path) -> None:
    # The rule tests can fail: the same file, expecting the idle tube's alert on the busy one.
    shutil.copy(OPS / "alerts.yml", tmp_path / "alerts.yml")
    wrong = (OPS / "alerts_test.yml").read_text().replace("tube: idle, state", "tube: busy, state")
    (tmp_path / "alerts_test.yml").write_text(wrong)
    tested = run(need("promtool"), "test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert tested.returncode != 0


def documented_metrics() -> set[str]:
    manual = (REPO / "docs" / "operations.md").read_text()
    table = manual.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(queuebox_[a-z_]+)`", table, re.MULTILINE))


def test_every_alert_reads_a_documented_metric_and_says_what_to_do() -> None:
    # tests/e2e/test_metrics.py checks that the documented metrics are the ones served.
    documented = documented_metrics() | {"up"}
    rules = yaml.safe_load((OPS / "alerts.yml").read_text())["groups"][0]["rules"]
    assert len(rules) >= 15
    for rule in rules:
        names = set(re.findall(r"\b(queuebox_[a-z_]+|up)\{", rule["expr"] + "{"))
        names |= set(re.findall(r"\b(queuebox_[a-z_]+)\b", rule["expr"]))
        names = {re.sub(r"_(bucket|count|sum)$", "", name) for name in names}
        assert names and names <= documented, (rule["alert"], names - documented)
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def unit_service() -> dict[str, list[str]]:
    """The unit's [Service] settings, every value of a key that repeats (Environment=)."""
    settings: dict[str, list[str]] = {}
    section = ""
    for line in (OPS / "queuebox.service").read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and line and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


def launcher(tmp_path: Path) -> Path:
    """An executable standing where the unit expects `queuebox`: this checkout's."""
    path = tmp_path / "bin" / "queuebox"
    path.parent.mkdir()
    path.write_text(f'#!/bin/sh\ncd "{REPO}" && exec "{sys.executable}" -m queuebox "$@"\n')
    path.chmod(0o755)
    return path


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    program = launcher(tmp_path)
    text = (
        (OPS / "queuebox.service").read_text().replace("/opt/queuebox/bin/queuebox", str(program))
    )
    copy = tmp_path / "queuebox.service"
    copy.write_text(text)
    verified = run(need("systemd-analyze"), "verify", str(copy), cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    broken = tmp_path / "broken.service"
    broken.write_text(text.replace("ExecStart=", "ExecStart=/nonexistent/"))
    assert run("systemd-analyze", "verify", str(broken), cwd=tmp_path).returncode != 0


def test_the_units_command_serves_and_stops_on_its_kill_signal(tmp_path: Path) -> None:
    service = {key: values[-1] for key, values in unit_service().items()}
    argv = service["ExecStart"].split()
    assert argv[:2] == ["/opt/queuebox/bin/queuebox", "serve"]
    env = clean_env()
    for line in unit_service()["Environment"]:
        key, _, value = line.partition("=")
        env[key] = value
    assert env["QUEUEBOX_DATA_DIR"] == "/var/lib/queuebox" == service["WorkingDirectory"]
    data = tmp_path / "state"  # stands for StateDirectory=
    env["QUEUEBOX_DATA_DIR"] = str(data)
    config = Path(argv[argv.index("--config") + 1])
    assert config == Path("/etc/queuebox/queuebox.toml")
    mine = tmp_path / "queuebox.toml"
    mine.write_text(f'listen = "127.0.0.1:0"\nport_file = "{tmp_path / "port"}"\n')
    argv[0], argv[argv.index("--config") + 1] = str(launcher(tmp_path)), str(mine)
    log = (tmp_path / "server.log").open("wb")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        port = wait_for_port(tmp_path / "port", proc)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            assert sock.recv(128).startswith(b"Tarantool")  # the greeting
        proc.send_signal(getattr(signal, service["KillSignal"]))
        assert proc.wait(timeout=int(service["TimeoutStopSec"])) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    # JSON lines, as the unit asks, and a snapshot written by the clean stop.
    lines = (tmp_path / "server.log").read_text().splitlines()
    assert lines and all(line.startswith("{") for line in lines), lines[:3]
    assert any(name.endswith(".snap") for name in os.listdir(data))


def wait_for_port(path: Path, proc: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited"
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError("no port file in 60 s")
