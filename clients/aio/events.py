"""A tube's task-change events as an async iterator: `async for event in tube.events()`.

Owns: `Events`, which holds the server's long call `queue.tube.<t>:events(since)`
open, turns its pushes into `Event`s and keeps the position (the LSN of the last
event, or of the last beat: every record up to it was looked at). When the
connection breaks, or the server ends the stream (a restart, a shutdown), it
subscribes again from that position once the connection is back, so the events
go on without a gap. Talks to the server only through
`Connection.call_pushing`; must not touch sockets.

    subscribe(since) ──pushes──▶ events, beats: the position moves
        ▲        │
        │        ├─ connection lost / stream ended ─▶ subscribe(position) again
        │        ├─ "drop" (the tube is gone) ──────▶ the iteration ends
        └────────┴─ events lost (position gone) ────▶ EventsLost raised
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from queuebox import protocol
from queuebox.clients.errors import ConnectionLost, EventsLost, QueueboxError
from queuebox.clients.model import Event

if TYPE_CHECKING:
    from queuebox.clients.aio.tube import Tube

__all__ = ["Events"]

STOP = "queuebox.events.stop"
_END = object()


class Events:
    """The events of one tube, from `since` (an LSN; None: from now on).

    Iterate with ``async for``; `position` is where a later ``tube.events(since=...)``
    would go on from. ``await events.aclose()`` (or leaving an ``async with``) ends
    the stream on the server too.
    """

    def __init__(self, tube: Tube, since: int | None) -> None:
        self.tube = tube
        self.position = since
        self._name = f"queue.tube.{tube.name}:events"
        self._items: asyncio.Queue[Any] = asyncio.Queue()
        self._runner: asyncio.Task[None] | None = None
        self._sync: int | None = None
        self._dropped = False
        self._temporary = False
        self._closed = False

    def __aiter__(self) -> Events:
        return self

    async def __anext__(self) -> Event:
        if self._runner is None:
            self._runner = asyncio.get_running_loop().create_task(self._run())
        item = await self._items.get()
        if item is _END:
            self._items.put_nowait(_END)  # every later call ends too
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            raise item
        return item  # type: ignore[no-any-return]

    async def __aenter__(self) -> Events:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """End the stream: the server stops it, the iteration ends."""
        self._closed = True
        runner, self._runner = self._runner, None
        if runner is not None and self._sync is not None and not runner.done():
            with contextlib.suppress(QueueboxError):  # a connection gone took the stream along
                await self.tube.connection.call(STOP, self._sync)
        if runner is not None:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        self._items.put_nowait(_END)

    async def _run(self) -> None:
        connection = self.tube.connection
        try:
            while not self._closed:
                self._sync = None
                try:
                    answer = await connection.call_pushing(
                        self._name, (self.position,), self._pushed
                    )
                except ConnectionLost:
                    if self._temporary:
                        raise EventsLost(
                            32,
                            f"events lost: tube '{self.tube.name}' is temporary and the "
                            "connection broke: its changes meanwhile cannot be read back",
                        ) from None
                    continue  # the connection comes back: go on from the position
                if self._dropped:
                    break
                if answer and answer[0] is not None:
                    self.position = answer[0]
        except QueueboxError as exc:
            self._items.put_nowait(exc)
            return
        self._items.put_nowait(_END)

    def _pushed(self, response: protocol.Response) -> None:
        self._sync = response.sync
        for push in response.data or ():
            kind, lsn = push.get("event"), push.get("lsn")
            if lsn is None:
                self._temporary = True
            elif self.position is None or lsn > self.position:
                self.position = lsn
            if kind == "beat":
                continue
            if kind == "drop":
                self._dropped = True
                continue
            self._items.put_nowait(Event.from_push(push))
