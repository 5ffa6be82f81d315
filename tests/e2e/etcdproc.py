"""A real etcd (Debian's etcd-server, 3.4) as a one-member cluster on loopback ports.

`EtcdProc` starts `etcd` on two free 127.0.0.1 ports (clients, peers) with
a fresh data dir, waits until `/health` says it has a leader, and always
stops it (context manager). Its log goes to `etcd.log` in the workdir. The
heartbeat and election timeouts are small so the lease minimum etcd enforces
(1.5 election timeouts, rounded up to whole seconds) is 1 s, and tests can
use short TTLs. With `tls=(cert, key, ca)` it serves its clients over
https and asks each for a certificate signed by `ca` (`--client-cert-auth`).
"""

from __future__ import annotations

import json
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.client_targets import free_port
from tests.e2e.serverproc import REPO

NAME = "queuebox-test"


def need_etcd() -> None:
    # Never a skip: the test command installs etcd-server; without it, fail loudly.
    if shutil.which("etcd") is None:
        pytest.fail("etcd is not installed: run the tests with tests/run.sh, which installs it")


class EtcdProc:
    def __init__(self, workdir: Path, tls: tuple[Path, Path, Path] | None = None) -> None:
        self.workdir = workdir
        self.tls = tls
        self.client_port = free_port()
        self.peer_port = free_port()
        scheme = "https" if tls else "http"
        self.endpoints = f"{scheme}://127.0.0.1:{self.client_port}"
        self.log_path = workdir / "etcd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        client = self.endpoints
        peer = f"http://127.0.0.1:{self.peer_port}"
        tls = []
        if self.tls:
            cert, key, ca = self.tls
            tls = ["--cert-file", str(cert), "--key-file", str(key),
                   "--trusted-ca-file", str(ca), "--client-cert-auth"]  # fmt: skip
        return [
            "etcd", "--name", NAME, "--data-dir", str(self.workdir / "data"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"{NAME}={peer}", "--initial-cluster-state", "new",
            "--heartbeat-interval", "50", "--election-timeout", "500",
            "--logger", "zap", "--log-outputs", "stderr", *tls,
        ]  # fmt: skip

    def start(self, timeout: float = 15.0) -> EtcdProc:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), cwd=REPO, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited with {self.proc.returncode}:\n{self.log()}")
            if self.healthy():
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"etcd did not become healthy in {timeout} s:\n{self.log()}")

    def healthy(self) -> bool:
        context = None
        if self.tls:  # etcd's own certificate shown back: it is a client one too
            cert, key, ca = self.tls
            context = ssl.create_default_context(cafile=str(ca))
            context.load_cert_chain(str(cert), str(key))
        try:
            with urllib.request.urlopen(
                f"{self.endpoints}/health", timeout=1, context=context
            ) as reply:
                return bool(json.load(reply).get("health") == "true")
        except (OSError, ValueError):
            return False

    def pause(self) -> None:
        """SIGSTOP: etcd keeps its sockets open and answers nothing (a hung member)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s; a stopped etcd stays stopped."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.resume()  # a paused etcd would not act on SIGTERM
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> EtcdProc:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
