"""Plugins in a real server, used over real sockets (docs/plugins.md).

The test tree's plugins (tests/e2e/plugins/) are loaded with `--plugin`: the
sample one's driver, functions and callbacks are used with tarantool-python
and asynctnt; the faulty ones fail at load, in callbacks and in functions,
and the server reports them, counts them and serves on without losing a
write. A plugin driver's tubes come back after a restart that loads it again
and wait, tasks kept, through a start without it.
"""

from __future__ import annotations

from typing import Any

import asynctnt
import pytest
import tarantool

from tests.e2e.serverproc import ServerProc, StartServer, login_tester
from tests.e2e.test_metrics import free_port, samples, scrape, value
from tests.waiting import wait_for

SAMPLE = "tests.e2e.plugins.sample"
FAULTY = "tests.e2e.plugins.faulty"


def test_a_plugin_driver_function_and_callback_with_tarantool_python(
    start_server: StartServer,
) -> None:
    server = start_server("--plugin", SAMPLE)
    conn = login_tester(server.port)
    try:
        conn.eval("local name, type, cfg = ... ; queue.create_tube(name, type, cfg)", "s", "lifo")
        put = conn.call("sample.put_many", "s", ["a", {"b": 2}, 3]).data[0]
        assert [list(task) for task in put] == [[0, "r", "a"], [1, "r", {"b": 2}], [2, "r", 3]]
        assert conn.call("queue.tube.s:take", 0).data == [[2, "t", 3]]  # lifo: the newest
        assert conn.call("queue.tube.s:ack", 2).data == [[2, "-", 3]]
        assert conn.call("queue.tube.s:take", 0).data == [[1, "t", {"b": 2}]]
        heard = conn.call("sample.heard").data[0]
        assert heard == [
            ["s", "put", 0, "r", "a"],
            ["s", "put", 1, "r", {"b": 2}],
            ["s", "put", 2, "r", 3],
            ["s", "take", 2, "t", 3],
            ["s", "delete", 2, "-", 3],  # an ack, as the module's callbacks hear it
            ["s", "take", 1, "t", {"b": 2}],
        ]
        stats = conn.call("queue.statistics", "s").data[0]
        assert stats["tasks"]["taken"] == 1
        # Counted by the framework from the driver's changes: lifo counts nothing itself.
        assert {k: stats["calls"][k] for k in ("put", "take", "ack", "delete")} == {
            "put": 3, "take": 2, "ack": 1, "delete": 0,
        }  # fmt: skip
        assert stats["tasks"]["done"] == 1
        assert conn.call("sample.whoami").data == [
            "tester",
            conn.call("queuebox.test.whoami").data[1],
            "RUNNING",
        ]
    finally:
        conn.close()


async def test_on_task_change_binds_a_plugin_callback_over_the_wire_with_asynctnt(
    start_server: StartServer,
) -> None:
    server = start_server("--plugin", SAMPLE)
    conn = asynctnt.Connection(
        host="127.0.0.1", port=server.port, username="tester", password="secret"
    )
    await conn.connect()
    try:
        await conn.call("queue.create_tube", ["m", "fifo", {"on_task_change": "mirror"}])
        await conn.call("queue.tube.m:put", ["x"])
        await conn.call("queue.tube.m:take", [0])
        assert (await conn.call("queue.tube.m:on_task_change", [None])).body == ["mirror"]
        await conn.call("queue.tube.m:put", ["y"])  # unbound: not mirrored
        mirrored = (await conn.call("sample.mirrored")).body[0]
        assert mirrored == [["m", "put", 0, "r"], ["m", "take", 0, "t"]]
        with pytest.raises(asynctnt.exceptions.TarantoolDatabaseError) as caught:
            await conn.call("queue.tube.m:on_task_change", [{"a": "function"}])
        assert caught.value.code == 32
        assert "takes the name of a callback a plugin registered" in caught.value.message
        # The plugin's function with the caller's rights: reader may call it, not put.
        reader = asynctnt.Connection(
            host="127.0.0.1", port=server.port, username="reader", password="readpw"
        )
        await reader.connect()
        try:
            with pytest.raises(asynctnt.exceptions.TarantoolDatabaseError) as denied:
                await reader.call("sample.try_put", ["m", "z"])
            assert denied.value.code == 42
        finally:
            await reader.disconnect()
    finally:
        await conn.disconnect()


def test_a_plugin_driver_comes_back_with_its_plugin_and_waits_without_it(
    start_server: StartServer,
) -> None:
    server = start_server("--plugin", SAMPLE)
    with _connected(server) as conn:
        conn.call("queue.create_tube", "s", "lifo")
        for data in ("a", "b", "c"):
            conn.call("queue.tube.s:put", data)
        conn.call("queue.tube.s:take", 0)  # c, taken: ready again after the restart
    server.restart(kill=True)
    with _connected(server) as conn:
        assert conn.call("queue.tube.s:take", 0).data == [[2, "t", "c"]]
    # A start without the plugin: the tube is not served, its tasks are kept.
    server.args = [a for a in server.args if a not in ("--plugin", SAMPLE)]
    server.restart()
    assert "tube not served: its driver is not registered" in server.log()
    with _connected(server) as conn:
        with pytest.raises(tarantool.DatabaseError) as caught:
            conn.call("queue.tube.s:put", "d")
        assert caught.value.args[0] == 32
        assert (
            "Tube 's' needs the driver 'lifo', which no plugin registered" in caught.value.args[1]
        )
        with pytest.raises(tarantool.DatabaseError, match="Space 's' already exists"):
            conn.call("queue.create_tube", "s", "fifo")
        assert conn.call("queue.tube", "s").data == [False]
    server.args += ["--plugin", SAMPLE]
    server.restart()
    with _connected(server) as conn:
        assert [t[0] for t in (conn.call("queue.tube.s:take", 0).data for _ in range(3))] == [
            [2, "t", "c"],
            [1, "t", "b"],
            [0, "t", "a"],
        ]


def test_faulty_plugins_are_reported_counted_and_isolated(start_server: StartServer) -> None:
    port = free_port()
    server = start_server(
        "--metrics-listen",
        f"127.0.0.1:{port}",
        "--plugin",
        f"{FAULTY}:raises_at_load",
        "--plugin",
        f"{FAULTY}:flaky",
        "--plugin",
        "no.such.plugin",
        "--plugin",
        SAMPLE,
        "--plugin-task-timeout-s",
        "0.2",
    )
    with _connected(server) as conn:
        with pytest.raises(tarantool.DatabaseError) as undefined:
            conn.call("faulty.half_loaded")
        assert undefined.value.args[0] == 33  # nothing of the plugin that raised stayed
        conn.call("queue.create_tube", "t", "fifo")
        conn.call("queue.tube.t:put", "x")
        assert conn.call("queue.tube.t:take", 0).data == [[0, "t", "x"]]  # its callback raised
        conn.call("queue.tube.t:ack", 0)  # a callback blocks the server 50 ms
        conn.call("queue.tube.t:put", "y")
        conn.call("queue.tube.t:delete", 0)  # an async callback runs out of time
        with pytest.raises(tarantool.DatabaseError) as crashed:
            conn.call("faulty.crash")
        assert crashed.value.args[0] == 32
        assert crashed.value.args[1].startswith(f"plugin {FAULTY}:flaky: TypeError:")
        with pytest.raises(tarantool.DatabaseError) as meant:
            conn.call("faulty.refuse", "because")
        assert meant.value.args == (4242, "refused: because")
        with pytest.raises(tarantool.DatabaseError, match="after the put"):
            conn.call("faulty.put_then_crash", "t")
        # The other plugin heard every change; the server is as healthy as before.
        events = [h[1] for h in conn.call("sample.heard").data[0]]
        assert events == ["put", "take", "delete", "put", "delete", "put"]  # the module's names
    wait_for(lambda: "took over 0.2 s" in server.log(), "the slow call logged")
    found = samples(scrape(port)[2])
    flaky = f"{FAULTY}:flaky"
    assert (
        value(found, "queuebox_plugin_errors_total", plugin=flaky, where="function faulty.crash")
        == 1
    )
    taking = "callback flaky.<locals>.fails_on_take"
    assert value(found, "queuebox_plugin_errors_total", plugin=flaky, where=taking) == 1
    assert value(found, "queuebox_plugin_errors_total", plugin="no.such.plugin", where="load") == 1
    slow = "callback flaky.<locals>.slow_on_ack"
    assert value(found, "queuebox_plugin_slow_calls_total", plugin=flaky, where=slow) == 1
    assert value(found, "queuebox_plugins", plugin=SAMPLE, state="loaded") == 1
    assert value(found, "queuebox_plugins", plugin=f"{FAULTY}:raises_at_load", state="failed") == 1
    log = server.log()
    assert "plugin failed" in log and "boom at load" in log and "Traceback" in log
    # Nothing acknowledged was lost or undone: the put before the crash is there after a kill.
    server.restart(kill=True)
    with _connected(server) as conn:
        assert conn.call("queue.tube.t:peek", 0).data == [[0, "r", "kept"]]


def test_plugins_from_the_config_file_and_the_environment(start_server: StartServer) -> None:
    toml = f'plugins = ["{SAMPLE}"]\n[users.tester]\npassword = "secret"\nrights = "all"\n'
    server = start_server(toml=toml)
    with _connected(server) as conn:
        conn.call("queue.create_tube", "s", "lifo")
    env = start_server(env={"QUEUEBOX_PLUGINS": f"{SAMPLE},{FAULTY}:raises_at_load"})
    with _connected(env) as conn:
        conn.call("queue.create_tube", "s", "lifo")
    assert "boom at load" in env.log()


class _connected:
    def __init__(self, server: ServerProc) -> None:
        self.conn: Any = login_tester(server.port)

    def __enter__(self) -> Any:
        return self.conn

    def __exit__(self, *exc: object) -> None:
        self.conn.close()
