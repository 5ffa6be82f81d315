"""One client's connection to a router.

Owns `RouterClient`: the greeting, the login (chap-sha1 against the users the
shards have: access/users.py; the rights stay the shards' to check, through
`queuebox.act_as`), the frames of the common calls handed to peek.py as
read (a put, a take, a call on one task), PING and ID answered here, every
other request decoded and handed to calls.py. What a routed call uses of
the connection (its upstreams, its replies) is its base, link.py's
`ClientLink`. When the client leaves, its upstreams close, so each shard
gives its taken tasks back (what a router's death does too). Must not
decide where a call goes.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast, final

from queuebox import protocol
from queuebox.protocol import ProtocolError, Request, RequestType

from ..runtime.errors import CallError
from .calls import route_call
from .frames import SCHEMA, failed
from .link import ClientLink, log
from .peek import route_frames
from .spread import forward, to_first


@final
class RouterClient(ClientLink):
    """An asyncio protocol by its methods, not by its base: a native class in
    the compiled build (its fields read without Python lookups)."""

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
        if user != self.user and any(up.lost is None for up in self._ups.values()):
            # A shard's connection acting as the old user cannot act as another
            # (acting, it no longer holds `route`): it would be closed, and what
            # the client took there would go back behind its back. A node keeps
            # the session through a new login; a router says it cannot.
            raise CallError(protocol.ErrorCode.ER_ACCESS_DENIED,
                            f"a connection through a router keeps its user once it has "
                            f"called a shard: connect again to log in as '{user}'")  # fmt: skip
        self.user = user  # the next upstream opened acts as this user
        self.send(protocol.encode_ok(req.sync, SCHEMA))
