"""The self-routing client's `run_bulk` (what `Tube.put_many` and `run_many` send
through): many calls spread over the shards, each shard's share without a
coroutine per call.

Owns: `SpreadPuts`, a base of `clients.aio.cluster.ClusterConnection`: with
`spread`, round robin over the active shards that have a primary (starting at
the client's rotating shard, as one put does), else every put to the home shard
of their utube or key; each shard's share of a burst goes out at once through
its connection's `_place` (`clients.aio.bulk`), and a put that failed is sent again
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
from queuebox.clients.putmany import Calls, Many
from queuebox.clients.sharding import ClusterView, Route, Shard

if TYPE_CHECKING:
    from queuebox.clients.aio.connection import Connection

T = TypeVar("T")


class SpreadPuts:
    """`run_bulk` over the shards; the routing it uses is ClusterConnection's."""

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
        """`Connection.run_many` over the shards: calls that are all puts without a
        utube or key spread as `run_bulk` spreads them; any other (a call of a task,
        a take, a keyed put) makes each go where `run` sends it (an ack to its
        task's shard), not round robin."""
        many: Calls[T] = Calls(wait)
        listed = list(calls)
        if any(sharding.route(c.function, c.args).kind != "spread" for c in listed):
            return await bulk.run_many(many, listed, window, self._place_run)
        return await self.run_bulk(many, listed, window, spread)

    async def run_bulk(
        self, many: Many[T], items: Iterable[Any], window: int, spread: bool = True
    ) -> list[T]:
        """Many calls (`Tube.put_many`'s puts), at most `window` unanswered on each
        shard's connection: with `spread` round robin over the
        active shards that have a primary, else all to the home shard of the first
        one's key or utube; each shard's share
        of a burst encoded and sent at once on its connection (`clients.aio.bulk`).
        A call refused before it ran (read-only, a young shard without the tube)
        runs again as `run` places it; one lost in flight goes again to the shard
        it went to, if it may be repeated (a keyed put; else `ConnectionLost`, as
        `put` says)."""
        items = iter(items)
        head = next(items, None)
        if head is None:
            return []
        items = itertools.chain([head], items)
        probe = many.call(head, None)  # a put's options decide: utube, key or spread
        where = sharding.route(probe.function, probe.args)
        if spread or where.kind == "spread":
            active = [s.number for s in self.view.active() if s.number in self._conns]
        else:
            home = self._pick(where)
            active = [home.number] if home is not None and home.number in self._conns else []
        if not active:
            return await bulk.run_many(many, items, window, self._place_run)
        start = next(self._spread)
        numbers = [active[(start + i) % len(active)] for i in range(len(active))]

        def place(
            batch: bulk.Batch[Any], first: int, chunk: list[Any], keys: list[bytes] | None,
            stride: int,
        ) -> None:  # fmt: skip
            ways = len(numbers)
            for j in range(min(ways, len(chunk))):
                entry = self._conns.get(numbers[(first + j) % ways])
                share_keys = None if keys is None else keys[j::ways]
                if entry is None:  # its primary went away meanwhile: placed as run() places it
                    self._place_run(batch, first + j, chunk[j::ways], share_keys, ways)
                else:
                    entry[1]._place(batch, first + j, chunk[j::ways], share_keys, ways)

        def recover(index: int, call: Call[Any], error: BaseException) -> Awaitable[Any] | None:
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

        patience = self._opts.deadline_for(many.wait)
        # `window` in flight on each shard's connection, as on one node's: the shares
        # alternate, so each shard holds about `window` (with one window for all, each
        # shard saw half a node's, and waited on its round trips: docs/cluster.md).
        ways = len(numbers)
        return await bulk.run_many(many, items, window * ways, place, patience, recover)

    def _place_run(
        self, batch: bulk.Batch[Any], first: int, items: list[Any], keys: list[bytes] | None,
        stride: int,
    ) -> None:  # fmt: skip
        for index in range(first, first + len(items) * stride, stride):
            batch.follow(index, asyncio.ensure_future(self.run(batch.call(index))))
