"""The asyncio client's connection: one pipelined IPROTO connection that survives reconnects.

Owns: `Connection`, what a program calls: ping, call, eval, the queue's module
functions (create_tube, tubes, statistics, cfg, identify, ...) and the tubes and
legacy API it hands out. How it connects, reconnects and sends one request
(the states drawn there) is its base, `clients.aio.link.Link`; tubes, the legacy
API and the consumer live in the sibling modules `tube`, `legacy` and
`consumer`; `connect()` is in `clients.aio`. Built on `protocol/` only; must
not import server/, drivers/ or storage/.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from queuebox import protocol
from queuebox.clients import iproto
from queuebox.clients.aio.legacy import LegacyQueue
from queuebox.clients.aio.link import Link
from queuebox.clients.aio.tube import Tube
from queuebox.clients.aio.wire import PushHandler
from queuebox.clients.calls import modern

__all__ = ["Connection"]


class Connection(Link):
    """A pipelined, self-healing connection to queuebox (or Tarantool + queue).

    Create it with `connect()`. Any number of coroutines may call it at once; the calls
    share one socket and their replies are matched by sync. Use it as an async context
    manager, or call `close()`.
    """

    async def ping(self) -> None:
        """Send an IPROTO PING and wait for its answer."""
        iproto.raise_for(await self._roundtrip(protocol.encode_ping, 0.0, None, repeatable=True))

    async def call(self, function: str, *args: Any, timeout: float | None = 0.0) -> list[Any]:
        """Call a server function by name; return its list of return values.

        `timeout` is how long the server may hold the call, on top of the call timeout.
        """
        payload = partial(_encode_call, function=function, args=args)
        return iproto.raise_for(await self._roundtrip(payload, timeout, None))

    async def call_pushing(
        self, function: str, args: tuple[Any, ...], on_push: PushHandler
    ) -> list[Any]:
        """Call a function that pushes before it answers (box.session.push, queuebox's
        event streams): `on_push(response)` gets each push, in order, then this returns
        the answer. No call timeout: such a call lasts as long as the server holds it."""
        payload = partial(_encode_call, function=function, args=args)
        return iproto.raise_for(await self._roundtrip(payload, None, None, on_push=on_push))

    async def eval(self, expr: str, *args: Any) -> list[Any]:
        """Evaluate a Lua expression (Tarantool; queuebox knows a few fixed texts)."""
        payload = partial(_encode_eval, expr=expr, args=args)
        return iproto.raise_for(await self._roundtrip(payload, 0.0, None))

    # -- the queue -------------------------------------------------------------------

    def tube(self, name: str) -> Tube:
        """The tube `name` (no round trip; a missing tube fails on first use)."""
        return Tube(self, name)

    def legacy(self, space: int) -> LegacyQueue:
        """The legacy 1.5 API on numeric `space` (see QUEUE.md §12)."""
        return LegacyQueue(self, space)

    async def create_tube(self, name: str, kind: str = "fifo", **opts: Any) -> Tube:
        """Create a tube (`fifo`, `fifottl`, `limfifottl`, `utube`, `utubettl`) and return it.

        `opts` are the tube options of `queue.create_tube` (temporary, if_not_exists,
        ttl, ttr, pri, capacity, storage_mode, ...).
        """
        await self.run(modern.create_tube(name, kind, opts))
        return Tube(self, name)

    async def tubes(self) -> list[str]:
        """The names of every tube, sorted."""
        return await self.run(modern.tubes())

    async def tube_exists(self, name: str) -> bool:
        """True when a tube called `name` exists."""
        return await self.run(modern.tube_exists(name))

    async def statistics(self, tube: str | None = None) -> dict[str, Any]:
        """`{tube: stats}` for every tube, or one tube's stats (QUEUE.md §7)."""
        return await self.run(modern.statistics(tube))

    async def tube_options(self, name: str, **opts: Any) -> dict[str, Any]:
        """Set a tube's retry options (`max_attempts`, `backoff`, `backoff_max`), rate
        limit (`rate_limit={"max": N, "interval": S}`, False: none) and buried retention
        (`buried_max`, `buried_ttl`; queuebox, QUEUE.md §14); returns what is now in
        force ({} for none)."""
        return await self.run(modern.tube_options(name, opts))

    async def schedule(self, name: str, tube: str, **spec: Any) -> dict[str, Any]:
        """Create or replace schedule `name`: a task into `tube` at every tick of
        `cron="EXPR"` (5 fields) or `every=SECONDS`, in time zone `tz="UTC"`, with
        `data=`, put `opts={}` and `missed="skip"|"catch_up"` (docs/workers.md);
        returns it as listed."""
        return await self.run(modern.schedule(name, tube, spec))

    async def schedules(self, name: str | None = None) -> list[dict[str, Any]]:
        """Every schedule (of the tubes this user may read), or the one called `name`."""
        return await self.run(modern.schedules(name))

    async def schedule_pause(self, name: str) -> dict[str, Any]:
        return await self.run(modern.schedule_change("pause", name))

    async def schedule_resume(self, name: str) -> dict[str, Any]:
        """Active again; ticks that fell due while paused are not fired."""
        return await self.run(modern.schedule_change("resume", name))

    async def schedule_delete(self, name: str) -> dict[str, Any]:
        return await self.run(modern.schedule_change("delete", name))

    async def cfg(self, **opts: Any) -> None:
        """Set queue options: `ttr` (session grace seconds), `in_replicaset`."""
        await self.run(modern.cfg(opts))

    async def state(self) -> str:
        """The queue's state (`RUNNING` on a standalone server)."""
        return await self.run(modern.state())

    async def identify(self, uuid: bytes | None = None) -> bytes:
        """Return this connection's queue session uuid (16 bytes), or join `uuid`'s.

        The client remembers the session and re-joins it after a reconnect.
        """
        session = await self.run(modern.identify(uuid))
        self._session = session
        return session

    async def ensure_session(self) -> None:
        """Learn the queue session uuid once, so a reconnect can re-join it."""
        if self._session is not None:
            return
        async with self._session_lock:
            if self._session is None:
                await self.identify()

    @property
    def session(self) -> bytes | None:
        """The queue session uuid this connection re-joins after a reconnect."""
        return self._session


def _encode_call(sync: int, function: str, args: tuple[Any, ...]) -> bytes:
    return protocol.encode_call(sync, function, args)


def _encode_eval(sync: int, expr: str, args: tuple[Any, ...]) -> bytes:
    return protocol.encode_eval(sync, expr, args)
