"""The servers `queuebox bench --compare` starts for itself: queuebox and Tarantool + queue.

Owns: `QueueboxServer` (`python -m queuebox serve` on a free 127.0.0.1 port,
`wal_mode = write`, a data directory of its own) and `ReferenceServer`
(Tarantool + the queue module, started and stopped by a script such as the
project's `reference-server.sh`: `PORT=N SCRIPT QUEUE_SRC` prints the pid,
`SCRIPT stop PID` stops it), each with `start`, `kill` (SIGKILL: nothing
written at exit), `stop` and `ready_s`, the seconds from launch to accepting
connections (what a restart costs a user). Both log in as the same kind of
user (a password, every right). Must not generate load or decide what to
measure: suite.py does.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .conn import BenchError

USER = "bench"
PASSWORD = "bench"
REFERENCE_USER = "queue"  # what reference-server.sh creates (QUEUE_USER)
REFERENCE_PASSWORD = "queue"
START_TIMEOUT_S = 600.0  # a million tasks recovered on a busy machine
POLL_S = 0.01


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _clean_env() -> dict[str, str]:
    """Our environment without QUEUEBOX_* settings that would change the server."""
    return {k: v for k, v in os.environ.items() if not k.startswith("QUEUEBOX_")}


class QueueboxServer:
    """One queuebox process over `workdir`/data; restartable on the same data."""

    name = "queuebox"
    user, password = USER, PASSWORD

    def __init__(self, workdir: Path, extra_args: list[str] | None = None) -> None:
        self.workdir = workdir
        self.extra_args = list(extra_args or [])
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.ready_s = 0.0
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> QueueboxServer:
        port_file = self.workdir / "port"
        port_file.unlink(missing_ok=True)
        env = _clean_env() | {"QUEUEBOX_USER": USER, "QUEUEBOX_PASSWORD": PASSWORD}
        command = [
            sys.executable, "-m", "queuebox", "serve", "--listen", "127.0.0.1:0",
            "--port-file", str(port_file), "--data-dir", str(self.workdir / "data"),
            "--wal-mode", "write", "--log-format", "json", *self.extra_args,
        ]  # fmt: skip
        began = time.perf_counter()
        with open(self.workdir / "server.log", "ab") as log:
            self.proc = subprocess.Popen(
                command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = began + START_TIMEOUT_S
        while time.perf_counter() < deadline:
            text = port_file.read_text().strip() if port_file.exists() else ""
            if text:
                self.ready_s = time.perf_counter() - began
                self.port = int(text)
                return self
            if self.proc.poll() is not None:
                raise BenchError(f"queuebox exited with {self.proc.returncode}: {self.log_tail()}")
            time.sleep(POLL_S)
        self.kill()
        raise BenchError(f"queuebox did not start in {START_TIMEOUT_S:.0f} s")

    def logged(self, event: str, field: str) -> object:
        """`field` of the latest log line of `event` (`recovered` `seconds`, ...)."""
        found = None
        for line in self._log().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event") == event:
                found = record.get(field)
        return found

    def build(self) -> str:
        """What the server said it runs: "pure Python" or "compiled: N modules"."""
        return str(self.logged("listening", "build"))

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM (a clean stop writes a snapshot), then SIGKILL after a while."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(300)
        except subprocess.TimeoutExpired:
            self.kill()

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _log(self) -> str:
        path = self.workdir / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def log_tail(self) -> str:
        return self._log()[-2000:]


def _running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie waiting for its parent."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stream:
            stat = stream.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z"


class ReferenceServer:
    """Tarantool + queue through `script`; `workdir` kept across restarts."""

    name = "tarantool+queue"
    user, password = REFERENCE_USER, REFERENCE_PASSWORD

    def __init__(self, script: str, queue_src: str, memtx_mb: int) -> None:
        self.script = script
        self.queue_src = queue_src
        self.memtx_mb = memtx_mb
        # Not /tmp/queue-ref.*: the script's `stop` would remove it between restarts.
        self.workdir = Path(tempfile.mkdtemp(prefix="bench-reference-"))
        self._pid: int | None = None
        self.port = 0
        self.ready_s = 0.0

    @property
    def pid(self) -> int:
        assert self._pid is not None
        return self._pid

    def start(self) -> ReferenceServer:
        self.port = free_port()
        env = os.environ | {
            "PORT": str(self.port),
            "QUEUE_MEMTX_MB": str(self.memtx_mb),
            "REF_WORKDIR": str(self.workdir),
        }
        began = time.perf_counter()
        try:
            done = subprocess.run(
                ["bash", self.script, self.queue_src], env=env, capture_output=True,
                text=True, timeout=START_TIMEOUT_S, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BenchError(f"reference server: {exc}") from None
        self.ready_s = time.perf_counter() - began
        if done.returncode != 0 or not done.stdout.strip().isdigit():
            raise BenchError(f"reference server did not start: {done.stderr.strip()[-2000:]}")
        self._pid = int(done.stdout.strip())
        return self

    def kill(self) -> None:
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            deadline = time.perf_counter() + 30
            while _running(self._pid) and time.perf_counter() < deadline:
                time.sleep(POLL_S)  # not our child (the script detached it): poll
            self._pid = None

    def stop(self) -> None:
        if self._pid is not None:
            subprocess.run(
                ["bash", self.script, "stop", str(self._pid)], capture_output=True, check=False
            )
            self._pid = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
