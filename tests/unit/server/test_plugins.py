"""Plugins in process (server/plugins/): loading, what they register, isolation.

The host loads the test tree's plugins (tests/e2e/plugins/) over an App and
the queue glue, as build_server does, and requests run the way dispatch.py runs
them. The e2e tests (tests/e2e/test_plugins.py) do the same over real sockets.
"""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from queuebox.drivers.driver import DRIVERS
from queuebox.protocol import password_hash2
from queuebox.server.core.app import App
from queuebox.server.core.callas import call_now
from queuebox.server.core.session import Session
from queuebox.server.plugins import PluginAPI, PluginHost, unpack
from queuebox.server.plugins.host import MAX_CHAINED_CHANGES
from queuebox.server.queue.queue_calls import QueueCalls
from queuebox.server.runtime.errors import CallError
from queuebox.server.settings.config import Config, UserSpec
from queuebox.storage.catalog import Catalog

SAMPLE = "tests.e2e.plugins.sample"
FAULTY = "tests.e2e.plugins.faulty"


class Server:
    """A host with `plugins` loaded, then the queue, as build_server orders them."""

    def __init__(self, *plugins: str, **settings: Any) -> None:
        self.app = App(Config(plugins=plugins, **settings))
        self.host = PluginHost(self.app)
        self.host.load_all()
        self.queue = QueueCalls(self.app, Catalog())
        self.queue.install()
        self.closed = asyncio.get_running_loop().create_future()

    def run(self, name: str, *args: Any, user: str = "guest", conn_id: int = 1) -> Any:
        """A call as `user`, on the path (rights and all) of a call over the wire."""
        session = Session(self.app, conn_id, self.closed)
        session.set_user(user)
        return call_now(session, name, args)

    def errors(self) -> dict[tuple[str, str], int]:
        return dict(self.host.guard.errors)

    def close(self) -> None:
        self.host.close()


@pytest.fixture
async def servers() -> Iterator[list[Server]]:
    made: list[Server] = []
    yield made
    for server in made:
        server.close()


async def start(made: list[Server], *plugins: str, **settings: Any) -> Server:
    server = Server(*plugins, **settings)
    made.append(server)
    return server


async def test_the_sample_plugin_adds_a_driver_functions_and_callbacks(
    servers: list[Server],
) -> None:
    s = await start(servers, SAMPLE)
    assert [p.name for p in s.host.plugins] == [SAMPLE] and s.host.plugins[0].error is None
    s.run("queue.create_tube", "stack", "lifo")
    put = s.run("sample.put_many", "stack", ["a", "b", "c"])
    assert [task[:2] for task in put[0]] == [[0, "r"], [1, "r"], [2, "r"]]
    assert s.run("queue.tube.stack:take", 0)[0][:2] == [2, "t"]  # the newest first
    heard = s.run("sample.heard")[0]
    assert heard[-1] == ["stack", "take", 2, "t", "c"]
    assert [h[1] for h in heard] == ["put", "put", "put", "take"]
    assert s.run("sample.whoami", conn_id=5) == ["guest", 5, "INIT"]


async def test_a_named_callback_hears_only_the_tubes_bound_to_it(servers: list[Server]) -> None:
    s = await start(servers, SAMPLE)
    s.run("queue.create_tube", "a", "fifo", {"on_task_change": "mirror"})
    s.run("queue.create_tube", "b", "fifo")
    s.run("queue.tube.a:put", 1)
    s.run("queue.tube.b:put", 2)
    assert s.run("sample.mirrored") == [[["a", "put", 0, "r"]]]
    assert s.run("queue.tube.b:on_task_change", "mirror") == [None]
    s.run("queue.tube.b:put", 3)
    assert s.run("queue.tube.a:on_task_change") == ["mirror"]  # unbound
    s.run("queue.tube.a:put", 4)
    assert s.run("sample.mirrored")[0][1:] == [["b", "put", 1, "r"]]


async def test_put_many_checks_its_items_first(servers: list[Server]) -> None:
    s = await start(servers, SAMPLE)
    s.run("queue.create_tube", "t", "fifo")
    with pytest.raises(CallError) as caught:
        s.run("sample.put_many", "t", "not a list")
    assert (caught.value.code, caught.value.message) == (
        32,
        "put_many: items must be a non-empty array",
    )
    assert s.run("queue.statistics", "t")[0]["calls"]["put"] == 0
    assert s.errors() == {}  # an error a plugin meant is no failure of it


async def test_a_plugin_that_raises_at_load_leaves_nothing_behind(servers: list[Server]) -> None:
    s = await start(servers, f"{FAULTY}:raises_at_load", SAMPLE, "no.such.plugin")
    loaded = {p.name: p.error for p in s.host.plugins}
    assert loaded[f"{FAULTY}:raises_at_load"] == "RuntimeError: boom at load"
    assert loaded[SAMPLE] is None
    assert "ModuleNotFoundError" in (loaded["no.such.plugin"] or "")
    assert s.app.registry.resolve("faulty.half_loaded") is None
    assert s.errors() == {
        (f"{FAULTY}:raises_at_load", "load"): 1,
        ("no.such.plugin", "load"): 1,
    }
    s.run("queue.create_tube", "t", "lifo")  # the good plugin is there all the same


async def test_a_driver_that_breaks_the_contract_is_refused_naming_what_it_lacks(
    servers: list[Server],
) -> None:
    s = await start(servers, f"{FAULTY}:bad_driver")
    (plugin,) = s.host.plugins
    assert plugin.error == (
        'QueueError: The "noput" driver does not have an implementation of method "put".'
    )
    assert "noput" not in DRIVERS


async def test_failing_and_slow_callbacks_are_reported_and_the_change_stands(
    servers: list[Server],
) -> None:
    s = await start(servers, f"{FAULTY}:flaky", SAMPLE, plugin_task_timeout_s=0.05)
    s.run("queue.create_tube", "t", "fifo")
    s.run("queue.tube.t:put", "x")
    assert s.run("queue.tube.t:take", 0)[0][:2] == [0, "t"]
    assert s.run("queue.tube.t:take", 0) == []
    s.run("queue.tube.t:put", "y")
    s.run("queue.tube.t:take", 0)
    flaky = f"{FAULTY}:flaky"
    assert s.errors() == {(flaky, "callback flaky.<locals>.fails_on_take"): 2}
    # The other plugin's callback heard every change all the same.
    assert [h[1] for h in s.run("sample.heard")[0]] == ["put", "take", "put", "take"]
    s.run("queue.tube.t:ack", 0)
    # Callbacks only: on a loaded machine the plugin's load (an import) can run
    # past plugin_slow_s too, and is counted as slow then (seen in a CI run).
    slow = {place: n for place, n in s.host.guard.slow.items() if place[1].startswith("callback")}
    assert slow == {(flaky, "callback flaky.<locals>.slow_on_ack"): 1}
    s.run("queue.tube.t:delete", 1)  # an async callback that never ends in time
    await asyncio.sleep(0.2)
    assert s.errors()[(flaky, "callback flaky.<locals>.never_done")] == 1
    assert s.app.tasks == set()


async def test_a_failing_function_answers_an_error_and_keeps_what_it_did(
    servers: list[Server],
) -> None:
    s = await start(servers, f"{FAULTY}:flaky")
    flaky = f"{FAULTY}:flaky"
    with pytest.raises(CallError) as caught:
        s.run("faulty.crash")
    assert caught.value.code == 32
    assert caught.value.message.startswith(f"plugin {flaky}: TypeError: unsupported operand")
    with pytest.raises(CallError) as meant:
        s.run("faulty.refuse", "no")
    assert (meant.value.code, meant.value.message) == (4242, "refused: no")
    s.run("queue.create_tube", "t", "fifo")
    with pytest.raises(CallError, match="after the put"):
        s.run("faulty.put_then_crash", "t")
    (kept,) = s.run("queue.tube.t:peek", 0)  # never undone
    assert kept[:2] == [0, "r"] and unpack(kept[2]) == "kept"
    assert s.errors() == {
        (flaky, "function faulty.crash"): 1,
        (flaky, "function faulty.put_then_crash"): 1,
    }


async def test_plugin_functions_call_the_queue_with_the_callers_rights(
    servers: list[Server],
) -> None:
    hash2 = password_hash2("pw")
    users = {
        "ops": UserSpec("ops", hash2, frozenset({"read", "write", "admin"})),
        "reader": UserSpec("reader", hash2, frozenset({"read"}), {"write": ("mine",)}),
    }
    s = await start(servers, SAMPLE, users=users)
    s.run("queue.create_tube", "t", "fifo", user="ops")
    s.run("queue.create_tube", "mine", "fifo", user="ops")
    assert s.run("sample.try_put", "t", "x", user="ops")[0][:2] == [0, "r"]
    with pytest.raises(CallError) as caught:
        s.run("sample.try_put", "t", "y", user="reader")  # read may call it, not put in t
    assert (caught.value.code, caught.value.message) == (
        42,
        "Execute access to function 'queue.tube.t:put' is denied for user 'reader'",
    )
    assert s.run("sample.try_put", "mine", "y", user="reader")[0][:2] == [0, "r"]
    with pytest.raises(CallError) as outer:
        s.run("sample.put_many", "t", ["z"], user="guest")  # guest may do nothing here
    assert outer.value.code == 42
    assert s.errors() == {}


def _module(name: str, entry: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.queuebox_plugin = entry  # type: ignore[attr-defined]
    return module


async def test_callbacks_that_change_tasks_on_every_change_are_cut_off(
    servers: list[Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    def entry(api: PluginAPI) -> None:
        @api.on_task_change(tube="t")
        def again(task: Any, event: str) -> None:
            if event == "put":
                api.tube("t").put(task.data + 1)

    monkeypatch.setitem(sys.modules, "endless_plugin", _module("endless_plugin", entry))
    s = await start(servers, "endless_plugin")
    s.run("queue.create_tube", "t", "fifo")
    s.run("queue.tube.t:put", 0)
    tasks = s.run("queue.statistics", "t")[0]["tasks"]["total"]
    assert MAX_CHAINED_CHANGES < tasks <= MAX_CHAINED_CHANGES + 2  # then the chain is cut
    assert s.errors() == {("*", "callbacks without end"): 1}


async def test_registering_after_load_and_bad_registrations_are_refused(
    servers: list[Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    kept: list[PluginAPI] = []
    problems: list[str] = []

    def entry(api: PluginAPI) -> None:
        kept.append(api)
        for bad in (
            lambda: api.function("queue.tube.t:put")(lambda c: 1),
            lambda: api.function("queuebox.echo")(lambda c: 1),
            lambda: api.function("x", access="root")(lambda c: 1),
            lambda: api.function("bad name!:x:y")(lambda c: 1),
            lambda: api.register_driver("fifo", object),  # type: ignore[arg-type]
            lambda: api.callback("")(lambda t, e: None),
        ):
            try:
                bad()
            except Exception as exc:
                problems.append(str(exc))
        api.function("mine")(lambda c: ["ok"])

    monkeypatch.setitem(sys.modules, "picky_plugin", _module("picky_plugin", entry))
    s = await start(servers, "picky_plugin")
    assert len(problems) == 6, problems
    assert "are the server's" in problems[0] and "are the server's" in problems[1]
    assert 'overriding registered driver "fifo"' in problems[4]
    assert s.run("mine") == ["ok"]
    with pytest.raises(RuntimeError, match="while they load"):
        kept[0].function("later")(lambda c: 1)


async def test_plugins_of_the_entry_point_group(
    servers: list[Server], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = tmp_path / "sample_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sample-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[queuebox.plugins]\nsample = {SAMPLE}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    # By its entry point's name...
    named = await start(servers, "sample")
    assert named.host.plugins[0].error is None
    named.close()
    servers.remove(named)
    # ...or all of the group.
    every = await start(servers, plugin_entry_points=True)
    assert [p.name for p in every.host.plugins] == ["sample"]
    every.run("queue.create_tube", "s", "lifo")
