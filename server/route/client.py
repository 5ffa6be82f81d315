"""One client's connection to a router.

Owns `RouterClient`: the greeting, the login (chap-sha1 against the users the
shards have: access/users.py; the rights stay the shards' to check, through
`queuebox.act_as`), the frames of the common calls handed to peek.py as
read (a put, a take, a call on one task), PING and ID answered here, every
other request decoded and handed to calls.py, and the client's upstreams:
one per shard primary, opened on first need and opened again when the
shard's primary moved. When the client leaves,
its upstreams close, so each shard gives its taken tasks back (what a
router's death does too). Must not decide where a call goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable
from typing import Any, Protocol, cast, final

from queuebox import protocol
from queuebox.protocol import ProtocolError, Request, RequestType

from ..access.users import GUEST, Users
from ..runtime.errors import CallError
from ..runtime.logs import get_logger
from .calls import route_call
from .frames import SCHEMA, failed
from .peek import route_frames
from .shardmap import RouterMap, Shard
from .spread import Spread, forward, to_first
from .upstream import Login, Traffic, Upstream


class Shared(Protocol):
    """What every client connection of one router shares (router.py's Router)."""

    map: RouterMap
    traffic: Traffic
    spread: Spread
    users: Users
    login: Login
    instance_uuid: uuid.UUID
    max_frame: int
    clients: set[RouterClient]
    turn: int
    name: str


log = get_logger("queuebox.router")


@final
class RouterClient:
    """An asyncio protocol by its methods, not by its base: a native class in
    the compiled build (its fields read without Python lookups)."""

    def __init__(self, router: Shared) -> None:
        self.router = router
        # Asked once: on Python 3.11 every asyncio.get_running_loop() is a getpid() system call.
        self.loop = asyncio.get_running_loop()
        self.map = router.map
        self.traffic = router.traffic
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

    # -- what peek.py, calls.py, spread.py and takes.py use (their `Client`) --
    def upstream(self, shard: Shard) -> Upstream:
        up = self._ups.get(shard.number)
        if up is None or up.lost is not None or up.address != shard.leader:
            if up is not None:
                up.close()  # its primary moved: what it held there goes back
            login, traffic = self.router.login, self.traffic
            up = Upstream(
                shard, login, self.user, self.send, traffic, self.session, self.peer, self.loop
            )
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
            self._transport.write(b"".join(out))
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

    # -- the connection --
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        self._transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = f"{peer[0]}:{peer[1]}"
        self.router.clients.add(self)
        transport.write(protocol.make_greeting("2.6.0", self.router.instance_uuid, self.salt))

    def data_received(self, data: bytes) -> None:
        self.spread.new_read()
        if not self._decoder.buffered and not self._decoder.dead:
            # The common frames (put, take, a call on one task) routed from a few bytes.
            end = route_frames(self, data, self._max_frame)
            if end == len(data):
                return
            data = data[end:]
        try:
            found = self._decoder.feed(data)
        except ProtocolError as e:
            found = [e]
        for item in found:
            if isinstance(item, ProtocolError):
                self.send(failed(item.sync, item.code, item.message))
                if item.fatal:
                    self._close()
                    return
                continue
            self._handle(item)

    # What asyncio.Protocol would give (the transport calls them).
    def eof_received(self) -> bool | None:
        return None  # the transport closes itself

    def pause_writing(self) -> None:
        pass  # a client that reads slowly: its replies wait in the transport

    def resume_writing(self) -> None:
        pass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.router.clients.discard(self)
        for up in self._ups.values():
            up.close()
        self._ups.clear()
        for task in list(self._work):
            task.cancel()

    def _close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def _done(self, task: asyncio.Future[None]) -> None:
        self._work.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("routed call failed", error=repr(task.exception()))

    # -- requests --
    def _handle(self, req: Request) -> None:
        kind = req.type
        try:
            if kind in (RequestType.CALL, RequestType.CALL_16, RequestType.EVAL):
                route_call(self, req)
            elif kind == RequestType.PING:
                self.send(protocol.encode_ok(req.sync, SCHEMA))
            elif kind == RequestType.AUTH:
                self._auth(req)
            elif kind == RequestType.ID:
                self.send(protocol.encode_id_reply(req.sync, SCHEMA))
            elif kind == RequestType.SELECT:
                to_first(self, req)  # the queue's spaces, the schema views: as a shard has them
            else:
                forward(self, req, None) if not self.map.serving() else to_first(self, req)
        except CallError as e:
            self.send(failed(req.sync, e.code, e.message))
        except Exception as e:  # a bug of ours: this client's call fails, the router goes on
            log.error("routing failed", error=repr(e), exc_info=e)
            self.send(failed(req.sync, protocol.ErrorCode.ER_PROC_LUA, f"router: {e!r}"))

    def _auth(self, req: Request) -> None:
        user: Any = req.user_name
        if not isinstance(user, str):
            raise CallError(protocol.ErrorCode.ER_MISSING_REQUEST_FIELD,
                            "Missing mandatory field 'user name' in request")  # fmt: skip
        self.router.users.authenticate(user, self.salt, req.scramble())
        self.user = user
        for up in self._ups.values():
            up.act_as(user)
        self.send(protocol.encode_ok(req.sync, SCHEMA))


async def close_all(clients: set[RouterClient]) -> None:
    for client in list(clients):
        client._close()
    with contextlib.suppress(Exception):
        await asyncio.sleep(0)
