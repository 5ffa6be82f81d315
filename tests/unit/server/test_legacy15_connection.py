"""The 1.5 port's connection (server/net/legacy15.py) driven with a fake transport over
the real queue glue: the shared shell and the IPROTO path's guarantees hold on it.

A reply waits for the durability barrier and a failed barrier never acks; a
waiting take is counted in flight (back-pressure) and woken by a put from
either port; a disconnect gives the taken task back; after a reload (a failed
WAL write) names bind the new legacy core; a shutdown answers a waiting take.
"""

from __future__ import annotations

import asyncio
from typing import Any

from queuebox.protocol import box15
from queuebox.server.access.rights import Grant
from queuebox.server.core.app import App
from queuebox.server.core.session import Session
from queuebox.server.net.legacy15 import Box15Connection
from queuebox.server.queue.queue_calls import QueueCalls
from queuebox.server.settings.config import Config
from queuebox.storage.catalog import Catalog
from tests.unit.server.fake_transport import Durable, FakeTransport, record_reads

SPACE = b"0"


class Port:
    """One app with the queue glue; 1.5 connections opened on it."""

    def __init__(self, **settings: Any) -> None:
        self.app = App(Config(**settings))
        self.queue = QueueCalls(self.app, Catalog())
        self.queue.install()

    def connect(self) -> Client:
        return Client(self)


class Client:
    def __init__(self, port: Port) -> None:
        self.conn = Box15Connection(port.app, lambda: port.queue)
        self.transport = FakeTransport()
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]
        self.sync = 0

    def send(self, name: str, *args: bytes) -> int:
        self.sync += 1
        self.transport.deliver(self.conn, box15.encode_call(self.sync, name, list(args)))
        return self.sync

    def replies(self) -> list[box15.Reply]:
        data, self.transport.writes = b"".join(self.transport.writes), []
        decoder = box15.Box15Decoder()
        return [box15.parse_reply(f) for f in decoder.feed(data) if isinstance(f, box15.Frame)]

    def call(self, name: str, *args: bytes) -> box15.Reply:
        sync = self.send(name, *args)
        (reply,) = self.replies()
        assert reply.sync == sync
        return reply

    def put(self, tube: bytes, data: bytes) -> bytes:
        reply = self.call("queue.put", SPACE, tube, b"0", b"0", b"0", b"0", data)
        assert reply.code == 0, reply.message
        return reply.tuples[0][0]

    def lose(self) -> None:
        self.transport.closed = True
        self.conn.connection_lost(None)


async def turn() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def answered(c: Client) -> list[box15.Reply]:
    """The replies once some came, within a bounded number of loop turns."""
    for _ in range(50):
        if c.transport.writes:
            break
        await asyncio.sleep(0)
    return c.replies()


async def test_a_reply_waits_for_the_durability_barrier() -> None:
    port = Port()
    barrier: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    port.app.durability = Durable(lambda: barrier)
    c = port.connect()
    c.send("queue.put", SPACE, b"t", b"0", b"0", b"0", b"0", b"x")
    assert c.replies() == [] and c.conn.in_flight == 1
    barrier.set_result(None)
    (reply,) = await answered(c)
    assert reply.code == 0 and reply.tuples[0][1:] == [b"t", b"ready", b"x"]
    assert c.conn.in_flight == 0


async def test_a_failed_barrier_answers_the_1_5_disk_error_never_a_success() -> None:
    port = Port()
    barrier: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    port.app.durability = Durable(lambda: barrier)
    c = port.connect()
    sync = c.send("queue.put", SPACE, b"t", b"0", b"0", b"0", b"0", b"x")
    barrier.set_exception(OSError("disk full"))
    (reply,) = await answered(c)
    assert (reply.sync, reply.errcode, reply.code & 0xFF) == (sync, box15.ER_WAL_IO, 2)
    assert reply.message == "Failed to write to disk"


async def test_a_waiting_take_is_in_flight_and_woken_by_a_put_from_the_iproto_path() -> None:
    port = Port(max_in_flight_per_conn=1)
    c = port.connect()
    sync = c.send("queue.take", SPACE, b"t", b"30")
    assert c.replies() == []
    assert c.conn.in_flight == 1 and c.transport.paused  # back-pressure: the cap is 1
    # A put over IPROTO: the registry's handler of the same legacy core.
    found = port.app.registry.resolve("queue.put")
    assert found is not None
    closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    found.call(Session(port.app, 99, closed), [0, "t", 0, 0, 0, 0, "from iproto"])
    (reply,) = await answered(c)
    assert reply.sync == sync and reply.tuples[0][1:] == [b"t", b"taken", b"from iproto"]
    assert c.conn.in_flight == 0 and not c.transport.paused


async def test_a_disconnect_gives_the_taken_task_back() -> None:
    port = Port()
    producer, consumer = port.connect(), port.connect()
    task_id = producer.put(b"t", b"x")
    assert consumer.call("queue.take", SPACE, b"t", b"0").tuples[0][0] == task_id
    assert producer.call("queue.take", SPACE, b"t", b"0").tuples == []
    consumer.lose()
    assert consumer.conn.conn_id not in port.app.connections
    assert producer.call("queue.take", SPACE, b"t", b"0").tuples[0][0] == task_id


async def test_after_a_reload_a_waiting_take_is_woken_by_the_new_core() -> None:
    port = Port()
    c = port.connect()
    assert c.call("queue.take", SPACE, b"t", b"0").tuples == []  # queue.take is bound now
    port.queue.reload()  # what a failed WAL write does
    # A take bound to the old core would wait on the old core's waiters, which
    # no put reaches any more.
    sync = c.send("queue.take", SPACE, b"t", b"30")
    assert c.replies() == []
    found = port.app.registry.resolve("queue.put")
    assert found is not None
    closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    found.call(Session(port.app, 99, closed), [0, "t", 0, 0, 0, 0, "x"])
    (reply,) = await answered(c)
    assert reply.sync == sync and reply.tuples[0][1:] == [b"t", b"taken", b"x"]


async def test_statistics_is_the_legacy_form_even_without_arguments() -> None:
    port = Port()
    c = port.connect()
    c.put(b"t", b"x")
    (stats,) = c.call("queue.statistics").tuples
    assert stats[stats.index(b"space0.t.tasks.ready") + 1] == b"1"


async def test_unknown_and_denied_names_answer_1_5_errors() -> None:
    port = Port()
    c = port.connect()
    reply = c.call("queue.tube.t:put", b"x")  # a modern name: not served on this port
    assert (reply.errcode, reply.message) == (
        box15.ER_NO_SUCH_PROC,
        "Procedure 'queue.tube.t:put' is not defined",
    )
    c.conn.session.grant = Grant(frozenset({"read"}))
    reply = c.call("queue.put", SPACE, b"t", b"0", b"0", b"0", b"0", b"x")
    assert reply.errcode == box15.ER_PROC_LUA
    denied = "Execute access to function 'queue.put' is denied for user 'guest'"
    assert reply.message == f"Lua error: {denied}"


async def test_a_waiting_take_cancelled_by_shutdown_still_gets_an_answer() -> None:
    port = Port()
    c = port.connect()
    c.send("queue.take", SPACE, b"t", b"30")
    await turn()
    (task,) = port.app.tasks
    task.cancel()
    (reply,) = await answered(c)
    assert reply.errcode == box15.ER_PROC_LUA and "shutting down" in reply.message
    assert c.conn.in_flight == 0


async def test_a_big_frame_goes_through_the_buffer_budget_too() -> None:
    port = Port()
    c = port.connect()
    data = bytes(range(256)) * 8192  # 2 MiB
    frame = box15.encode_call(1, "queue.put", [SPACE, b"big", b"0", b"0", b"0", b"0", data])
    sizes = record_reads(c.conn)
    c.transport.deliver(c.conn, frame)
    assert len(sizes) == 2 and sum(sizes) == len(frame)  # the rest in one buffer of its size
    assert port.app.buffer_budget.total == 0
    [reply] = await answered(c)
    assert reply.code == 0 and reply.tuples[0][-1] == data
