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
from tests.e2e.routing import Routed, Sharded, routed_cluster
from tests.e2e.serverproc import USERS_TOML, ServerProc, StartServer, login_tester
from tests.e2e.serverproc import start_proc as _start

# Conformance tests that do not hold behind a router, by design (docs/cluster.md
# "What ordering holds"): they name ids 0, 1, 2... (a task's id names its shard:
# seq * 1024 + k), order tasks across shards (priority, FIFO over the whole tube)
# or fill a limfifottl tube (its capacity is per shard). Deselected, not skipped.
NOT_BEHIND_A_ROUTER = {
    "test_queue_e2e_calls.py": (
        "test_create_tube_answers_nothing_and_the_tube_exists",  # ids
        "test_eval_texts_of_real_clients",  # ids
        "test_a_dropped_tube_is_not_defined",  # ids start again at 0
        "test_task_lifecycle_shapes",  # ids
        "test_take_timeouts",  # ids
        "test_ttl_driver_options",  # ids
        "test_priority_order",  # across shards
        "test_limfifottl_put_into_a_full_tube_answers_nil",  # capacity per shard
        "test_drop_refuses_taken_tasks_and_waiting_consumers",  # ids
        "test_create_tube_if_not_exists_keeps_the_tube_and_its_tasks",  # ids
        "test_explicit_nil_opts_mean_no_options",  # ids
        "test_call16_shapes",  # ids
        "test_fifo_put_ignores_delay_and_release_honours_it",  # ids
        "test_task_errors",  # ids (peek(0.0) of the first task)
        "test_on_task_change_over_the_wire_is_never_a_silent_no_op",  # ids
    ),
    "test_queue_e2e_sessions.py": (
        "test_two_consumers_and_a_disconnect_that_releases_both_of_its_tasks",  # ids
        "test_identify_answers_the_same_16_bytes_and_a_second_connection_acks",  # ids
        "test_identify_accepts_the_uuid_as_bin_too",  # ids
        "test_a_take_pending_on_a_closed_connection_does_not_take_the_released_task",  # ids
        "test_cfg_ttr_keeps_a_disconnected_sessions_tasks_until_it_expires",  # ids
    ),
    "test_queue_e2e_asynctnt.py": (
        "test_the_whole_task_api",  # ids
        "test_pipelined_puts_and_takes_on_one_connection",  # ids
        "test_a_waiting_take_does_not_hold_up_the_next_requests",  # ids
    ),
}

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


@pytest.fixture(scope="module")
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProc | Routed]:
    """The module's server; in a module that sets ALSO_BEHIND_A_ROUTER, its tests
    run once more through a router in front of two shards (docs/cluster.md)."""
    if getattr(request, "param", "node") == "node":
        proc = _start(tmp_path_factory.mktemp("server"), [], None, USERS_TOML)
        try:
            yield proc
        finally:
            proc.stop()
    else:
        with routed_cluster(tmp_path_factory.mktemp("routed")) as routed:
            yield routed


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "server" in metafunc.fixturenames and getattr(metafunc.module, "ALSO_BEHIND_A_ROUTER", 0):
        metafunc.parametrize("server", ["node", "router"], indirect=True, scope="module")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    behind = [item for item in items if "[router" in item.name and _not_behind(item)]
    if behind:
        config.hook.pytest_deselected(items=behind)
        items[:] = [item for item in items if item not in behind]


def _not_behind(item: pytest.Item) -> bool:
    names = NOT_BEHIND_A_ROUTER.get(item.path.name, ())
    return item.name.split("[", 1)[0] in names


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


@pytest.fixture
def sharded(start_server: StartServer, etcd: EtcdProc, tmp_path: Path) -> Iterator[Sharded]:
    """Shards a and b under one etcd prefix, not started yet (`sharded.start()`),
    and the routers and router logins the test makes, stopped and closed after it."""
    cluster = Sharded(start_server, etcd, tmp_path)
    try:
        yield cluster
    finally:
        cluster.stop_routers()


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
