"""What a shard offers a router, over real sockets: `queuebox.act_as(user)`
(the `route` right only; the connection then has that user's rights, and what
it takes goes back when it closes) and `queuebox.await_ready(tube, timeout)`
(true at once or when a put makes a task ready, false at the timeout, takes
nothing, and never eats the wake-up of a take waiting beside it)."""

from __future__ import annotations

import asyncio
from typing import Any

import asynctnt
import pytest
import tarantool

from tests.e2e.serverproc import USERS_TOML, ServerProc, StartServer, login_tester, unique
from tests.waiting import wait_for_waiting_takes_async

ROUTE_TOML = (
    USERS_TOML
    + '\n[users.router]\npassword = "routepw"\nrights = ["route"]\n'
    + '\n[users.jobber]\npassword = "jobpw"\nwrite = ["jobs*"]\n'
)


def error_of(call: Any) -> tuple[int, str]:
    with pytest.raises(tarantool.DatabaseError) as failed:
        call()
    return failed.value.args[0], failed.value.args[1]


def test_act_as_takes_the_users_rights_and_only_route_may(start_server: StartServer) -> None:
    server = start_server(toml=ROUTE_TOML)
    tester = login_tester(server.port)
    router = login_tester(server.port, user="router", password="routepw")
    jobber = login_tester(server.port, user="jobber", password="jobpw")
    try:
        for tube in ("jobs_r", "mail_r"):
            tester.call("queue.create_tube", tube, "fifottl", {})
            tester.call(f"queue.tube.{tube}:put", tube)
        # Not a user with route: refused, also to one with every tube right.
        assert error_of(lambda: jobber.call("queuebox.act_as", "tester"))[0] == 42
        # route alone may not use the queue; acting as jobber it has jobber's rights.
        assert error_of(lambda: router.call("queue.tube.jobs_r:take", 0))[0] == 42
        assert error_of(lambda: router.call("queuebox.act_as", "nobody"))[0] == 45
        assert router.call("queuebox.act_as", "jobber").data == [True]
        task = router.call("queue.tube.jobs_r:take", 0).data[0]
        assert error_of(lambda: router.call("queue.tube.mail_r:take", 0))[0] == 42
        # Acting as jobber it no longer holds route: no acting as tester next.
        assert error_of(lambda: router.call("queuebox.act_as", "tester"))[0] == 42
        assert tester.call("queue.statistics", "jobs_r").data[0]["tasks"]["taken"] == 1
        router.close()  # what it took goes back, as a client's disconnect
        back = tester.call("queue.tube.jobs_r:take", 5).data[0]
        assert back[0] == task[0]
    finally:
        for conn in (tester, router, jobber):
            conn.close()


async def test_await_ready_answers_at_once_on_a_put_and_at_the_timeout(
    server: ServerProc,
) -> None:
    tube = unique("ready")
    conn = asynctnt.Connection(host="127.0.0.1", port=server.port, username="tester",
                               password="secret")  # fmt: skip
    taker = asynctnt.Connection(host="127.0.0.1", port=server.port, username="tester",
                                password="secret")  # fmt: skip
    await conn.connect()
    await taker.connect()
    try:
        await conn.call("queue.create_tube", [tube, "fifo", {}])
        assert (await conn.call("queuebox.await_ready", [tube, 0.05])).body == [False]
        # A take and a readiness wait, both waiting: one put wakes both, and the
        # take gets the task. The shorter wait is woken first (the module's
        # order) and passes its wake-up on.
        waiting = asyncio.ensure_future(conn.call("queuebox.await_ready", [tube, 20]))
        take = asyncio.ensure_future(taker.call(f"queue.tube.{tube}:take", [30]))
        await wait_for_waiting_takes_async(server.port, tube, 2)
        await conn.call(f"queue.tube.{tube}:put", ["job"])
        assert (await waiting).body == [True]
        assert (await take).body[0][2] == "job"
        await conn.call(f"queue.tube.{tube}:put", ["next"])
        assert (await conn.call("queuebox.await_ready", [tube, 5])).body == [True]
        # `fresh`: a task already ready does not count, one made ready after does.
        fresh = await conn.call("queuebox.await_ready", [tube, 0.05, {"fresh": True}])
        assert fresh.body == [False]
        stats = (await conn.call("queue.statistics", [tube])).body[0]["tasks"]
        assert stats["ready"] == 1  # await_ready took nothing
        with pytest.raises(asynctnt.exceptions.TarantoolDatabaseError):
            await conn.call("queuebox.await_ready", ["nosuch", 1])
    finally:
        await conn.disconnect()
        await taker.disconnect()
