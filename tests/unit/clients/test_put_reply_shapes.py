"""put_many's replies read from their bytes against the general decoder, over many
random reply shapes: headers in any key order, with or without a schema version or
with other keys, ints in every width (or signed), error and push codes, bodies with
other keys, data as a map or empty, ids past 32 and 64 bits, statuses as str or bin,
task data of nested maps, bins, strs (not UTF-8 too), ext types; some cut short or
with bytes after them. Every reply must give what decode_response + put_result give:
the same Task (same repr: 1, 1.0 and True differ) or the same error."""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
import uuid
from typing import Any

import msgpack
import pytest

from queuebox import protocol
from queuebox.clients.aio.wire import Wire
from queuebox.clients.errors import ConnectionLost
from queuebox.clients.putmany import Puts


def _int(rng: random.Random, value: int) -> bytes:
    """`value` packed in a width chosen at random among those that hold it."""
    ways: list[bytes] = []
    if 0 <= value < 0x80:
        ways.append(bytes([value]))
    if -32 <= value < 0:
        ways.append(struct.pack(">b", value))
    for fmt, tag, low, high in (
        (">B", 0xCC, 0, 2**8),
        (">H", 0xCD, 0, 2**16),
        (">I", 0xCE, 0, 2**32),
        (">Q", 0xCF, 0, 2**64),
        (">b", 0xD0, -(2**7), 2**7),
        (">h", 0xD1, -(2**15), 2**15),
        (">i", 0xD2, -(2**31), 2**31),
        (">q", 0xD3, -(2**63), 2**63),
    ):
        if low <= value < high:
            ways.append(bytes([tag]) + struct.pack(fmt, value))
    return rng.choice(ways)


def _array_head(rng: random.Random, count: int) -> bytes:
    ways = [b"\xdc" + struct.pack(">H", count), b"\xdd" + struct.pack(">I", count)]
    if count < 16:
        ways.append(bytes([0x90 | count]))
    return rng.choice(ways)


def _map_head(rng: random.Random, count: int) -> bytes:
    ways = [b"\xde" + struct.pack(">H", count), b"\xdf" + struct.pack(">I", count)]
    if count < 16:
        ways.append(bytes([0x80 | count]))
    return rng.choice(ways)


def _str(rng: random.Random, raw: bytes, as_bin: bool = False) -> bytes:
    if as_bin:
        return b"\xc4" + bytes([len(raw)]) + raw
    ways = [b"\xd9" + bytes([len(raw)]) + raw, b"\xda" + struct.pack(">H", len(raw)) + raw]
    if len(raw) < 32:
        ways.append(bytes([0xA0 | len(raw)]) + raw)
    return rng.choice(ways)


def _value(rng: random.Random, depth: int = 0) -> bytes:
    """One random msgpack value, nested up to three deep."""
    kind = rng.randrange(12 if depth < 3 else 8)
    if kind == 0:
        return _int(rng, rng.choice([0, 1, -1, 127, 128, -33, 2**31, 2**63 - 1, -(2**63)]))
    if kind == 1:
        return rng.choice([b"\xc0", b"\xc2", b"\xc3"])
    if kind == 2:
        return msgpack.packb(rng.choice([1.5, -0.0, float("inf"), 1.0]), use_single_float=False)
    if kind == 3:
        return b"\xca" + struct.pack(">f", 2.5)
    if kind == 4:
        return _str(rng, rng.choice([b"", b"x" * 40, "é".encode(), b"\xff\xfe"]))
    if kind == 5:
        return _str(rng, rng.randbytes(rng.randrange(5)), as_bin=True)
    if kind == 6:  # ext types: fixext 1, ext 8
        return rng.choice([b"\xd4\x01\x07", b"\xc7\x03\x05abc", b"\xd7\xff" + bytes(8)])
    if kind == 7:
        return _int(rng, rng.randrange(2**64))
    count = rng.randrange(4)
    if kind in (8, 9):
        return _array_head(rng, count) + b"".join(_value(rng, depth + 1) for _ in range(count))
    items = b"".join(_value(rng, depth + 1) + _value(rng, depth + 1) for _ in range(count))
    return _map_head(rng, count) + items


def _header(rng: random.Random) -> bytes:
    code = rng.choice([0] * 8 + [0x80, 0x8000 | 32, 0x8000 | 3])
    fields = {0: code, 1: rng.choice([0, 5, 300, 2**32 + 1, 2**64 - 1]), 5: 83}
    if rng.random() < 0.15:
        del fields[5]
    if rng.random() < 0.1:
        fields[0x0A] = 1  # a stream id
    keys = list(fields)
    if rng.random() < 0.85:  # as queuebox and Tarantool send it: fixmap, fixint keys
        head = bytes([0x80 | len(keys)]) + b"".join(
            bytes([key]) + _int(rng, fields[key]) for key in keys
        )
        return head
    if rng.random() < 0.3:
        rng.shuffle(keys)
    return _map_head(rng, len(keys)) + b"".join(
        _int(rng, key) + _int(rng, fields[key]) for key in keys
    )


def _task_row(rng: random.Random) -> bytes:
    count = rng.choice([3] * 10 + [0, 2, 4])
    task_id = rng.choice([0, 1, 127, 128, 2**16, 2**32 - 1, 2**32, 2**40, 2**64 - 1, -1, -200])
    letter = rng.choice([b"r"] * 4 + [b"t", b"-", b"!", b"~", b"?", b"D", b"rr", b""])
    fields = [
        _int(rng, task_id) if rng.random() < 0.95 else _value(rng),
        _str(rng, letter, as_bin=rng.random() < 0.1),
        _value(rng),
        _value(rng),
    ]
    return _array_head(rng, count) + b"".join(fields[:count])


def _body(rng: random.Random) -> bytes:
    shape = rng.randrange(20)
    if shape == 0:
        return b""  # no body at all
    if shape == 1:
        return _map_head(rng, 0)
    if shape == 2:  # an error reply's body
        return b"\x81\x31" + _str(rng, b"no such tube")
    if shape == 3:  # data as a map
        return b"\x81\x30" + _map_head(rng, 1) + _value(rng) + _value(rng)
    rows = rng.choice([1] * 8 + [0, 2])
    data = _array_head(rng, rows) + b"".join(
        _task_row(rng) if rng.random() < 0.9 else _value(rng) for _ in range(rows)
    )
    key = b"\x30" if rng.random() < 0.9 else b"\xcc\x30"
    if shape == 4:  # another key besides data, before or after it
        other = b"\x05" + _int(rng, 1)
        pairs = other + key + data if rng.random() < 0.5 else key + data + other
        return _map_head(rng, 2) + pairs
    return _map_head(rng, 1) + key + data


def _outcome(run: Any, *args: Any) -> tuple[Any, ...]:
    try:
        task = run(*args)
    except Exception as exc:
        return ("error", type(exc), str(exc))
    return ("task", type(task), repr(task), type(task.id), type(task.status))


def _general(puts: Puts, payload: bytes) -> Any:
    return puts.result(None, protocol.decode_response(payload))


def test_every_reply_shape_reads_as_the_general_decoder_reads_it() -> None:
    puts = Puts("jobs", {}, True)
    checked = read_fast = 0
    for seed in range(6000):
        rng = random.Random(seed)
        payload = _header(rng) + _body(rng)
        if rng.random() < 0.05:
            payload = payload[: rng.randrange(len(payload))]
        elif rng.random() < 0.05:
            payload += _value(rng)  # a value after the body
        code, sync, body = protocol.reply_head(payload)
        general = _outcome(_general, puts, payload)
        if code != 0:  # clients.aio.wire decodes it whole: nothing read from the bytes
            continue
        with contextlib.suppress(protocol.ProtocolError):  # (then the same error both ways)
            assert sync == protocol.decode_response(payload).sync, seed
        fast = _outcome(puts.frame_result, None, payload, body)
        assert fast == general, (seed, payload.hex())
        checked += 1
        read_fast += fast[0] == "task"
    assert checked > 400 and read_fast > 100, (checked, read_fast)


class _Sink:
    """What clients.aio.bulk's Group does with a reply: the put's outcome."""

    def __init__(self, puts: Puts) -> None:
        self.puts = puts
        self.got: dict[int, tuple[Any, ...]] = {}
        self.gone: list[BaseException] = []

    def reply(self, response: protocol.Response) -> None:
        self.got[response.sync] = _outcome(self.puts.result, None, response)

    def frame(self, sync: int, payload: bytes, body: int) -> None:
        try:
            task = self.puts.frame_result(None, payload, body)
        except protocol.ProtocolError:
            raise  # the wire's (Batch.answer_frame)
        except Exception:
            task = None
        self.got[sync] = _outcome(self.puts.frame_result, None, payload, body)
        assert task is None or self.got[sync][2] == repr(task)

    def lost(self, error: BaseException) -> None:
        self.gone.append(error)


def _reply(rng: random.Random, sync: int, body: bytes) -> bytes:
    if rng.random() < 0.1:
        payload = b"\x82\x01" + _int(rng, sync) + b"\x00\x00"  # no schema version
    else:
        payload = b"\x83\x00\x00\x01" + _int(rng, sync) + b"\x05" + _int(rng, 83)
    return payload + body


async def _received(stream: bytes, sink: _Sink, count: int, rng: random.Random) -> None:
    """`stream` sent after a greeting, in pieces of random sizes over a real socket,
    read by a Wire whose `count` calls go to `sink`; until each is told."""
    greeting = protocol.make_greeting("2.11.0", uuid.uuid4(), protocol.new_salt())

    loop = asyncio.get_running_loop()
    served = loop.create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            writer.write(greeting)
            await reader.readexactly(1)  # the calls are sent: the replies may come
            data, at = stream, 0
            while at < len(data):
                step = rng.choice([1, 7, 100, 4096, 70_000])
                writer.write(data[at : at + step])
                await writer.drain()
                at += step
                if rng.random() < 0.2:
                    await asyncio.sleep(0)  # a read ends here
            await reader.read()  # until the client closes
        except ConnectionError:
            pass  # the client dropped the connection
        finally:
            writer.close()
            served.set_result(None)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        transport, wire = await loop.create_connection(
            lambda: Wire(lambda _wire: None), "127.0.0.1", port
        )
        await wire.greeting
        wire.send_many(1, count, b"x", sink)
        async with asyncio.timeout(10):
            while len(sink.got) < count and not sink.gone:
                await asyncio.sleep(0.01)
        transport.close()
        await served
    finally:
        server.close()
        await server.wait_closed()


def _frame(payload: bytes) -> bytes:
    return b"\xce" + struct.pack(">I", len(payload)) + payload


async def test_replies_split_across_reads_reach_the_sink_as_decoded() -> None:
    """Replies of every shape (some larger than a read): each put's outcome is what
    the general decoder gives."""
    rng = random.Random(46)
    puts = Puts("jobs", {}, True)
    stream, expected = b"", {}
    for sync in range(1, 401):
        if sync % 50 == 0:  # larger than a read: a task of 300 KB
            big = b"\xc6" + struct.pack(">I", 300_000) + bytes(300_000)
            payload = _reply(rng, sync, b"\x81\x30\x91\x93" + _int(rng, sync) + b"\xa1r" + big)
        else:
            while True:  # one that decodes (see the next test for one that does not)
                payload = _reply(rng, sync, _body(rng))
                with contextlib.suppress(protocol.ProtocolError):
                    protocol.decode_response(payload)
                    break
        expected[sync] = _outcome(_general, puts, payload)
        stream += _frame(payload)
    sink = _Sink(puts)
    await _received(stream, sink, 400, rng)
    assert not sink.gone
    assert sink.got == expected
    assert sum(outcome[0] == "task" for outcome in expected.values()) > 100


@pytest.mark.parametrize("schema", [True, False])
async def test_an_ok_reply_that_does_not_decode_drops_the_connection(schema: bool) -> None:
    """Read from its bytes (a header as queuebox sends it) or decoded (another
    header), an OK reply whose body does not decode ends the connection: the puts
    not answered yet, that one included, are lost (sent again if keyed)."""
    rng = random.Random(7)
    puts = Puts("jobs", {}, True)
    good = b"\x81\x30\x91\x93\x05\xa1r\x01"
    bad = b"\x81\x30\x91\x93\x05\xa1r\x81\x91\x01\x01"  # a map keyed by a list
    header = b"\x83\x00\x00\x01%c\x05\x01" if schema else b"\x82\x01%c\x00\x00"
    stream = b"".join(_frame(header % sync + (bad if sync == 3 else good)) for sync in range(1, 6))
    sink = _Sink(puts)
    await _received(stream, sink, 5, rng)
    assert sorted(sink.got) == [1, 2]
    assert len(sink.gone) == 1 and isinstance(sink.gone[0], ConnectionLost)
    assert "bad reply from the server" in str(sink.gone[0])
