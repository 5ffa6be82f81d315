"""Fixtures: a shared server per test module, and a factory for servers with special settings;
for the console's browser tests, one Chromium per module, the module's server with HTTP
on, a fresh page per test and where screenshots go (tests/e2e/browserpage.py).

Every server binds 127.0.0.1 on a free port and is always stopped (SIGTERM,
then SIGKILL) by the fixture's finalizer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.e2e.etcdproc import EtcdProc, need_etcd
from tests.e2e.serverproc import USERS_TOML, ServerProc, StartServer, login_tester

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


def _start(workdir: Path, args: list[str], env: dict[str, str] | None, toml: str) -> ServerProc:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "queuebox.toml"
    config.write_text(toml)
    return ServerProc(workdir, ["--config", str(config), "--test-hooks", *args], env).start()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    proc = _start(tmp_path_factory.mktemp("server"), [], None, USERS_TOML)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """start_server(*flags, env=None, toml=USERS_TOML) -> a running ServerProc."""
    started: list[ServerProc] = []

    def start(*args: str, env: dict[str, str] | None = None, toml: str = USERS_TOML) -> ServerProc:
        proc = _start(tmp_path / f"server{len(started)}", list(args), env, toml)
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            proc.stop()


@pytest.fixture(scope="module")
def conn(server: ServerProc) -> Iterator[Any]:
    """tarantool-python on the module's server as `tester`; modules that need
    another kind of connection define their own `conn`."""
    c = login_tester(server.port)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def env(server: ServerProc) -> dict[str, str]:
    """Where `queuebox` commands run as subprocesses connect: their environment."""
    return {
        "QUEUEBOX_HOST": "127.0.0.1",
        "QUEUEBOX_PORT": str(server.port),
        "QUEUEBOX_USER": "tester",
        "QUEUEBOX_PASSWORD": "secret",
    }


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdProc]:
    """A fresh one-member etcd on loopback ports (about half a second to start)."""
    need_etcd()
    with EtcdProc(tmp_path / "etcd") as proc:
        yield proc


# --- the console in a browser (Playwright is imported only by the tests that use it) ---


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from tests.e2e.browserpage import launch

    with launch() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def console(server: ServerProc) -> ServerProc:
    """The module's server with its HTTP console on (a module may define its own)."""
    from tests.e2e.browserpage import with_http

    return with_http(server)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.e2e.browserpage import screenshots

    return screenshots(tmp_path_factory)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    from tests.e2e.browserpage import open_page

    with open_page(browser) as opened:
        yield opened
