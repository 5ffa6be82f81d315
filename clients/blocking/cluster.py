"""The blocking client routing by itself over a sharded cluster (docs/cluster.md).

Owns: `ClusterConnection`, the blocking face of `clients.aio.cluster.ClusterConnection`:
it runs that one on an event loop of its own, in a daemon thread, and waits for each
call there, so both clients route alike (one routing, not two). It offers what the
blocking `Tube` needs of a connection (`run`, `run_many`, `ensure_session`), so
`conn.tube(name)` is the ordinary blocking `Tube`. Safe to share between threads.
Must not touch sockets.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar, cast

from queuebox.clients import iproto
from queuebox.clients.aio.cluster import ClusterConnection as AioCluster
from queuebox.clients.blocking.connection import Connection
from queuebox.clients.blocking.tube import Tube
from queuebox.clients.calls import Call, modern

T = TypeVar("T")


class ClusterConnection:
    """Every shard primary of a cluster, behind the blocking connection's API."""

    def __init__(self, cluster: AioCluster) -> None:
        self._cluster = cluster
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="queuebox-cluster", daemon=True
        )
        self._thread.start()

    def _wait(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def start(self) -> ClusterConnection:
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

    def __enter__(self) -> ClusterConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def tube(self, name: str) -> Tube:
        return Tube(cast(Connection, self), name)

    def create_tube(self, name: str, kind: str = "fifo", **opts: Any) -> Tube:
        self.run(modern.create_tube(name, kind, opts))
        return self.tube(name)

    def tubes(self) -> list[str]:
        return self.run(modern.tubes())

    def tube_exists(self, name: str) -> bool:
        return self.run(modern.tube_exists(name))

    def statistics(self, tube: str | None = None) -> dict[str, Any]:
        return self.run(modern.statistics(tube))

    def cfg(self, **opts: Any) -> None:
        self.run(modern.cfg(opts))

    def state(self) -> str:
        return self.run(modern.state())

    def ping(self) -> None:
        self._wait(self._cluster.ping())

    def call(self, function: str, *args: Any, timeout: float | None = 0.0) -> list[Any]:
        return self._wait(self._cluster.call(function, *args, timeout=timeout))


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
    return cast(Connection, ClusterConnection(cluster).start())
