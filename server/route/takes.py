"""A take over every shard: fair, waiting without polling, never twice.

Owns `take`: a round of `take(0)` on each shard in turn, starting one shard
further every time (the router's turn counter: no shard is always asked
first), one task at most per round, so a task is delivered once; with none
and time left, `queuebox.await_ready(tube, time left)` on every shard at once
(waiting.py on the shard: no polling) and a new round, the shard that
answered first asked first, until the call's time-out, kept. A shard whose
readiness led to no task (another consumer was first, a utube busy) is asked
`fresh` next time: only a task made ready from then on wakes it. A readiness
wait stays one per (shard connection, tube) however many takes wait. Must not
touch sockets (the client's upstreams do), nor choose puts (calls.py).

    round ─▶ take(0) on shard i, i+1, ... ─┬─ a task ───────────▶ reply (resynced)
      ▲                                    └─ none, time left ─▶ await_ready on all
      └──────────── first true (or a wait ends early) ◀──────────┘   └ timeout ▶ []
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Final, final

from queuebox.drivers.args import MAX_TIMEOUT_S
from queuebox.protocol import ErrorCode, Request, RequestType, encode_call, encode_data
from queuebox.protocol.client import decode_response

from .frames import INTERNAL_SYNC, SCHEMA, no_primary, resynced
from .link import ClientLink as Client
from .shardmap import Shard
from .spread import first, forward
from .upstream import ShardLost, Upstream

AWAIT_READY = "queuebox.await_ready"
IDLE_S = 0.25  # no shard can wait (none has the tube yet, or a primary): look again


def take(client: Client, req: Request, tube: str, name: str, timeout: Any) -> None:
    if not is_timeout(timeout):  # the shard says what a node says
        return forward(client, req, first(client))
    call16 = req.type == RequestType.CALL_16
    take_frame(client, req.sync, call16, tube, name, timeout, client.map.led())


def is_timeout(value: Any) -> bool:
    """A take's timeout: a number or nil."""
    return value is None or (not isinstance(value, bool) and isinstance(value, int | float))


def take_frame(
    client: Client,
    sync: int,
    call16: bool,
    tube: str,
    name: str,
    timeout: float | None,
    shards: list[Shard],
) -> None:
    """The take of `name` under the client's `sync`, its timeout a number or
    None; `shards`: the map's led() (peek.py asks it once per read)."""
    if not shards:
        client.send(no_primary(sync, "(every shard)"))
        return
    if timeout is None:
        deadline = None
    elif timeout > 0:
        deadline = client.loop.time() + float(timeout)
    else:
        deadline = _NO_TIME  # take(0): one round, no clock asked
    # The common case without a task of its own: take(0) on the shard whose
    # turn it is; a task (or an error) goes back as the shard said it, already
    # under the client's sync (upstream.py); only when that shard has none
    # does the whole round run (`_Rounds`), then the waits.
    shard = shards[client.next_turn() % len(shards)]
    rounds = _Rounds(client, sync, call16, tube, name, deadline)
    client.upstream(shard).take(_take_zero(name, call16, sync), sync, rounds)


_NO_TIME: Final = -math.inf  # a deadline that has passed: take(0)


@final
class _Rounds:
    """What a first take(0) that found nothing runs (upstream.py calls it): the
    whole round over every shard, then the waits. One object per take, no closure."""

    def __init__(
        self, client: Client, sync: int, call16: bool, tube: str, name: str, deadline: float | None
    ) -> None:
        self.client = client
        self.sync = sync
        self.call16 = call16
        self.tube = tube
        self.name = name
        self.deadline = deadline

    def __call__(self) -> None:
        client = self.client
        client.spawn(_take(client, self.sync, self.call16, self.tube, self.name, self.deadline))


ZERO_TAKES_SIZE = 10_000
# (name, CALL_16) -> the bytes of `name(0)` before and after the sync's 8 bytes.
# Names come from clients: bounded.
_zero_takes: dict[tuple[str, bool], tuple[bytes, bytes]] = {}


def _take_zero(name: str, call16: bool, sync: int) -> bytes:
    """encode_call(sync, name, [0], call16), the sync as a uint64 (any width
    reads the same), from bytes made once per name: no packing per take."""
    parts = _zero_takes.get((name, call16))
    if parts is None:
        frame = encode_call(INTERNAL_SYNC, name, [0], call16)  # INTERNAL_SYNC: a uint64
        at = frame.index(INTERNAL_SYNC.to_bytes(8, "big"))
        parts = (frame[:at], frame[at + 8 :])
        if len(_zero_takes) >= ZERO_TAKES_SIZE:
            _zero_takes.clear()
        _zero_takes[(name, call16)] = parts
    return parts[0] + sync.to_bytes(8, "big") + parts[1]


async def _take(
    client: Client, sync: int, call16: bool, tube: str, name: str, deadline: float | None
) -> None:
    loop = client.loop
    fresh: set[int] = set()
    first: int | None = None
    while True:
        shards = [s for s in client.map.serving() if s.leader]
        if not shards:
            client.send(no_primary(sync, "(every shard)"))
            return
        lost: list[ShardLost] = []
        missing: list[bytes] = []  # the tube is on no shard: a node's answer
        for shard in _order(shards, client.next_turn(), first):
            try:
                payload = await client.upstream(shard).call(name, [0], call16)
            except ShardLost as e:
                lost.append(e)
                continue
            reply = decode_response(payload)
            if reply.error_code == ErrorCode.ER_NO_SUCH_PROC:
                missing.append(payload)
                continue  # the tube is not on this shard (yet)
            if reply.error_code:
                client.send(resynced(payload, sync))
                return
            if reply.data:
                client.send(resynced(payload, sync))
                return
            if shard.number == first:
                fresh.add(shard.number)
        if len(lost) == len(shards):
            client.send(no_primary(sync, lost[0].shard, lost[0].why))
            return
        if missing and len(missing) + len(lost) == len(shards):
            client.send(resynced(missing[0], sync))
            return
        left = None if deadline is None else deadline - loop.time()
        if left is not None and left <= 0:
            client.send(encode_data(sync, SCHEMA, []))
            return
        first = await _first_ready(client, shards, tube, left, fresh)


def _order(shards: list[Shard], turn: int, first: int | None) -> list[Shard]:
    i = turn % len(shards)
    order = shards[i:] + shards[:i]
    if first is not None:
        order.sort(key=lambda s: s.number != first)  # stable: the rest keep their turn
    return order


async def _first_ready(
    client: Client, shards: list[Shard], tube: str, left: float | None, fresh: set[int]
) -> int | None:
    """The number of the first shard that says TUBE has a ready task; None when
    the time is up or no shard could wait."""
    waits: dict[asyncio.Future[bytes], int] = {}
    for shard in shards:
        future = _readiness(client.upstream(shard), tube, left, shard.number in fresh)
        if future is not None:
            waits[future] = shard.number
    if not waits:
        await asyncio.sleep(IDLE_S if left is None else min(IDLE_S, left))
        return None
    done, _ = await asyncio.wait(waits, timeout=left, return_when=asyncio.FIRST_COMPLETED)
    for future in done:
        if _said_ready(future):
            return waits[future]
    if done and not any(_said_ready(f) for f in done):
        # A wait ended without a task (its own time-out, an error): a moment's
        # rest before the next round asks again, never a busy loop.
        await asyncio.sleep(min(IDLE_S, left) if left is not None else IDLE_S)
    return None


def _readiness(
    up: Upstream, tube: str, left: float | None, fresh: bool
) -> asyncio.Future[bytes] | None:
    """The one await_ready of (this connection, tube) in flight, sent if none is."""
    if up.lost is not None:
        return None
    key = (tube, fresh)
    found = up.waits.get(key)
    if found is not None and not found.done():
        return found
    wait_s = MAX_TIMEOUT_S if left is None else left
    future = up.call(AWAIT_READY, [tube, wait_s, {"fresh": fresh}])
    up.waits[key] = future
    return future


def _said_ready(future: asyncio.Future[bytes]) -> bool:
    if future.cancelled() or future.exception() is not None:
        return False
    reply = decode_response(future.result())
    return not reply.error_code and reply.data == [True]
