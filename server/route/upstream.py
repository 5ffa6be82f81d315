"""One connection from a router to one shard's primary, acting as one client.

Owns `Upstream`: connect, log in as the router's service user and call
`queuebox.act_as(<the client's user>)` before any of the client's frames goes
out (so nothing ever runs with the service user's rights); then frames
forwarded as they came, replies handed back as bytes (the client's syncs are
unique on its connection, so none is rewritten; a read that starts with
replies to the client, a first take's task among them, goes back in one
piece: frames.replies_at), and the router's own calls
(a take over every shard, await_ready, statistics) under syncs of the
router's own (frames.INTERNAL_SYNC and above), answered to a future. When the
connection is lost, every call still in flight is answered: the client's
with an error naming the shard (it may have run there; one never sent, as
before the login was done: it may be retried), the router's with
`ShardLost`. A shard that stops answering is lost too: while anything is
awaited here (a call in flight, the login) and nothing is read, the router
pings it (it answers pings while takes wait) and drops the connection after
`silence_s` without a byte (a stopped process, a partition that keeps TCP
up: no close ever comes). Closing it is how a client's taken tasks go back
on that shard. Must not decide where a call goes (calls.py), nor read a
client's frame.

    silence watch (armed while something is awaited, ticks every silence_s / 4):
      tick ─┬─ read (or a probe greeted) since the last tick ─▶ silent = 0
            └─ nothing read ─▶ silent += 1 ─┬─ < 4: PING and a probe (once logged in)
                                            └─ = 4: lost, "stopped answering"

A probe is a second connection, only to be greeted: a shard that stopped
reading this one (`max_in_flight_per_conn` requests wait on it) answers no
ping, yet greets a new connection, and its host took every byte sent here;
a stopped one does not greet, a dead flow leaves bytes unacknowledged.
"""

from __future__ import annotations

import asyncio
import fcntl
import sys
import termios
from collections.abc import Callable
from itertools import count
from typing import Any, cast, final

from queuebox import protocol
from queuebox.protocol.client import Response, decode_response
from queuebox.protocol.constants import RESPONSE_CHUNK
from queuebox.protocol.replyhead import reply_head

from ..runtime.logs import get_logger
from .frames import (
    INTERNAL_SYNC,
    data_count,
    framed,
    lost_in_flight,
    no_primary,
    replies_at,
    schema_at,
)
from .shardmap import Shard

log = get_logger("queuebox.router")
CONNECT_TIMEOUT_S = 2.0
SILENCE_S = 5.0  # `queuebox router --shard-silence`'s default
SILENT_TICKS = 4  # the silence watch's ticks in `silence_s` (see the top)
STOPPED_ANSWERING = "stopped answering"
GREETING_SIZE = 128
_syncs = count(INTERNAL_SYNC)


class ShardLost(Exception):
    """The shard's primary could not be reached, or went away mid-call."""

    def __init__(self, shard: str, why: str) -> None:
        super().__init__(f"shard {shard} {why}")
        self.shard = shard
        self.why = why


class Login:
    """Who an upstream logs in as, and for whom it acts."""

    __slots__ = ("password", "router_name", "service_user")

    def __init__(self, service_user: str, password: str, router_name: str = "") -> None:
        self.service_user = service_user
        self.password = password
        self.router_name = router_name  # told to the shards: their consoles show it


class Traffic:
    """The router's counts (its /metrics, and the put spread's "two choices")."""

    __slots__ = ("forwarded", "inflight", "open", "own_calls", "pings", "silenced")

    def __init__(self) -> None:
        self.forwarded: dict[str, int] = {}  # client frames sent on, per shard
        self.own_calls: dict[str, int] = {}  # the router's own calls, per shard
        self.inflight: dict[str, int] = {}  # forwarded, not answered yet, per shard
        self.open = 0  # upstream connections now
        self.pings: dict[str, int] = {}  # pings sent to a silent shard, per shard
        self.silenced: dict[str, int] = {}  # upstreams dropped: the shard stopped answering


class SchemaIds:
    """The one schema id a router's clients see (docs/cluster.md "One schema
    id"): the sum of the versions the shards last reported, so it moves when
    a shard's schema moves and stays put while replies from different shards
    (whose versions differ) and the router's own alternate."""

    __slots__ = ("_by_shard", "presented")

    def __init__(self) -> None:
        self._by_shard: dict[str, int] = {}
        self.presented = 0  # until a shard answered (connectors ignore 0)

    def saw(self, shard: str, version: int) -> None:
        if version >= 0 and self._by_shard.get(shard) != version:
            self._by_shard[shard] = version
            self.presented = sum(self._by_shard.values()) & 0xFFFFFFFF


@final
class Upstream:
    """An asyncio protocol by its methods, not by its base: a native class in the
    compiled build, so the frame path reads its fields and calls its methods
    without Python lookups (tests/bench/route_path.py)."""

    def __init__(
        self,
        shard: Shard,
        login: Login,
        user: str,
        deliver: Callable[[bytes], None],
        traffic: Traffic,
        schemas: SchemaIds,
        silence_s: float,
        session: bytes | None = None,
        peer: str = "",
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        # Held: on Python 3.11 every asyncio.get_running_loop() is a getpid() system call.
        self._loop = loop or asyncio.get_running_loop()
        self.shard = shard
        self.address = shard.leader or ""
        self._login = login
        self.user = user
        self.session = session  # the client's queue session UUID, once it identified
        self.peer = peer  # the client's address, for the shard's list of connections
        self._deliver = deliver  # the client's transport.write
        self._traffic = traffic
        self._schemas = schemas
        self._schema = -1  # the shard's schema version in its last reply
        self._transport: asyncio.Transport | None = None
        self._splitter = protocol.framing.FrameSplitter()
        self._greeting = b""
        self._held: list[bytes] = []  # frames waiting for the login, or the end of the turn
        self.ready = False
        self.lost: ShardLost | None = None
        self.forwarded: set[int] = set()  # the client's syncs in flight here
        self.pending: dict[int, asyncio.Future[bytes]] = {}
        # takes.py's first take(0), sent under the client's sync: a reply with a
        # task or an error goes straight to the client; this callback runs when
        # the shard had no task, or was lost
        self.taking: dict[int, Callable[[], None]] = {}
        self._login_syncs: set[int] = set()
        # takes.py: the one queuebox.await_ready per (tube, fresh) in flight here
        self.waits: dict[tuple[str, bool], asyncio.Future[bytes]] = {}
        self._silence_s = silence_s
        self._watch: asyncio.TimerHandle | None = None  # the silence watch's next tick
        self._heard = False  # a read since the watch's last tick
        self._silent = 0  # the watch's ticks in a row without a read
        self._probe: asyncio.Task[None] | None = None  # a second connection: does it greet?
        self._greeted = False  # the probe was greeted since the watch's last tick
        self._loop.create_task(self._connect())

    # -- what the client's connection calls --
    def forward(self, frame: bytes, sync: int) -> None:
        """Send a client's frame (length prefix included); its reply goes back as is."""
        self.forward_run(frame, [sync])

    def forward_run(self, frames: bytes, syncs: list[int]) -> None:
        """Send a run of a client's whole frames as read (peek.py: the frames of
        one read bound for this shard, in one piece), `syncs` theirs; counted once."""
        if self.lost is not None:
            for sync in syncs:
                self._deliver(no_primary(sync, self.shard.name, self.lost.why))
            return
        self.forwarded.update(syncs)
        name = self.shard.name
        traffic = self._traffic
        traffic.forwarded[name] = traffic.forwarded.get(name, 0) + len(syncs)
        traffic.inflight[name] = traffic.inflight.get(name, 0) + len(syncs)
        self._write(frames)

    def take(self, frame: bytes, sync: int, nothing: Callable[[], None]) -> None:
        """Send the router's own frame under a client's sync (a take(0) for it):
        a task or an error goes back to the client as the shard sent it (it is
        under the client's sync already); `nothing` runs when the shard had no
        task or was lost. No future nor sync of the router's own."""
        if self.lost is not None:
            nothing()
            return
        self.taking[sync] = nothing
        own = self._traffic.own_calls
        own[self.shard.name] = own.get(self.shard.name, 0) + 1
        self._write(frame)

    def call(self, name: str, args: list[Any], call16: bool = False) -> asyncio.Future[bytes]:
        """The router's own call: its reply's payload (frames.py reads it); the
        future fails with ShardLost."""
        future: asyncio.Future[bytes] = self._loop.create_future()
        if self.lost is not None:
            future.set_exception(self.lost)
            return future
        sync = next(_syncs)
        self.pending[sync] = future
        own = self._traffic.own_calls
        own[self.shard.name] = own.get(self.shard.name, 0) + 1
        self._write(protocol.encode_call(sync, name, args, call16))
        return future

    def _write(self, frame: bytes) -> None:
        """Frames go out together at the end of this loop turn (one write for
        all a client's read brought); held until the login is done."""
        held = self._held
        held.append(frame)
        if self.ready and len(held) == 1:
            self._loop.call_soon(self._flush)
        if self._watch is None:
            self._start_watch()

    def _flush(self) -> None:
        if self.ready and self._held and self._transport is not None:
            self._transport.write(b"".join(self._held))
            self._held.clear()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._lose("was left")

    # -- the connection --
    async def _connect(self) -> None:
        host, _, port = self.address.rpartition(":")
        # A protocol by its methods (the transports ask no base class of it).
        factory = cast(Callable[[], asyncio.Protocol], self._self)
        try:
            await asyncio.wait_for(
                self._loop.create_connection(factory, host, int(port)), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError, ValueError) as e:
            log.info("shard unreachable", shard=self.shard.name, address=self.address, error=str(e))
            self._lose("cannot be reached")

    def _self(self) -> Upstream:
        return self  # the protocol factory create_connection calls

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        self._traffic.open += 1  # connection_lost counts it down
        if self.lost is not None:  # left while connecting
            transport.close()
            return
        self._transport = transport
        if self._watch is None:
            self._start_watch()  # the greeting and the login are awaited

    def data_received(self, data: bytes) -> None:
        self._heard = True
        if len(self._greeting) < GREETING_SIZE:
            self._greeting += data
            if len(self._greeting) < GREETING_SIZE:
                return
            data = self._greeting[GREETING_SIZE:]
            self._greeting = self._greeting[:GREETING_SIZE]
            self._log_in(protocol.parse_greeting(self._greeting).salt)
        if not self._splitter.buffered:
            # The common read: replies to the client's frames, handed on in one piece.
            end, answered = replies_at(data, self.taking, self.forwarded)
            if end:
                self._saw_schema(data, 5)  # its first reply's: a change is seen by the next read
                if answered:
                    self._traffic.inflight[self.shard.name] -= answered
                self._deliver(data if end == len(data) else data[:end])
                if end == len(data):
                    return
                data = data[end:]
        payloads, fatal = self._splitter.split(data)
        for payload in payloads:
            self._reply(payload)
        if fatal is not None:
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._traffic.open -= 1
        self._lose("lost its primary")

    # What asyncio.Protocol would give (the transport calls them).
    def eof_received(self) -> bool | None:
        return None  # the transport closes itself

    def pause_writing(self) -> None:
        pass  # a shard that reads slowly: the router's writes wait in the transport

    def resume_writing(self) -> None:
        pass

    def _log_in(self, salt: bytes) -> None:
        login = self._login
        scramble = protocol.scramble(salt, login.password)
        sync = next(_syncs)
        self._login_syncs.add(sync)
        assert self._transport is not None
        self._transport.write(protocol.encode_auth(sync, login.service_user, scramble))
        self._send_login_call("queuebox.act_as", self._act_as())
        if self.session is not None:
            self._send_login_call("queuebox.identify_as", [self.session])

    def _act_as(self) -> list[Any]:
        """act_as's arguments: the client's user, and who is asking for whom (a
        shard shows them in its connections: docs/cluster.md "One view")."""
        return [self.user, {"router": self._login.router_name, "peer": self.peer}]

    def _send_login_call(self, name: str, args: list[Any]) -> None:
        sync = next(_syncs)
        self._login_syncs.add(sync)
        assert self._transport is not None
        self._transport.write(protocol.encode_call(sync, name, args))

    def _saw_schema(self, data: bytes, at: int) -> None:
        version = schema_at(data, at)
        if version != self._schema:
            self._schema = version
            self._schemas.saw(self.shard.name, version)

    def _reply(self, payload: bytes) -> None:
        self._saw_schema(payload, 0)
        code, sync, _ = reply_head(payload)
        if sync < INTERNAL_SYNC:
            if self.taking and code != RESPONSE_CHUNK:
                nothing = self.taking.pop(sync, None)
                if nothing is not None and data_count(payload) == 0:
                    nothing()
                    return
            if code != RESPONSE_CHUNK and sync in self.forwarded:
                self.forwarded.discard(sync)
                self._traffic.inflight[self.shard.name] -= 1
            self._deliver(framed(payload))
            return
        if sync in self._login_syncs:
            self._logged_in(sync, decode_response(payload))
            return
        future = self.pending.pop(sync, None)
        if future is not None and not future.done() and code != RESPONSE_CHUNK:
            future.set_result(payload)

    def _logged_in(self, sync: int, reply: Response) -> None:
        self._login_syncs.discard(sync)
        if not reply.ok:
            # Never send the client's frames as the service user.
            log.error("router login refused by shard", shard=self.shard.name,
                      error=reply.error_message)  # fmt: skip
            self.close()
            return
        if not self._login_syncs and not self.ready:
            self.ready = True
            self._flush()

    # -- the silence watch (see the top) --
    def _start_watch(self) -> None:
        self._heard = False
        self._silent = 0
        self._watch = self._loop.call_later(self._silence_s / SILENT_TICKS, self._tick)

    def _tick(self) -> None:
        self._watch = None
        if self.lost is not None or not self._awaiting():
            return  # the next call starts the watch again
        if self._heard or (self._greeted and self._delivered()):
            self._heard = self._greeted = False
            self._silent = 0
        else:
            self._silent += 1
            if self._silent >= SILENT_TICKS:
                self._went_silent()
                return
            if self.ready and self._transport is not None:
                pings = self._traffic.pings
                pings[self.shard.name] = pings.get(self.shard.name, 0) + 1
                self._transport.write(protocol.encode_ping(next(_syncs)))
                if self._probe is None:
                    self._probe = self._loop.create_task(self._greets())
        self._watch = self._loop.call_later(self._silence_s / SILENT_TICKS, self._tick)

    async def _greets(self) -> None:
        """Whether the shard greets a new connection within a tick: one that
        stopped reading this connection (its `max_in_flight_per_conn` requests
        wait there, readiness waits among them) answers no ping here, yet it
        runs; a stopped one does not greet (its kernel accepts, nothing more)."""
        host, _, port = self.address.rpartition(":")
        writer: asyncio.StreamWriter | None = None
        try:
            async with asyncio.timeout(self._silence_s / SILENT_TICKS):
                reader, writer = await asyncio.open_connection(host, int(port))
                await reader.readexactly(GREETING_SIZE)
            self._greeted = True
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass  # not greeted: the watch counts the tick as silent
        finally:
            self._probe = None
            if writer is not None:
                writer.close()

    def _delivered(self) -> bool:
        """Every byte written here reached the shard's host: none waits in the
        transport, none unacknowledged in the kernel (TIOCOUTQ). A flow that
        died on the way (a firewall or NAT that forgot it: new connections
        pass) leaves the pings there, however well the probe is greeted."""
        transport = self._transport
        if transport is None or transport.get_write_buffer_size():
            return False
        sock = transport.get_extra_info("socket")
        if sock is None:
            return False
        try:
            unsent = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, bytes(4))
        except OSError:
            return False  # cannot tell: silent
        return int.from_bytes(unsent, sys.byteorder) == 0

    def _awaiting(self) -> bool:
        """Something here waits for the shard: the login, a call, a take, a wait."""
        return not self.ready or bool(self.forwarded or self.pending or self.taking)

    def _went_silent(self) -> None:
        name = self.shard.name
        silenced = self._traffic.silenced
        silenced[name] = silenced.get(name, 0) + 1
        log.warning("shard stopped answering: its connection dropped", shard=name,
                    address=self.address, silence_s=self._silence_s)  # fmt: skip
        transport = self._transport
        self._lose(STOPPED_ANSWERING)
        if transport is not None:
            transport.abort()  # not close(): writes a stopped shard never reads would hold it

    def _lose(self, why: str) -> None:
        if self.lost is not None:
            return
        self.lost = ShardLost(self.shard.name, why)
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._probe is not None:
            self._probe.cancel()
        # Before the login was done none of the client's frames went out.
        answer = lost_in_flight if self.ready else no_primary
        self.ready = False
        for sync in self.forwarded:  # once logged in, sent: each may have run
            self._deliver(answer(sync, self.shard.name, why))
        self._traffic.inflight[self.shard.name] = max(
            0, self._traffic.inflight.get(self.shard.name, 0) - len(self.forwarded)
        )
        self.forwarded.clear()
        self._held.clear()  # the client's among them are in `forwarded`, answered above
        for future in self.pending.values():
            if not future.done():
                future.set_exception(self.lost)
        self.pending.clear()
        taking = list(self.taking.values())
        self.taking.clear()
        for nothing in taking:
            nothing()
