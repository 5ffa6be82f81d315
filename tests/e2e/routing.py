"""Helpers for tests of a sharded cluster behind routers: shards of one node
each (real servers with --shard, under one etcd prefix), the users they share
(with a `router` service user holding the route right), and routers as
subprocesses (`queuebox router`) on free ports, always stopped.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.e2e import serverproc
from tests.e2e.client_targets import free_port
from tests.e2e.cluster import EtcdCluster, wait_state
from tests.e2e.etcdproc import EtcdProc, need_etcd
from tests.e2e.serverproc import REPO, USERS_TOML, ServerProc, StartServer, clean_env, start_proc

ROUTER_PASSWORD = "routepw"
CLUSTER_TOML = (
    USERS_TOML
    + f'\n[users.router]\npassword = "{ROUTER_PASSWORD}"\nrights = ["route"]\n'
    # a consumer's rights, without `route` (tester's "all" holds it)
    + '\n[users.worker]\npassword = "workpw"\nrights = ["read", "write"]\n'
)


class RouterProc:
    """One `queuebox router` process on a free port; `stop()` always ends it."""

    def __init__(self, workdir: Path, endpoints: str, prefix: str, *args: str) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "users.toml"
        self.config.write_text(CLUSTER_TOML)
        self.log_path = workdir / "router.log"
        self.port = free_port()
        self.metrics_port = free_port()
        self.args = [
            "--listen", f"127.0.0.1:{self.port}",
            "--metrics-listen", f"127.0.0.1:{self.metrics_port}",
            "--etcd-endpoints", endpoints, "--etcd-prefix", prefix,
            "--config", str(self.config), "--shard-user", "router", *args,
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> RouterProc:
        env = clean_env() | {"QUEUEBOX_ROUTER_PASSWORD": ROUTER_PASSWORD}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "queuebox", "router", *self.args],
                cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"router exited with {self.proc.returncode}:\n{self.log()}")
            if "router listening" in self.log():
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"router did not start in {timeout}s:\n{self.log()}")

    def stop(self, kill: bool = False) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False


class Sharded:
    """Shards a and b (one node each, or more), under one prefix, and routers."""

    def __init__(
        self, start_server: StartServer, etcd: EtcdProc, workdir: Path, *extra: str
    ) -> None:
        def start(*args: str, **kwargs: Any) -> ServerProc:
            return start_server(*args, toml=CLUSTER_TOML, **kwargs)

        self.etcd = etcd
        self.workdir = workdir
        self.groups = {
            name: EtcdCluster(start, etcd, "--shard", name, *extra) for name in ("a", "b")
        }
        self.prefix = self.groups["a"].prefix
        for group in self.groups.values():
            group.prefix = self.prefix
        self.routers: list[RouterProc] = []
        self._logins: list[Any] = []

    def start(self, nodes: int = 1) -> dict[str, list[ServerProc]]:
        started = {name: group.start(nodes) for name, group in self.groups.items()}
        # 60 s, not wait_state's 30: under CI, a JVM test beside this one once
        # held a shard's start past 30 s.
        for found in started.values():
            wait_state(found[0], "RUNNING", timeout=60.0)
        return started

    def router(self, *args: str, endpoints: str | None = None) -> RouterProc:
        """A router started on the shards' map (read from etcd, or at `endpoints`)."""
        workdir = self.workdir / f"router{len(self.routers)}"
        proc = RouterProc(workdir, endpoints or self.etcd.endpoints, self.prefix, *args)
        self.routers.append(proc)
        return proc.start()

    def login(self, router: RouterProc) -> Any:
        """tarantool-python on `router` as `tester`, closed by `stop_routers`."""
        conn = serverproc.login_tester(router.port)
        self._logins.append(conn)
        return conn

    def stop_routers(self) -> None:
        for conn in self._logins:
            conn.close()
        for proc in self.routers:
            proc.stop()


class Routed:
    """What a conformance test reads of its `server` when it runs behind a
    router: the port it connects to (the router's), the shards behind, and the
    etcd endpoints and prefix of their map (for the self-routing client)."""

    def __init__(
        self, router: RouterProc, shards: list[ServerProc], etcd_endpoints: str, prefix: str
    ) -> None:
        self.port = router.port
        self.router = router
        self.shards = shards
        self.etcd_endpoints = etcd_endpoints
        self.prefix = prefix


@contextmanager
def routed_cluster(workdir: Path) -> Iterator[Routed]:
    """etcd, shards a and b (one node each) and one router, for a module's tests."""
    need_etcd()
    started: list[ServerProc] = []

    def start(*args: str, **kwargs: Any) -> ServerProc:
        proc = start_proc(workdir / f"server{len(started)}", list(args), None, CLUSTER_TOML)
        started.append(proc)
        return proc

    with EtcdProc(workdir / "etcd") as etcd:
        cluster = Sharded(start, etcd, workdir)
        try:
            nodes = cluster.start()
            shards = [found[0] for found in nodes.values()]
            yield Routed(cluster.router(), shards, etcd.endpoints, cluster.prefix)
        finally:
            cluster.stop_routers()
            for proc in started:
                proc.stop()
