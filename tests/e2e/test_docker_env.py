"""The server as the Docker image runs it, without Docker: same environment, a subprocess.

The environment comes from the Dockerfile's ENV lines, with two changes:
QUEUEBOX_LISTEN and QUEUEBOX_HTTP_LISTEN are 127.0.0.1 on a free port where
the image says 0.0.0.0:3301 and 0.0.0.0:8080.
The one test that does ask for 0.0.0.0 expects a refusal, and holds that port
itself so that no server could ever listen there. Every server is stopped.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.serverproc import REPO, RawClient, ServerProc, clean_env
from tests.e2e.webclient import Web, http_port

USER, PASSWORD = "app", "s3cret-for-tests"
PING = 64
ER_ACCESS_DENIED, ER_PASSWORD_MISMATCH = 42, 47


def image_env() -> dict[str, str]:
    """QUEUEBOX_* settings of the ENV instructions of the Dockerfile's last stage."""
    lines = [ln for ln in (REPO / "Dockerfile").read_text().splitlines() if not ln.startswith("#")]
    runtime = "\n".join(lines).replace("\\\n", " ").split("\nFROM ")[-1]
    env_lines = [ln for ln in runtime.splitlines() if ln.startswith("ENV ")]
    return dict(re.findall(r"\b(QUEUEBOX_[A-Z_]+)=(\S+)", " ".join(env_lines)))


def run_healthcheck(port: int, **extra: str) -> subprocess.CompletedProcess[bytes]:
    """The image's HEALTHCHECK command, through this interpreter, in the image's
    environment (with the server's real port and the container's credentials)."""
    line = re.search(r"HEALTHCHECK.*?CMD (\[.*?\])", (REPO / "Dockerfile").read_text(), re.S)
    assert line is not None
    command = json.loads(line.group(1))
    assert command[:2] == ["queuebox", "ping"]
    env = clean_env() | image_env() | {"QUEUEBOX_LISTEN": f"0.0.0.0:{port}"}
    env.update(QUEUEBOX_USER=USER, QUEUEBOX_PASSWORD=PASSWORD)
    env.update(extra)
    return subprocess.run(
        [sys.executable, "-m", "queuebox", *command[1:]],
        cwd=REPO, env=env, capture_output=True, timeout=30,
    )  # fmt: skip


class ImageServer(ServerProc):
    """`queuebox serve` with no flags at all: every setting comes from the environment."""

    def command(self) -> list[str]:
        return [sys.executable, "-m", "queuebox", "serve"]


def start_image_server(workdir: Path, **extra: str) -> ImageServer:
    env = image_env()
    env.update(
        QUEUEBOX_LISTEN="127.0.0.1:0",
        QUEUEBOX_HTTP_LISTEN="127.0.0.1:0",
        QUEUEBOX_DATA_DIR=str(workdir / "data"),
        QUEUEBOX_PORT_FILE=str(workdir / "port"),
    )
    env.update(extra)
    server = ImageServer(workdir, env=env)
    server.start()
    return server


@pytest.fixture
def image_server(tmp_path: Path) -> Iterator[ImageServer]:
    proc = start_image_server(tmp_path, QUEUEBOX_USER=USER, QUEUEBOX_PASSWORD=PASSWORD)
    try:
        yield proc
    finally:
        proc.stop()


def test_the_image_env_listens_everywhere_and_keeps_the_guest_out() -> None:
    env = image_env()
    assert env["QUEUEBOX_LISTEN"] == "0.0.0.0:3301"
    assert env["QUEUEBOX_GUEST_RIGHTS"] == "none"


def test_without_a_user_the_image_refuses_to_start_before_binding(tmp_path: Path) -> None:
    # Hold the port on 0.0.0.0 (bound, not listening): a server that tried to
    # bind before checking its settings would fail with "cannot start"
    # instead, and none can ever listen on it.
    holder = socket.socket()
    holder.bind(("0.0.0.0", 0))
    port = holder.getsockname()[1]
    try:
        env = clean_env()
        env.update(image_env())
        env.update(QUEUEBOX_LISTEN=f"0.0.0.0:{port}", QUEUEBOX_DATA_DIR=str(tmp_path / "data"))
        result = subprocess.run(
            [sys.executable, "-m", "queuebox", "serve"], cwd=REPO, env=env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        holder.close()
    assert result.returncode == 2, result.stderr
    assert f"listening on 0.0.0.0:{port} (not loopback) with no user configured" in result.stderr
    assert "QUEUEBOX_USER + QUEUEBOX_PASSWORD" in result.stderr
    assert "cannot start" not in result.stderr + result.stdout
    assert not (tmp_path / "data").exists(), "nothing may be written before the check"


def test_with_a_user_only_authenticated_calls_are_served(image_server: ImageServer) -> None:
    with RawClient(image_server.port) as guest:
        assert guest.roundtrip(PING).error is None  # what the healthcheck needs
        denied = guest.call("queuebox.echo", 1).error
        assert denied is not None and denied[0] == ER_ACCESS_DENIED
    with RawClient(image_server.port) as wrong:
        refused = wrong.auth(USER, "not-the-password").error
        assert refused is not None and refused[0] == ER_PASSWORD_MISMATCH
        assert wrong.call("queuebox.echo", 1).error[0] == ER_ACCESS_DENIED  # type: ignore[index]
    with RawClient(image_server.port) as app:
        assert app.auth(USER, PASSWORD).error is None
        assert app.call("queuebox.echo", 1, "two").data == [1, "two"]


def test_the_console_asks_for_the_images_user(image_server: ImageServer) -> None:
    web = Web(http_port(image_server))
    assert web.get("/api/overview").status == 401
    assert web.get("/healthz").text == "RUNNING\n"
    assert web.login("guest", "").status == 401
    assert web.login(USER, PASSWORD).status == 303
    assert web.get("/api/overview").json()["user"] == USER


def test_logs_are_json_and_sigterm_stops_gracefully(image_server: ImageServer) -> None:
    assert image_server.proc is not None
    image_server.proc.send_signal(signal.SIGTERM)
    assert image_server.proc.wait(timeout=30) == 0
    events = [json.loads(line)["event"] for line in image_server.log().splitlines() if line]
    assert "listening" in events and "shutting down" in events
    assert events[-1] == "stopped"


def test_healthcheck_passes_on_a_running_server_and_fails_on_a_stopped_one(
    image_server: ImageServer,
) -> None:
    # In the container the check reads QUEUEBOX_LISTEN=0.0.0.0:3301 and calls
    # 127.0.0.1; here only the port differs (nothing listens on 0.0.0.0).
    alive = run_healthcheck(image_server.port)
    assert alive.returncode == 0, alive.stderr
    assert b"PONG" in alive.stdout
    wrong = run_healthcheck(image_server.port, QUEUEBOX_PASSWORD="not-the-password")
    assert wrong.returncode == 6, wrong.stderr  # refused, not unreachable
    image_server.stop()
    dead = run_healthcheck(image_server.port)
    assert dead.returncode == 3, dead.stderr


def test_example_producer_and_consumer_work_with_the_image_credentials(
    image_server: ImageServer,
) -> None:
    env = clean_env()
    env.update(
        QUEUEBOX_HOST="127.0.0.1",
        QUEUEBOX_PORT=str(image_server.port),
        QUEUEBOX_USER=USER,
        QUEUEBOX_PASSWORD=PASSWORD,
        EXAMPLE_TUBE="example_jobs",
        EXAMPLE_RATE="100",
        EXAMPLE_COUNT="3",
    )
    examples = REPO / "docker" / "examples"
    for script, said in (("producer.py", "put task"), ("consumer.py", "took task")):
        result = subprocess.run(
            [sys.executable, str(examples / script)], cwd=REPO, env=env | {"PYTHONPATH": str(REPO)},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert result.stdout.count(said) == 3, result.stdout
