"""The blocking client routing by itself over a sharded cluster (docs/cluster.md).

Owns: `ClusterConnection`, the blocking face of `clients.aio.cluster.ClusterConnection`:
it runs that one on an event loop of its own, in a daemon thread, and waits for each
call there, so both clients route alike (one routing, not two). It is a blocking
`Connection` whose `run`, `run_many` and `ensure_session` go there, so
`conn.tube(name)` is the ordinary blocking `Tube`. Safe to share between threads.
Must not touch sockets.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable
from typing import Any, Self, TypeVar

from queuebox.clients import iproto
from queuebox.clients.aio.cluster import ClusterConnection as AioCluster
from queuebox.clients.blocking.connection import Connection
from queuebox.clients.calls import Call

T = TypeVar("T")


class ClusterConnection(Connection):
    """Every shard primary of a cluster, behind the blocking connection's API: a
    `Connection` whose queue calls run through `run`, routed; it opens no socket of
    its own, so the pool of the base is never set up."""

    def __init__(self, cluster: AioCluster) -> None:  # noqa: PLW0231 -- no pool to dial
        self._cluster = cluster
        self.put_keys = cluster.put_keys  # Tube.put keys every put
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="queuebox-cluster", daemon=True
        )
        self._thread.start()

    def _wait(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def start(self) -> Self:
        try:
            self._wait(self._cluster.start())
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._loop.is_running():
            self._wait(self._cluster.close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        if not self._loop.is_running() and not self._loop.is_closed():
            self._loop.close()

    def run(self, call: Call[T]) -> T:
        return self._wait(self._cluster.run(call))

    def run_many(self, calls: Iterable[Call[T]], window: int) -> list[T]:
        async def many() -> list[T]:
            gate = asyncio.Semaphore(window)

            async def one(call: Call[T]) -> T:
                async with gate:
                    return await self._cluster.run(call)

            return list(await asyncio.gather(*(one(c) for c in calls)))

        return self._wait(many())

    def ensure_session(self) -> None:
        self._wait(self._cluster.ensure_session())

    def ping(self) -> None:
        self._wait(self._cluster.ping())

    def call(self, function: str, *args: Any, timeout: float | None = 0.0) -> list[Any]:
        return self._wait(self._cluster.call(function, *args, timeout=timeout))

    def eval(self, expr: str, *args: Any) -> list[Any]:
        return self._wait(self._cluster.eval(expr, *args))

    def identify(self, uuid: bytes | None = None) -> bytes:
        return self._wait(self._cluster.identify(uuid))

    def cluster(self, tube: str | None = None) -> dict[str, Any]:
        """The cluster per shard, as a router's `queuebox.cluster()` answers it."""
        return self._wait(self._cluster.cluster(tube))

    def legacy(self, space: int) -> Any:
        return self._cluster.legacy(space)

    @property
    def session(self) -> bytes | None:
        return self._cluster.session

    @property
    def connected(self) -> bool:
        return self._cluster.connected


def open_cluster(
    endpoints: str,
    prefix: str,
    user: str | None,
    password: str | None,
    options: iproto.Options,
    refresh: float,
    etcd_tls: Any,
) -> Connection:
    cluster = AioCluster(endpoints, prefix, user, password, options, refresh, etcd_tls)
    return ClusterConnection(cluster).start()
