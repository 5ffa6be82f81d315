"""The server's parts, built in order in one place (server/build.py), over a real data directory."""

from __future__ import annotations

from pathlib import Path

from queuebox.server.build import build_server
from queuebox.server.config import Config


async def test_build_server_wires_store_queue_and_builtins(tmp_path: Path) -> None:
    server = build_server(Config(data_dir=str(tmp_path)))
    try:
        app = server.app
        # Group commit is the durability barrier, and a failed write reloads the queue.
        assert app.durability_barrier == server.store.commit.barrier
        assert server.store.commit.on_rollback == server.queue.reload
        # The queue's names, the store's admin call and the builtins all resolve.
        for name in ("queue.create_tube", "queue.put", "queue.statistics", "queue.state"):
            assert app.registry.resolve(name) is not None, name
        assert app.registry.resolve("queuebox.snapshot") is not None
        assert app.registry.resolve("queuebox.echo") is not None
        assert app.registry.resolve("queuebox.test.crash") is None  # test hooks are off
        # The queue's state is the real one, not the builtin placeholder.
        found = app.registry.resolve("queue.state")
        assert found is not None and found[0] == server.queue._state
    finally:
        await app.on_shutdown()
