"""The server's parts, built in order in one place (server/start/build.py), on real data."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from queuebox.server.core.app import App
from queuebox.server.settings.config import Config
from queuebox.server.start.build import build_server
from queuebox.storage.errors import DataDirLocked


async def test_build_server_wires_store_queue_and_builtins(tmp_path: Path) -> None:
    server = await build_server(App(Config(data_dir=str(tmp_path))))
    try:
        app = server.app
        # Group commit is what replies wait for, and a failed write reloads the queue.
        assert app.durability.on_loop  # wal_mode=write
        reloads = server.queue.reloads
        server.store.commit.report.rolled_back()
        assert server.queue.reloads == reloads + 1
        # The queue's names, the store's admin call and the builtins all resolve.
        for name in ("queue.create_tube", "queue.put", "queue.statistics", "queue.state"):
            assert app.registry.resolve(name) is not None, name
        assert app.registry.resolve("queuebox.snapshot") is not None
        assert app.registry.resolve("queuebox.echo") is not None
        assert app.registry.resolve("queuebox.test.crash") is None  # test hooks are off
        # The queue's state is the real one, not the builtin placeholder.
        found = app.registry.resolve("queue.state")
        assert found is not None and found.call == server.queue._state
    finally:
        await app.on_shutdown()


async def test_recovery_runs_without_the_collector_and_freezes_what_it_made(
    tmp_path: Path,
) -> None:
    first = await build_server(App(Config(data_dir=str(tmp_path))))
    first.queue.modern.call(1, "queue.create_tube", ["jobs", "fifo"])
    first.queue.modern.call(1, "queue.tube.jobs:put", ["a"])
    await first.app.on_shutdown()
    gc.unfreeze()

    seen: list[bool] = []
    gc.callbacks.append(lambda phase, info: seen.append(phase == "start"))
    try:
        server = await build_server(App(Config(data_dir=str(tmp_path))))
        # Nothing was collected while it recovered, the collector is back on,
        # and the recovered objects (its task among them) are frozen.
        assert seen == [] and gc.isenabled()
        assert gc.get_freeze_count() > 0
        assert server.queue.modern.call(1, "queue.tube.jobs:take", [0])[0][2] == "a"
        await server.app.on_shutdown()
    finally:
        gc.callbacks.pop()
        gc.unfreeze()


async def test_a_failed_recovery_turns_the_collector_back_on(tmp_path: Path) -> None:
    holder = await build_server(App(Config(data_dir=str(tmp_path))))
    try:
        with pytest.raises(DataDirLocked):  # the directory is this server's
            await build_server(App(Config(data_dir=str(tmp_path))))
        assert gc.isenabled()
    finally:
        await holder.app.on_shutdown()
        gc.unfreeze()
