"""A task's data comes back byte for byte, whatever msgpack the client sent.

The values are built as raw msgpack bytes (hypothesis), including what a
decode and re-encode would change: non-UTF-8 str, maps with array keys,
every int and float width, non-shortest headers, ext types and timestamps
of each width. A raw IPROTO client puts them and reads the reply's bytes;
the same holds after a restart from the WAL alone (SIGKILL) and from a
snapshot (SIGTERM writes one).
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.serverproc import CALL, RawClient, ServerProc, StartServer, unique

_BIG = {1: 0xCC, 2: 0xCD, 4: 0xCE, 8: 0xCF}
_SIGNED = {1: 0xD0, 2: 0xD1, 4: 0xD2, 8: 0xD3}


def _sized(fix: int | None, heads: tuple[int | None, int, int], n: int) -> st.SearchStrategy[bytes]:
    """A length header for `n`: the fix form when it fits, or any wider one
    (heads: the 8-, 16- and 32-bit length forms; arrays and maps have no 8)."""
    options = [bytes([heads[0], n])] if heads[0] is not None and n < 256 else []
    options += [bytes([heads[1]]) + struct.pack(">H", n), bytes([heads[2]]) + struct.pack(">I", n)]
    if fix is not None and n < (32 if fix == 0xA0 else 16):
        options.append(bytes([fix | n]))
    return st.sampled_from(options)


def _with_head(
    fix: int | None, heads: tuple[int | None, int, int], body: bytes
) -> st.SearchStrategy[bytes]:
    return _sized(fix, heads, len(body)).map(lambda head: head + body)


_ints = st.one_of(
    st.integers(0, 0x7F).map(lambda n: bytes([n])),
    st.integers(-32, -1).map(lambda n: struct.pack(">b", n)),
    st.sampled_from(sorted(_BIG.items())).flatmap(
        lambda wh: st.binary(min_size=wh[0], max_size=wh[0]).map(lambda b: bytes([wh[1]]) + b)
    ),
    st.sampled_from(sorted(_SIGNED.items())).flatmap(
        lambda wh: st.binary(min_size=wh[0], max_size=wh[0]).map(lambda b: bytes([wh[1]]) + b)
    ),
)
_floats = st.one_of(
    st.binary(min_size=4, max_size=4).map(lambda b: b"\xca" + b),
    st.binary(min_size=8, max_size=8).map(lambda b: b"\xcb" + b),
)
# Any bytes as str: Tarantool stores a str that is not UTF-8.
_strs = st.binary(max_size=40).flatmap(lambda b: _with_head(0xA0, (0xD9, 0xDA, 0xDB), b))
_bins = st.binary(max_size=40).flatmap(lambda b: _with_head(None, (0xC4, 0xC5, 0xC6), b))
_fixext = st.sampled_from([(0xD4, 1), (0xD5, 2), (0xD6, 4), (0xD7, 8), (0xD8, 16)]).flatmap(
    lambda hs: st.tuples(st.integers(0, 127), st.binary(min_size=hs[1], max_size=hs[1])).map(
        lambda tb: bytes([hs[0], tb[0]]) + tb[1]
    )
)
_ext = st.tuples(st.integers(0, 127), st.binary(max_size=20)).flatmap(
    lambda tb: _sized(None, (0xC7, 0xC8, 0xC9), len(tb[1])).map(
        lambda head: head + bytes([tb[0]]) + tb[1]
    )
)
# Timestamps (ext -1) in their three widths: valid ones, as the decoder checks them.
_nanos = st.integers(0, 999_999_999)
_timestamps = st.one_of(
    st.integers(0, 2**32 - 1).map(lambda s: b"\xd6\xff" + struct.pack(">I", s)),
    st.tuples(_nanos, st.integers(0, 2**34 - 1)).map(
        lambda ns: b"\xd7\xff" + struct.pack(">Q", ns[0] << 34 | ns[1])
    ),
    st.tuples(_nanos, st.integers(-(2**63), 2**63 - 1)).map(
        lambda ns: b"\xc7\x0c\xff" + struct.pack(">Iq", *ns)
    ),
)
_scalars = st.one_of(
    st.sampled_from([b"\xc0", b"\xc2", b"\xc3"]),
    _ints,
    _floats,
    _strs,
    _bins,
    _fixext,
    _ext,
    _timestamps,
)


def _array(items: list[bytes]) -> st.SearchStrategy[bytes]:
    return _sized(0x90, (None, 0xDC, 0xDD), len(items)).map(lambda head: head + b"".join(items))


def _map(pairs: list[tuple[bytes, bytes]]) -> st.SearchStrategy[bytes]:
    flat = b"".join(k + v for k, v in pairs)
    return _sized(0x80, (None, 0xDE, 0xDF), len(pairs)).map(lambda head: head + flat)


# Map keys: scalars or arrays of scalars (what a Python dict can hold as a tuple).
_keys = st.one_of(_scalars, st.lists(_scalars, max_size=3).flatmap(_array))
VALUES = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).flatmap(_array),
        st.lists(st.tuples(_keys, inner), max_size=4).flatmap(_map),
    ),
    max_leaves=12,
)


def _call(client: RawClient, name: str, *raw_args: bytes) -> bytes:
    """CALL with arguments given as msgpack bytes; the reply body's bytes."""
    sync = client.next_sync
    client.next_sync += 1
    body = (
        b"\x82\x22"
        + msgpack.packb(name)
        + b"\x21"
        + bytes([0x90 | len(raw_args)])
        + b"".join(raw_args)
    )
    payload = msgpack.packb({0: CALL, 1: sync}) + body
    client.send(b"\xce" + struct.pack(">I", len(payload)) + payload)
    length = struct.unpack(">I", client.recv_exact(5)[1:])[0]
    reply = client.recv_exact(length)
    unpacker = msgpack.Unpacker(raw=True, strict_map_key=False)
    unpacker.feed(reply)
    header = unpacker.unpack()
    assert header[1] == sync and header[0] == 0, (header, reply)
    return reply[unpacker.tell() :]


def _task_data(body: bytes) -> tuple[int, bytes]:
    """(task id, data bytes) of a reply `{0x30: [[id, status, data]]}` of a fifo."""
    unpacker = msgpack.Unpacker(raw=True, strict_map_key=False)
    unpacker.feed(body)
    assert unpacker.read_map_header() == 1 and unpacker.unpack() == 0x30
    assert unpacker.read_array_header() == 1 and unpacker.read_array_header() == 3
    task_id = unpacker.unpack()
    unpacker.skip()  # status
    return task_id, body[unpacker.tell() :]


def _client(server: ServerProc) -> RawClient:
    client = RawClient(server.port)
    assert client.auth("tester", "secret").error is None
    return client


def _tube(client: RawClient) -> str:
    name = unique("bytes")
    reply = client.call("queue.create_tube", name, "fifo", {})
    assert reply.error is None, reply
    return name


def _roundtrip(client: RawClient, tube: str, data: bytes) -> None:
    put_id, put_data = _task_data(_call(client, f"queue.tube.{tube}:put", data))
    assert put_data == data
    taken_id, taken_data = _task_data(_call(client, f"queue.tube.{tube}:take", b"\x00"))
    assert (taken_id, taken_data) == (put_id, data)
    _call(client, f"queue.tube.{tube}:ack", msgpack.packb(put_id))


@pytest.fixture(scope="module")
def raw(server: ServerProc) -> Any:
    client = _client(server)
    try:
        yield client, _tube(client)
    finally:
        client.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=VALUES)
def test_put_then_take_gives_back_the_same_bytes(raw: Any, data: bytes) -> None:
    client, tube = raw
    _roundtrip(client, tube, data)


@pytest.mark.parametrize(
    "data",
    [
        b"\xa3\xff\xfe\x80",  # a str that is not UTF-8
        b"\x81\x92\x01\x02\xa1x",  # a map with an array key
        b"\xd6\xff\x00\x00\x00\x01",  # timestamp 32
        b"\xd7\xff\x00\x00\x00\x00\x00\x00\x00\x01",  # timestamp 64 holding a 32-bit value
        b"\xca\x3f\x80\x00\x00",  # float 32
        b"\xcd\x00\x01",  # 1 in a uint16
    ],
    ids=["non-utf8", "array-key", "ts32", "ts64", "float32", "wide-int"],
)
def test_values_a_decode_would_change(raw: Any, data: bytes) -> None:
    client, tube = raw
    _roundtrip(client, tube, data)


@pytest.mark.parametrize("kill", [True, False], ids=["wal", "snapshot"])
def test_the_same_bytes_after_a_restart(start_server: StartServer, kill: bool) -> None:
    values = [
        b"\xa3\xff\xfe\x80",
        b"\x81\x92\x01\x02\xa1x",
        b"\xd7\xff\x00\x00\x00\x00\x00\x00\x00\x01",
        b"\xca\x3f\x80\x00\x00",
        b"\xc7\x0c\xff" + bytes(12),
        b"\x92\x81\x91\xc0\xc4\x00\xdd\x00\x00\x00\x00",
    ]
    server = start_server()
    with _client(server) as client:
        tube = _tube(client)
        ids = [_task_data(_call(client, f"queue.tube.{tube}:put", v))[0] for v in values]
    server.restart(kill)
    with _client(server) as client:
        taken = [_task_data(_call(client, f"queue.tube.{tube}:take", b"\x00")) for _ in values]
    assert taken == list(zip(ids, values, strict=True))


def _legacy_fields(body: bytes) -> list[bytes]:
    """The fields of the one tuple in a legacy reply `{0x30: [[...]]}`, as bytes."""
    unpacker = msgpack.Unpacker(raw=True, strict_map_key=False)
    unpacker.feed(body)
    assert unpacker.read_map_header() == 1 and unpacker.unpack() == 0x30
    assert unpacker.read_array_header() == 1
    fields = []
    for _ in range(unpacker.read_array_header()):
        start = unpacker.tell()
        unpacker.skip()
        fields.append(body[start : unpacker.tell()])
    return fields


@pytest.mark.parametrize("kill", [True, False], ids=["wal", "snapshot"])
def test_the_legacy_api_keeps_a_str_that_is_not_utf8(start_server: StartServer, kill: bool) -> None:
    """Tarantool stores such a str; the legacy API keeps its bytes, in the WAL too."""
    odd = b"\xa3\xff\xfe\x80"
    server = start_server()
    with _client(server) as client:
        args = [msgpack.packb(v) for v in (0, "odd", 0, 0, 0, 0)] + [odd, b"\xa2ok"]
        put = _legacy_fields(_call(client, "queue.put", *args))
        assert put[-2:] == [odd, b"\xa2ok"]
    server.restart(kill)
    with _client(server) as client:
        taken = _legacy_fields(_call(client, "queue.take", *map(msgpack.packb, (0, "odd", 0))))
    assert taken[0] == put[0] and taken[-2:] == [odd, b"\xa2ok"]
    assert "Traceback" not in server.log()
