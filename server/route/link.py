"""The part of a client's connection to a router that a routed call uses.

Owns `ClientLink` (client.py's `RouterClient` is one): the client's upstreams,
one per shard primary, opened on first need and opened again when the shard's
primary moved; its replies, gathered into one write per loop turn; the work
its calls spawn; and `Shared`, what every client of one router shares.
peek.py, calls.py, spread.py, takes.py and view.py take a `ClientLink`, so
they need not import the connection that calls them. Must not read frames
or decide where a call goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable
from typing import Protocol

from queuebox import protocol

from ..access.users import GUEST, Users
from ..runtime.logs import get_logger
from .choice import Spread
from .frames import stamped
from .shardmap import RouterMap, Shard
from .upstream import Login, SchemaIds, Traffic, Upstream


class Shared(Protocol):
    """What every client connection of one router shares (router.py's Router)."""

    map: RouterMap
    traffic: Traffic
    schemas: SchemaIds  # the one schema id every reply to a client carries
    spread: Spread
    users: Users
    login: Login
    instance_uuid: uuid.UUID
    max_frame: int
    clients: set[ClientLink]
    turn: int
    name: str
    silence_s: float  # how long a shard may stay silent with calls in flight (upstream.py)


log = get_logger("queuebox.router")


class ClientLink:
    """What a routed call uses of a client's connection (see the top): a native
    class in the compiled build, so the frame path reads its fields and calls
    its methods without Python lookups."""

    def __init__(self, router: Shared) -> None:
        self.router = router
        # Asked once: on Python 3.11 every asyncio.get_running_loop() is a getpid() system call.
        self.loop = asyncio.get_running_loop()
        self.map = router.map
        self.traffic = router.traffic
        self.schemas = router.schemas
        self.spread = router.spread
        self.user = GUEST
        self.router_name = router.name
        self.peer = ""  # the client's "host:port", told to the shards with act_as
        self.session: bytes | None = None  # queue.identify's UUID, the same on every shard
        self.salt = protocol.new_salt()
        self._max_frame = router.max_frame
        self._decoder = protocol.RequestDecoder(router.max_frame)
        self._ups: dict[int, Upstream] = {}
        self._work: set[asyncio.Future[None]] = set()
        self._transport: asyncio.Transport | None = None
        self._out: list[bytes] = []
        self.closed = False

    def upstream(self, shard: Shard) -> Upstream:
        up = self._ups.get(shard.number)
        if up is None or up.lost is not None or up.address != shard.leader:
            if up is not None:
                up.close()  # its primary moved: what it held there goes back
            login, traffic = self.router.login, self.traffic
            up = Upstream(
                shard, login, self.user, self.send, traffic, self.schemas, self.router.silence_s,
                self.session, self.peer, self.loop,
            )  # fmt: skip
            self._ups[shard.number] = up
        return up

    def send(self, data: bytes) -> None:
        """Replies go out together at the end of this loop turn: one write, not one each."""
        if self.closed:
            return
        out = self._out
        out.append(data)
        if len(out) == 1:
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        out = self._out
        if out and not self.closed and self._transport is not None:
            self._transport.write(stamped(b"".join(out), self.schemas.presented))
        out.clear()

    def spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._work.add(task)
        task.add_done_callback(self._done)

    def next_turn(self) -> int:
        self.router.turn += 1
        return self.router.turn

    def client_count(self) -> int:
        return len(self.router.clients)

    def shard_names(self) -> list[str]:
        """The shards this client has a live upstream to (the router's /metrics)."""
        return [up.shard.name for up in self._ups.values() if up.lost is None]

    def _close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def _done(self, task: asyncio.Future[None]) -> None:
        self._work.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("routed call failed", error=repr(task.exception()))


async def close_all(clients: set[ClientLink]) -> None:
    for client in list(clients):
        client._close()
    with contextlib.suppress(Exception):
        await asyncio.sleep(0)
