"""A few hostile sockets cost nothing: handshake and idle timeouts, connection slots
per address and given back by idle connections, one buffer budget, failed AUTHs closed
and their log lines limited (docs/limits.md)."""

from __future__ import annotations

import re
import socket
import struct
import time

from tests.e2e.serverproc import (
    AUTH,
    CALL,
    PING,
    RawClient,
    ServerProc,
    StartServer,
    closed_by_peer,
    frame,
)
from tests.waiting import wait_for


def assert_serves(proc: ServerProc) -> None:
    with RawClient(proc.port) as other:
        assert other.call("queuebox.echo", "ok").data == ["ok"]


def test_a_silent_connection_is_closed_after_the_handshake_timeout(
    start_server: StartServer,
) -> None:
    proc = start_server("--handshake-timeout-s", "0.5")
    # The talker connects first: once the silent one is closed, the talker's
    # handshake timeout has passed as well.
    with RawClient(proc.port) as talker, RawClient(proc.port) as silent:
        assert talker.roundtrip(PING).error is None  # spoke in time: stays
        assert silent.closed_by_peer(timeout=5)
        assert talker.roundtrip(PING).error is None
    assert "reason=handshake" in proc.log()


def test_silent_sockets_do_not_lock_out_real_clients(start_server: StartServer) -> None:
    proc = start_server("--max-connections", "8", "--handshake-timeout-s", "0.5")
    silent = [RawClient(proc.port) for _ in range(8)]  # all the places, saying nothing
    try:
        for sock in silent:
            assert sock.closed_by_peer(timeout=5)
        assert_serves(proc)
    finally:
        for sock in silent:
            sock.close()


def test_an_idle_connection_is_closed_but_a_waiting_take_is_not(
    start_server: StartServer,
) -> None:
    proc = start_server("--idle-timeout-s", "0.5")
    with RawClient(proc.port) as idle, RawClient(proc.port) as waiting:
        assert idle.roundtrip(PING).error is None
        assert waiting.call("queue.create_tube", "jobs", "fifo").error is None
        sync = waiting.request(CALL, {0x22: "queue.tube.jobs:take", 0x21: [1.5]})
        assert idle.closed_by_peer(timeout=5)
        reply = waiting.recv()  # the take ran out after 1.5 s, 3 idle timeouts
        assert (reply.sync, reply.data) == (sync, [])
        # Idle counts from the answer, not from the take's start: the
        # connection stays open after it (it was closed at the watchdog's
        # next look, within 50 ms), and serves the next request.
        assert not waiting.closed_by_peer(timeout=0.2)
        assert waiting.roundtrip(PING).error is None
    assert "reason=idle" in proc.log()


def test_without_an_idle_timeout_a_quiet_connection_stays(start_server: StartServer) -> None:
    proc = start_server("--handshake-timeout-s", "0.3")
    with RawClient(proc.port) as quiet:
        assert quiet.roundtrip(PING).error is None
        assert not quiet.closed_by_peer(timeout=1.0)
        assert quiet.roundtrip(PING).error is None


def connect_from(address: str, port: int) -> socket.socket:
    """A client socket bound to `address` (any of 127.0.0.0/8 reaches loopback)."""
    sock = socket.socket()
    sock.settimeout(10)
    sock.bind((address, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def pinged(sock: socket.socket) -> bool:
    """Greeted and answered a PING: served. False if the server closed it."""
    try:
        greeting = _recv_exact(sock, 128)
        sock.sendall(frame(PING, 1))
        (length,) = struct.unpack(">I", _recv_exact(sock, 5)[1:])
        _recv_exact(sock, length)
    except (AssertionError, ConnectionError):
        return False
    return len(greeting) == 128


def test_sockets_from_one_address_cannot_keep_another_out(start_server: StartServer) -> None:
    # Every slot but none for others: 1010 sockets from one address, each a PING.
    proc = start_server("--max-connections", "1010")  # default: 1000 per address
    crowd: list[socket.socket] = []
    try:
        for _ in range(1010):
            crowd.append(connect_from("127.0.0.1", proc.port))
        served = sum(pinged(sock) for sock in crowd)
        assert served == 1000  # the last 10 were refused: their address has its share
        other = connect_from("127.0.0.2", proc.port)
        crowd.append(other)
        assert pinged(other)  # another address still gets in
    finally:
        for sock in crowd:
            sock.close()
    assert "max_connections_per_address reached" in proc.log()


def test_idle_connections_give_their_slots_back_when_all_are_taken(
    start_server: StartServer,
) -> None:
    proc = start_server("--max-connections", "6", "--idle-reclaim-s", "0.5")
    waiting = RawClient(proc.port)
    idle = [RawClient(proc.port) for _ in range(5)]  # every slot taken
    try:
        assert waiting.call("queue.create_tube", "slots", "fifo").error is None
        sync = waiting.request(CALL, {0x22: "queue.tube.slots:take", 0x21: [3]})
        for client in idle:
            assert client.roundtrip(PING).error is None
        # Being idle for idle_reclaim_s on the server's clock is what makes a
        # connection reclaimable; nothing shows it before a newcomer asks.
        time.sleep(0.6)
        for _ in range(3):  # each newcomer takes the place of the one idle longest
            newcomer = RawClient(proc.port)
            idle.append(newcomer)  # and stays
            assert newcomer.roundtrip(PING).error is None
        assert [client.closed_by_peer(timeout=1) for client in idle[:5]] == [True] * 3 + [False] * 2
        reply = waiting.recv()  # busy with a take: never given away
        assert (reply.sync, reply.data) == (sync, [])
    finally:
        waiting.close()
        for client in idle:
            client.close()
    assert proc.log().count("connection closed to make room") == 3


def partial_call(size: int) -> tuple[bytes, bytes]:
    """A CALL frame of about `size` bytes, split before its last 100 bytes."""
    whole = frame(CALL, 1, {0x22: "queuebox.echo", 0x21: ["x" * size]})
    return whole[:-100], whole[-100:]


def test_stalled_frames_are_held_to_the_buffer_budget(start_server: StartServer) -> None:
    # The hogs never finish a request, so the handshake timeout ends them and
    # gives their memory back; the last one spoke first (a PING), so it stays.
    # 2 MiB for frames: 10M, less the room kept to handle a max_frame request.
    proc = start_server("--max-frame", "1M", "--buffer-budget", "10M", "--handshake-timeout-s", "3")
    hogs = [socket.create_connection(("127.0.0.1", proc.port), timeout=20) for _ in range(6)]
    try:
        last = hogs[0]
        last.recv(128)
        last.sendall(frame(PING, 9))
        (length,) = struct.unpack(">I", _recv_exact(last, 5)[1:])
        _recv_exact(last, length)  # the PING's answer
        head, tail = partial_call(900 * 1024)
        for hog in hogs:
            if hog is not last:
                hog.recv(128)  # the greeting
            hog.sendall(head)  # 6 x 900 KiB against a 2 MiB budget
        wait_for(lambda: "buffer budget full" in proc.log(), "the budget full")
        assert_serves(proc)  # small requests still flow
        last.sendall(tail)  # read once the others are gone (handshake timeout)
        (length,) = struct.unpack(">I", _recv_exact(last, 5)[1:])
        assert len(_recv_exact(last, length)) > 900 * 1024  # the echo came back whole
        for hog in hogs[1:]:  # the silent ones are closed by the server
            assert closed_by_peer(hog, timeout=20)
    finally:
        for hog in hogs:
            hog.close()
    assert proc.log().count("reason=handshake") == 5
    assert_serves(proc)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "closed early"
        data += chunk
    return bytes(data)


def test_wrong_passwords_close_the_connection_after_auth_attempts(
    start_server: StartServer,
) -> None:
    proc = start_server("--auth-attempts", "3")
    with RawClient(proc.port) as guesser:
        for _ in range(3):
            assert guesser.auth("tester", "wrong").error is not None
        assert guesser.closed_by_peer(timeout=5)
    with RawClient(proc.port) as honest:  # others are not affected
        assert honest.auth("tester", "wrong").error is not None
        assert honest.auth("tester", "secret").error is None
        assert honest.call("queuebox.echo", 1).data == [1]


def test_a_flood_of_failed_auths_logs_a_few_lines(start_server: StartServer) -> None:
    proc = start_server("--auth-delay-s", "0")  # the log's own limit, without the guard's
    started = time.monotonic()
    guesses = 0
    for _ in range(40):
        with RawClient(proc.port) as guesser:
            for _ in range(5):
                guesser.send(frame(AUTH, 1, {0x23: "tester", 0x21: ["chap-sha1", b"\0" * 20]}))
                guesses += 1
            assert guesser.closed_by_peer(timeout=5)
    seconds = time.monotonic() - started
    lines = proc.log().count("auth failed")
    # At most 10 lines a second get through, whatever the number of guesses.
    assert 1 <= lines <= 10 * (int(seconds) + 2) < guesses

    def reported() -> tuple[int, int]:
        said = [line for line in proc.log().splitlines() if "auth failed" in line]
        counted = sum(int(n) for n in re.findall(r"suppressed=(\d+)", "\n".join(said)))
        return len(said), counted

    # What was held back is reported once a line may go out again (the server's timer):
    # every failure, a line or counted.
    wait_for(lambda: sum(reported()) == guesses, "every failed auth reported")
    assert reported()[1] > 0
