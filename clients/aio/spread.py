"""The self-routing client's `run_many` (what `Tube.put_many` sends through):
many puts spread over the shards, each shard's share without a coroutine per put.

Owns: `SpreadPuts`, a base of `clients.aio.cluster.ClusterConnection`: with
`spread`, round robin over the active shards that have a primary (starting at
the client's rotating shard, as one put does), else every put to the home shard
of the first one's utube or key; each put goes out through its shard
connection's `post` (`clients.aio.bulk`), and a put that failed is sent again
as clients/failover.py and docs/cluster.md say for `put`. Must not touch
sockets.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from queuebox.clients import failover, iproto, sharding
from queuebox.clients.aio import bulk
from queuebox.clients.calls import Call
from queuebox.clients.errors import ConnectionLost, NetworkError, ServerError, TubeNotFound
from queuebox.clients.sharding import ClusterView, Route, Shard

if TYPE_CHECKING:
    from queuebox.clients.aio.connection import Connection

T = TypeVar("T")


class SpreadPuts:
    """`run_many` over the shards; the routing it uses is ClusterConnection's."""

    view: ClusterView
    _conns: dict[int, tuple[str, Connection]]
    _spread: Iterator[int]
    _opts: iproto.Options
    run: Callable[[Call[Any]], Awaitable[Any]]
    _pick: Callable[[Route], Shard | None]
    _retrying: Callable[[Call[Any], Callable[[], Shard | None]], Awaitable[Any]]

    async def run_many(
        self, calls: Iterable[Call[T]], window: int, wait: float | None = None, spread: bool = True
    ) -> list[T]:
        """Many puts (`Tube.put_many`): with `spread` round robin over the active
        shards that have a primary, else all to the home shard of the first call's
        key or utube; each shard's share through its connection's `post` (no
        coroutine each, `clients.aio.bulk`). A put refused before it ran (read-only,
        a young shard without the tube) runs again as `run` places it; one lost in
        flight goes again to the shard it went to, if it has a key (else
        `ConnectionLost`, as `put` says)."""
        calls = iter(calls)
        first = next(calls, None)
        if first is None:
            return []
        where = sharding.route(first.function, first.args)
        if spread or where.kind == "spread":
            active = [s.number for s in self.view.active() if s.number in self._conns]
        else:
            home = self._pick(where)
            active = [home.number] if home is not None and home.number in self._conns else []
        if not active:
            return await bulk.run_many(itertools.chain([first], calls), window, self._post_run)
        start = next(self._spread)
        numbers = [active[(start + i) % len(active)] for i in range(len(active))]

        def post(index: int, call: Call[T]) -> asyncio.Future[T]:
            entry = self._conns.get(numbers[index % len(numbers)])
            if entry is None:  # its primary went away meanwhile: placed as run() places it
                return self._post_run(index, call)
            return entry[1].post(call)

        def recover(index: int, call: Call[T], error: BaseException) -> Awaitable[T] | None:
            if isinstance(error, ConnectionLost):  # it may have run: only a keyed put again
                if not call.repeatable:
                    return None
                number = numbers[index % len(numbers)]
                return self._retrying(call, lambda: self.view.shards.get(number))
            if isinstance(error, TubeNotFound | NetworkError) or (
                isinstance(error, ServerError) and failover.refused_read_only(error.code)
            ):
                return self.run(call)  # it did not run: placed afresh
            return None

        patience = self._opts.deadline_for(wait)
        return await bulk.run_many(itertools.chain([first], calls), window, post, patience, recover)

    def _post_run(self, index: int, call: Call[T]) -> asyncio.Future[T]:
        return asyncio.ensure_future(self.run(call))
