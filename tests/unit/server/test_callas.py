"""Calls made in-process as a user (server/core/callas.py) get exactly what the same
user gets over IPROTO: every (user, call) pair of a matrix is made both ways on
one app with the real queue glue, and the answers must agree."""

from __future__ import annotations

from typing import Any

import pytest

from queuebox import protocol
from queuebox.server.core.app import App
from queuebox.server.core.builtins import install
from queuebox.server.core.callas import LocalSession, call_as
from queuebox.server.queue.queue_calls import QueueCalls
from queuebox.server.runtime.errors import CallError
from queuebox.server.settings.config import ADMIN, READ, Config, UserSpec
from queuebox.storage.catalog import Catalog
from tests.unit.server.test_server_connection import Harness, call

USERS = {
    "app": UserSpec("app", protocol.password_hash2("a"), frozenset(), {"write": ("jobs*",)}),
    "ro": UserSpec("ro", protocol.password_hash2("r"), frozenset({READ})),
    "ops": UserSpec("ops", protocol.password_hash2("o"), frozenset({ADMIN})),
    "old": UserSpec("old", protocol.password_hash2("l"), frozenset(), {"write": ("space0.j*",)}),
}
CALLS: list[tuple[str, list[Any]]] = [
    ("queue.state", []),
    ("queue.tube.jobs1:put", ["x"]),
    ("queue.tube.mail:put", ["x"]),
    ("queue.tube.mail:peek", [0]),
    ("queue.tube.jobs1:peek", [0]),
    ("queue.tube.mail:truncate", []),
    ("queue.statistics", ["mail"]),
    ("queue.statistics", ["jobs1"]),
    ("queue.create_tube", ["other", "nosuchdriver"]),
    ("queue.cfg", [{"ttr": 5}]),
    ("queue.put", [0, "jobs1", 0, 0, 0, 0, "legacy"]),
    ("queue.put", [0, "mail", 0, 0, 0, 0, "legacy"]),
    ("queuebox.test.admin", []),
    ("queuebox.test.write", []),
    ("nosuch", []),
]


@pytest.fixture
async def app() -> App:
    app = App(Config(users=USERS, test_hooks=True))
    queue = QueueCalls(app, Catalog())
    queue.install()
    install(app)
    admin = LocalSession(app, "ops")
    for tube in ("jobs1", "mail"):
        await call_as(admin, "queue.create_tube", [tube, "fifo"])
    admin.close()
    return app


def over_iproto(app: App, user: str, name: str, args: list[Any]) -> tuple[int, str] | str:
    h = Harness(app)
    h.take_writes()  # the greeting
    h.conn.session.set_user(user)
    h.feed(call(1, name, *args))
    ((code, _, body),) = h.take_replies()
    h.conn.connection_lost(None)
    return (code & 0x7FFF, body[0x31]) if code else "ok"


async def in_process(app: App, user: str, name: str, args: list[Any]) -> tuple[int, str] | str:
    async with LocalSession(app, user) as s:
        try:
            await call_as(s, name, args)
        except CallError as exc:
            return exc.code, exc.message
    return "ok"


@pytest.mark.parametrize("user", [*USERS, "guest"])
async def test_in_process_calls_get_the_iproto_answers(app: App, user: str) -> None:
    outcomes = []
    for name, args in CALLS:
        wire = over_iproto(app, user, name, args)
        local = await in_process(app, user, name, args)
        assert local == wire, (user, name, args)
        outcomes.append(wire)
    assert "ok" in outcomes or user == "guest"
    assert any(o != "ok" and o[0] == 42 for o in outcomes)


async def test_statistics_lists_only_readable_tubes_both_ways(app: App) -> None:
    async with LocalSession(app, "app") as s:
        (stats,) = await call_as(s, "queue.statistics")
        assert set(stats) == {"jobs1"}
    h = Harness(app)
    h.conn.session.set_user("ro")
    h.take_writes()
    h.feed(call(1, "queue.statistics"))
    ((_, _, body),) = h.take_replies()
    assert set(body[0x30][0]) == {"jobs1", "mail"}


async def test_data_goes_in_and_comes_back_as_values(app: App) -> None:
    async with LocalSession(app, "app") as s:
        put = await call_as(s, "queue.tube.jobs1:put", [{"k": [1, "two", b"3"]}])
        assert put == [[0, "r", {"k": [1, "two", b"3"]}]]
        assert await call_as(s, "queue.tube.jobs1:take", [0]) == [[0, "t", {"k": [1, "two", b"3"]}]]
    # Closing the session gave its taken task back, as a disconnect does.
    async with LocalSession(app, "app") as s:
        assert (await call_as(s, "queue.tube.jobs1:peek", [0]))[0][1] == "r"
        assert s.conn_id in app.connections
    assert s.conn_id not in app.connections
    with pytest.raises(CallError, match="closed"):
        await call_as(s, "queue.state")
