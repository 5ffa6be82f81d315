"""A client's common calls routed from a few bytes of their frames.

Owns `route_frames`: the whole frames at the start of a client's read, each
of the plain shape every connector sends (a 4-byte length, a header map of
uints, a body map of a function name and an argument array), routed without
decoding the request: a put by its options (the shard spread.py's `put_shard`
picks), a call on one task (`ack`, `release`, `touch`, `bury`, `delete`,
`peek`) by its id, a take to takes.py with only its arguments decoded (no
Request made). The
frame goes on as the client sent it. It stops at the first frame of another
shape, of another call, or cut short: the rest goes to the request decoder
and calls.py, so the order of a client's frames is kept. Measured in
docs/cluster.md "Measured": the whole decode of a put cost a router about
half of its Python work per put.

Must not decide anything calls.py does not decide (a frame routed here goes
where calls.py would send it), nor touch sockets, nor judge a call's
arguments: the shard answers what a single node would.
"""

from __future__ import annotations

from typing import Any, Final, final

from mypy_extensions import i64

from queuebox.drivers.callnames import parse_name
from queuebox.protocol import ErrorCode, RequestType
from queuebox.protocol.constants import KEY_FUNCTION_NAME, KEY_TIMESTAMP, KEY_TUPLE
from queuebox.protocol.placement import BY_ID_METHODS
from queuebox.protocol.rawmsgpack import is_map_head, uint_at, unpackb, value_end

from ..replication.cluster_map import ID_SHARDS
from ..runtime.logs import get_logger
from .calls import FUNCTIONS, NAMESPACES, PARSED_CACHE_SIZE
from .choice import Spread
from .frames import failed
from .link import ClientLink as Client
from .shardmap import Shard
from .spread import forward_run, put_shard
from .takes import is_timeout, take_frame

log = get_logger("queuebox.router")
_LAST_UINT_KEY: Final = 0x0A  # header keys 0x00..0x0a hold uints (but the timestamp)
_CALL: Final = int(RequestType.CALL)
_CALL_16: Final = int(RequestType.CALL_16)
_PUT: Final = 1
_BY_ID: Final = 2
_TAKE: Final = 3
# A function name's bytes -> (what it is: _PUT, _BY_ID, _TAKE or 0 for anything
# else, its tube, the name as text). Names come from clients: bounded.
_routes: dict[bytes, tuple[int, str, str]] = {}


def route_frames(client: Client, data: bytes, max_frame: int) -> int:
    """Route the plain frames at the start of `data`; where the first frame
    left to the decoder begins (len(data): all were routed)."""
    read = _Read(client, data)
    pos: i64 = 0
    size: i64 = len(data)
    while pos + 5 < size and data[pos] == 0xCE:
        length: i64 = uint_at(data, pos + 1, 4)
        stop: i64 = pos + 5 + length
        if stop > size or length > max_frame:
            break
        try:
            if not _route(read, pos, stop):
                break
        except IndexError:  # a map or an array cut short: the decoder says what is wrong
            break
        pos = stop
    read.send()  # before the decoder's frames: each shard gets a client's frames in order
    return int(pos)


@final
class _Read:
    """One client read being routed: what it needs of the client's connection
    and the map, asked once, and the run of its frames bound for one shard
    not sent yet (`add`, `send`)."""

    def __init__(self, client: Client, data: bytes) -> None:
        self.client = client
        self.data = data
        self.shard: Shard | None = None  # the run's
        self.at: i64 = 0
        self.end: i64 = -1
        self.syncs: list[int] = []
        self.spread: Spread | None = None
        self.spread_over: list[Shard] = []
        self.by_number: dict[int, Shard] | None = None
        self.led: list[Shard] | None = None

    def add(self, shard: Shard | None, at: i64, stop: i64, sync: int) -> None:
        """The frame data[at:stop] goes to `shard`: with the run, if it follows it."""
        if at != self.end or shard is not self.shard:
            self.send()
            self.shard = shard
            self.at = at
        self.end = stop
        self.syncs.append(sync)

    def send(self) -> None:
        syncs = self.syncs
        if syncs:
            data = self.data
            whole = self.at == 0 and self.end == len(data)
            forward_run(self.client, data if whole else data[self.at : self.end], syncs, self.shard)
            self.syncs = []

    def spread_shard(self) -> Shard | None:
        """Where a put that names no utube nor key goes (spread.put_shard's last case)."""
        spread = self.spread
        if spread is None:
            spread = self.spread = self.client.spread
            self.spread_over = self.client.map.spread_over()
        return spread.pick(self.spread_over) if self.spread_over else None

    def shard_of(self, number: int) -> Shard | None:
        by_number = self.by_number
        if by_number is None:
            by_number = self.by_number = self.client.map.by_number
        return by_number.get(number)

    def led_shards(self) -> list[Shard]:
        led = self.led
        if led is None:
            led = self.led = self.client.map.led()
        return led


def _route(read: _Read, at: i64, stop: i64) -> bool:
    """Route the frame data[at:stop] if it is plain and of a common call."""
    data = read.data
    p: i64 = at + 5
    n: i64 = data[p] - 0x80  # the header: a fixmap of 1 to 15 uint keys and values
    if n < 1 or n > 15:
        return False
    p += 1
    kind = -1
    sync = 0
    while n:
        n -= 1
        key: i64 = data[p]
        if key > _LAST_UINT_KEY or key == KEY_TIMESTAMP:
            return False
        b: i64 = data[p + 1]
        if b < 0x80:
            value: int = b
            p += 2
        elif 0xCC <= b <= 0xCF:
            width: i64 = 1 << (b - 0xCC)
            value = uint_at(data, p + 2, width)
            p += 2 + width
        else:
            return False
        if key == 0:
            kind = value
        elif key == 1:
            sync = value
    if (kind != _CALL and kind != _CALL_16) or data[p] != 0x82:  # body: {name, args}
        return False
    name_at: i64 = -1
    name_end: i64 = 0
    args_at: i64 = -1
    p += 1
    for _ in range(2):
        key = data[p]
        if key == KEY_FUNCTION_NAME:
            b = data[p + 1]
            if 0xA0 <= b <= 0xBF:
                name_at = p + 2
                p = name_at + b - 0xA0
            elif b == 0xD9:
                name_at = p + 3
                p = name_at + data[p + 2]
            else:
                return False
            name_end = p
        elif key == KEY_TUPLE:
            args_at = p + 1
            p = value_end(data, args_at, stop)
            if p < 0:
                return False
        else:
            return False
    if p != stop or name_at < 0 or args_at < 0:
        return False
    b = data[args_at]
    if not 0x90 <= b <= 0x9F:  # a fixarray: fewer than 16 arguments
        return False
    name = data[name_at:name_end]
    route = _routes.get(name)
    if route is None:
        route = _route_of(name)
    what = route[0]
    if what == 0:
        return False
    count: i64 = b - 0x90
    try:
        if what == _PUT:
            return _put(read, at, stop, sync, args_at + 1, count)
        if what == _BY_ID:
            return _by_id(read, at, stop, sync, args_at + 1, count)
        return _take(read, stop, sync, kind == _CALL_16, route, args_at + 1, count)
    except Exception as e:  # a bug of ours: this client's call fails, the router goes on
        log.error("routing failed", error=repr(e), exc_info=e)
        read.client.send(failed(sync, ErrorCode.ER_PROC_LUA, f"router: {e!r}"))
    return True


def _route_of(name: bytes) -> tuple[int, str, str]:
    text = name.decode("utf-8", "surrogateescape")
    parsed = parse_name(text, NAMESPACES, FUNCTIONS)
    route = (0, "", text)
    if parsed is not None and parsed[1] is not None:
        tube, method = str(parsed[1]), parsed[2]
        if method == "put":
            route = (_PUT, tube, text)
        elif method == "take":
            route = (_TAKE, tube, text)
        elif method in BY_ID_METHODS:
            route = (_BY_ID, tube, text)
    if len(_routes) >= PARSED_CACHE_SIZE:
        _routes.clear()
    _routes[name] = route
    return route


def _put(read: _Read, at: i64, stop: i64, sync: int, first: i64, n: i64) -> bool:
    data = read.data
    if n >= 2:
        second: i64 = value_end(data, first, stop)
        head: i64 = data[second]
        if is_map_head(head) and head != 0x80:  # options, not an empty map
            try:
                opts = unpackb(data[second : value_end(data, second, stop)])
            except Exception:
                return False  # the decoder's careful way says what is wrong
            read.add(put_shard(read.client, opts), at, stop, sync)
            return True
    read.add(read.spread_shard(), at, stop, sync)
    return True


def _by_id(read: _Read, at: i64, stop: i64, sync: int, first: i64, n: i64) -> bool:
    if n < 1:
        return False
    data = read.data
    b: i64 = data[first]
    if b < 0x80:
        task_id: int = b
    elif 0xCC <= b <= 0xCF:
        task_id = uint_at(data, first + 1, 1 << (b - 0xCC))
    else:
        return False  # a float, a negative or no number: calls.py's by_id
    shard = read.shard_of(task_id % ID_SHARDS)
    if shard is None:
        return False  # no shard has it: calls.py asks the first
    read.add(shard, at, stop, sync)
    return True


def _take(
    read: _Read, stop: i64, sync: int, call16: bool, route: tuple[int, str, str], first: i64, n: i64
) -> bool:
    data = read.data
    b: i64 = data[first] if n else 0
    if n == 0:
        timeout: Any = None
    elif b < 0x80:  # a positive fixint: take(0), take(5)
        timeout = b
    else:
        args = unpackb(data[first - 1 : stop])
        timeout = args[0]
        if not is_timeout(timeout):
            return False  # not a number: calls.py sends it where a node says what is wrong
    read.send()  # the frames before it go first
    take_frame(read.client, sync, call16, route[1], route[2], timeout, read.led_shards())
    return True
