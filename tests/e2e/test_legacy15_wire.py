"""The Tarantool 1.5 port on the wire: PING, other request types, bad bodies and
frames, fuzzed frames, and the same legacy tasks seen from both ports
(tarantool-python over IPROTO, a raw 1.5 client on legacy_listen)."""

from __future__ import annotations

import random
import socket
import struct
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import tarantool

from queuebox.protocol import box15
from tests.e2e.box15proc import Box15Client, start_legacy_server
from tests.e2e.serverproc import REPO, ServerProc, clean_env, login_tester
from tests.waiting import all_waiting_takes, wait_for_one_more_take

SPACE = "3"


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProc, int]]:
    server, port = start_legacy_server(tmp_path_factory.mktemp("legacy15wire"))
    try:
        yield server, port
    finally:
        server.stop()


@pytest.fixture
def client(legacy: tuple[ServerProc, int]) -> Iterator[Box15Client]:
    with Box15Client(legacy[1]) as c:
        yield c


@pytest.fixture
def modern(legacy: tuple[ServerProc, int]) -> Iterator[tarantool.Connection]:
    conn = login_tester(legacy[0].port)
    try:
        yield conn
    finally:
        conn.close()


def tube() -> str:
    return f"w{uuid.uuid4().hex[:8]}"


def test_ping_is_answered_with_the_header_alone(client: Box15Client) -> None:
    client.send(struct.pack("<III", 0xFF00, 0, 41))
    assert client.sock.recv(100) == struct.pack("<III", 0xFF00, 0, 41)


@pytest.mark.parametrize("request_type", [13, 17, 19, 21, 0, 64])
def test_other_request_types_get_the_unsupported_command_error(
    client: Box15Client, request_type: int
) -> None:
    client.send(struct.pack("<III", request_type, 3, 5) + b"abc")
    reply = client.recv()
    assert (reply.type, reply.sync, reply.code) == (request_type, 5, 0x0202)
    assert reply.message == "Illegal parameters, unsupported command code, check the error log"
    assert client.ping().code == 0  # the connection goes on


def test_a_malformed_call_body_is_an_error_reply_and_the_connection_goes_on(
    client: Box15Client,
) -> None:
    body = b"\x00\x00\x00\x00\x09queue.pu"  # the name cut short
    client.send(struct.pack("<III", 22, len(body), 8) + body)
    reply = client.recv()
    assert (reply.sync, reply.errcode) == (8, box15.ER_ILLEGAL_PARAMS)
    assert reply.message.startswith("Illegal parameters, packet too short")
    assert client.call("queue.statistics", SPACE).code == 0


def test_an_oversize_frame_closes_only_that_connection(legacy: tuple[ServerProc, int]) -> None:
    with Box15Client(legacy[1]) as bystander, Box15Client(legacy[1]) as bad:
        bad.send(struct.pack("<III", 22, 2**31, 1))
        assert bad.closed_by_peer()
        assert bystander.ping().code == 0
    assert "bad frame, closing" in legacy[0].log()


def test_pipelined_calls_are_each_answered(client: Box15Client) -> None:
    t = tube()
    frames = [
        box15.encode_call(
            100 + i, "queue.put", [SPACE.encode(), t.encode(), b"0", b"0", b"0", b"0", b"%d" % i]
        )
        for i in range(20)
    ]
    client.send(b"".join(frames))
    replies = [client.recv() for _ in range(20)]
    assert sorted(r.sync for r in replies) == list(range(100, 120))
    assert all(r.code == 0 and r.tuples[0][2] == b"ready" for r in replies)


def test_put_over_iproto_take_over_1_5_and_back(
    client: Box15Client, modern: tarantool.Connection
) -> None:
    t = tube()
    put = modern.call("queue.put", int(SPACE), t, 0, 0, 0, 0, "from iproto", 42).data[0]
    taken = client.call("queue.take", SPACE, t, "0").tuples
    assert taken == [[put[0].encode(), t.encode(), b"taken", b"from iproto", struct.pack("<I", 42)]]
    # The owner is the 1.5 connection: the IPROTO one may not ack it.
    with pytest.raises(tarantool.DatabaseError, match="Only consumer that took the task"):
        modern.call("queue.ack", int(SPACE), put[0])
    assert client.call("queue.ack", SPACE, put[0]).tuples[0][2] == b"taken"

    back = client.call("queue.put", SPACE, t, "0", "0", "0", "0", b"from 1.5 \xff").tuples[0]
    again = modern.call("queue.take", int(SPACE), t, 0).data[0]
    assert again == [back[0].decode(), t, "taken", b"from 1.5 \xff"]
    assert modern.call("queue.ack", int(SPACE), again[0]).data[0][0] == again[0]
    stats = client.call("queue.statistics", SPACE, t).tuples[0]
    counters = dict(zip(stats[::2], stats[1::2], strict=True))
    assert (
        counters[f"space{SPACE}.{t}.put".encode()],
        counters[f"space{SPACE}.{t}.ack".encode()],
    ) == (b"2", b"2")


def test_a_1_5_take_is_woken_by_an_iproto_put(
    client: Box15Client, modern: tarantool.Connection, legacy: tuple[ServerProc, int]
) -> None:
    t = tube()
    before = all_waiting_takes(legacy[0].port)
    client.send(box15.encode_call(77, "queue.take", [SPACE.encode(), t.encode(), b"10"]))
    wait_for_one_more_take(legacy[0].port, before)  # the take waits
    put = modern.call("queue.put", int(SPACE), t, 0, 0, 0, 0, "wake").data[0]
    reply = client.recv()
    assert reply.sync == 77 and reply.tuples[0][:3] == [put[0].encode(), t.encode(), b"taken"]


def test_statistics_without_arguments_covers_every_legacy_space(client: Box15Client) -> None:
    t = tube()
    for space in ("4", "5"):
        client.call("queue.put", space, t, "0", "0", "0", "0", "x")
    (flat,) = client.call("queue.statistics").tuples
    names = set(flat[::2])
    assert {f"space4.{t}.put".encode(), f"space5.{t}.put".encode()} <= names


def test_guest_rights_apply(tmp_path_factory: pytest.TempPathFactory) -> None:
    server, port = start_legacy_server(
        tmp_path_factory.mktemp("readonly"), "--guest-rights", "read"
    )
    try:
        with Box15Client(port) as c:
            denied = c.call("queue.put", SPACE, "t", "0", "0", "0", "0", "x")
            assert denied.errcode == box15.ER_PROC_LUA
            assert (
                "Execute access to function 'queue.put' is denied for user 'guest'"
                in denied.message
            )
            assert c.call("queue.statistics").code == 0  # read is allowed
    finally:
        server.stop()


def mutated(rng: random.Random, frames: list[bytes]) -> bytes:
    data = bytearray(b"".join(rng.sample(frames, rng.randint(1, 3))))
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(max(len(data), 1))
        kind = rng.choice(["flip", "cut", "insert", "truncate"])
        if kind == "flip" and data:
            data[at] ^= 1 << rng.randrange(8)
        elif kind == "cut":
            del data[at : at + rng.randint(1, 8)]
        elif kind == "insert":
            data[at:at] = rng.randbytes(rng.randint(1, 8))
        else:
            del data[at:]
    return bytes(data)


def test_fuzzed_frames_never_take_the_server_down(legacy: tuple[ServerProc, int]) -> None:
    server, port = legacy
    t = tube().encode()
    frames = [
        box15.encode_call(1, "queue.put", [SPACE.encode(), t, b"0", b"0", b"0", b"0", b"d"]),
        box15.encode_call(2, "queue.take", [SPACE.encode(), t, b"0"]),
        box15.encode_call(3, "queue.statistics", []),
        box15.encode_call(4, "queue.meta", [SPACE.encode(), b"0" * 32]),
        box15.encode_ping(5),
    ]
    rng = random.Random(1505)
    with Box15Client(port) as bystander:
        for _ in range(150):
            with Box15Client(port, timeout=2.0) as fuzzer:
                fuzzer.send(mutated(rng, frames))
                fuzzer.closed_by_peer(timeout=0.05)  # read what comes back, briefly
            assert bystander.ping().code == 0
        assert bystander.call("queue.statistics", SPACE).code == 0  # still served
    assert server.alive
    assert "Traceback" not in server.log()


def test_graceful_stop_answers_a_waiting_1_5_take(tmp_path_factory: pytest.TempPathFactory) -> None:
    server, port = start_legacy_server(tmp_path_factory.mktemp("stop"), "--shutdown-grace-s", "0.2")
    try:
        with Box15Client(port) as waiting:
            waiting.send(box15.encode_call(9, "queue.take", [SPACE.encode(), b"idle", b"60"]))
            assert waiting.ping().code == 0  # the take is waiting; the connection still answers
            assert server.stop() == 0
            reply = waiting.recv()
            assert (reply.sync, reply.errcode) == (9, box15.ER_PROC_LUA)
            assert reply.message == "Lua error: queuebox is shutting down"
            assert waiting.closed_by_peer()
    finally:
        server.stop()
    assert "Traceback" not in server.log()


def test_a_busy_legacy_port_is_a_clear_failure(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "queuebox", "serve", "--listen", "127.0.0.1:0",
             "--legacy-listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data")],
            cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert "cannot listen" in out and str(port) in out
    assert "Traceback" not in out


def test_restart_check_and_statistic_of_the_1_5_suites(
    client: Box15Client, modern: tarantool.Connection
) -> None:
    t = tube()
    # The 1.5-era suites ask restart_check; its timers always run here.
    assert client.call("queue.restart_check", SPACE, t).tuples == [[b"already started"]]
    assert modern.call("queue.restart_check", int(SPACE), t).data == ["already started"]
    client.call("queue.put", SPACE, t, "0", "0", "0", "0", b"x")
    spelled = modern.call("queue.statistic", int(SPACE), t).data[0]
    assert spelled == modern.call("queue.statistics", int(SPACE), t).data[0]
    counters = dict(zip(spelled[::2], spelled[1::2], strict=True))
    assert counters[f"space{SPACE}.{t}.put"] == "1"
