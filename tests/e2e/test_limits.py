"""Bad input, limits, back-pressure and shutdown: never a crash, never a hit on other clients."""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Iterator

import msgpack
import pytest

from tests.e2e.client_targets import free_port
from tests.e2e.serverproc import CALL, PING, USERS_TOML, RawClient, ServerProc, StartServer, frame
from tests.waiting import metric, wait_for


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    """The module's server, with /metrics (`server.metrics_port`): a test waits
    there for the bytes the server holds."""
    workdir = tmp_path_factory.mktemp("limits")
    (workdir / "queuebox.toml").write_text(USERS_TOML)
    port = free_port()
    args = ["--config", str(workdir / "queuebox.toml"), "--metrics-listen", f"127.0.0.1:{port}"]
    proc = ServerProc(workdir, args).start()
    proc.metrics_port = port  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        proc.stop()


def held_bytes(proc: ServerProc) -> float:
    return metric(proc.metrics_port, "queuebox_buffer_bytes") or 0.0  # type: ignore[attr-defined]


def assert_serves(proc: ServerProc) -> None:
    """Another client still gets answers."""
    with RawClient(proc.port) as other:
        assert other.call("queuebox.echo", "ok").data == ["ok"]


def test_oversized_length_is_refused_then_closed(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        client.send(b"\xce\x7f\xff\xff\xff" + b"x" * 100)
        reply = client.recv()
        assert (reply.sync, reply.error) == (
            0,
            (20, "Invalid MsgPack - too big packet size in the header: 2147483647"),
        )
        assert client.closed_by_peer()
    assert_serves(server)


def test_configured_max_frame(start_server: StartServer) -> None:
    proc = start_server("--max-frame", "1k")
    with RawClient(proc.port) as client:
        assert client.call("queuebox.echo", "x" * 900).data == ["x" * 900]
        client.send(frame(CALL, 7, {0x22: "queuebox.echo", 0x21: ["x" * 2000]}))
        reply = client.recv()
        assert reply.error is not None and reply.error[0] == 20
        assert "too big packet size" in reply.error[1]
        assert client.closed_by_peer()
    assert_serves(proc)


def test_garbage_length_prefix_is_refused_then_closed(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        client.send(b"\xc1\xff\x00garbage")
        assert client.recv().error == (20, "Invalid MsgPack - packet length")
        assert client.closed_by_peer()
    assert_serves(server)


def test_garbage_inside_a_frame_keeps_the_connection(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        client.send(b"\x05\xc1\xc1\xc1\xc1\xc1")  # a well-framed payload of junk
        assert client.recv().error == (20, "Invalid MsgPack - packet header")
        client.send(b"\x03\x93\x01\x02")  # header is an array, not a map
        assert client.recv().error == (20, "Invalid MsgPack - packet header")
        bad_body = msgpack.packb({0: CALL, 1: 9}) + msgpack.packb([1, 2])
        client.send(bytes([len(bad_body)]) + bad_body)
        reply = client.recv()
        assert (reply.sync, reply.error) == (9, (20, "Invalid MsgPack - packet body"))
        wrong_type = {0x22: 42, 0x21: []}  # function name must be a string
        assert client.roundtrip(CALL, wrong_type).error == (20, "Invalid MsgPack - packet body")
        assert client.roundtrip(PING).error is None


def test_frame_split_into_single_bytes(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = frame(CALL, 5, {0x22: "queuebox.echo", 0x21: ["one", "byte"]}) + frame(PING, 6)
        for byte in data:
            client.send(bytes([byte]))
            time.sleep(0.001)  # the load's shape: each byte its own segment
        first, second = client.recv(), client.recv()
    assert (first.sync, first.data) == (5, ["one", "byte"])
    assert (second.sync, second.error) == (6, None)


def test_truncated_frame_then_the_rest(server: ServerProc) -> None:
    data = frame(CALL, 3, {0x22: "queuebox.echo", 0x21: ["whole"]})
    with RawClient(server.port) as client:
        client.send(data[:7])
        # Its length prefix was read: the server holds room for the frame.
        wait_for(lambda: held_bytes(server) > 0, "the frame's room reserved")
        assert_serves(server)
        client.send(data[7:])
        assert client.recv().data == ["whole"]


def test_client_leaving_mid_frame(server: ServerProc) -> None:
    client = RawClient(server.port)
    client.send(frame(CALL, 3, {0x22: "queuebox.echo", 0x21: ["x" * 500]})[:100])
    client.close()
    assert_serves(server)
    assert server.alive


def test_client_that_never_reads_is_paused(start_server: StartServer) -> None:
    proc = start_server("--write-high-water", "64k")
    one = frame(CALL, 0, {0x22: "queuebox.echo", 0x21: ["y" * 1000]})
    burst = one * 64
    limit = 512 * 1024 * 1024
    rss_before = proc.rss()
    with RawClient(proc.port) as client:
        client.sock.setblocking(False)
        sent = offset = 0
        last_progress = time.monotonic()
        while time.monotonic() - last_progress < 1.0 and sent < limit:
            try:
                n = client.sock.send(burst[offset:])
            except BlockingIOError:
                time.sleep(0.01)
                continue
            sent += n
            offset = (offset + n) % len(burst)
            last_progress = time.monotonic()
        # The server stopped reading long before the limit: it is not buffering it all.
        assert sent < 64 * 1024 * 1024, sent
        assert_serves(proc)
        assert proc.rss() - rss_before < 128 * 1024 * 1024
        # Nothing was lost: every complete request gets its reply once we read.
        client.sock.setblocking(True)
        client.sock.settimeout(10)
        replies = sent // len(one)
        for _ in range(replies):
            assert client.recv().data == ["y" * 1000]


def test_max_connections(start_server: StartServer) -> None:
    proc = start_server("--max-connections", "2")
    first, second = RawClient(proc.port), RawClient(proc.port)
    try:
        third = RawClient(proc.port, greet=False)
        assert third.closed_by_peer()  # refused: closed at once, no greeting
        third.close()
        assert second.call("queue.state").data == ["RUNNING"]
        first.close()

        def served() -> bool:  # the server notices the close asynchronously
            try:
                with RawClient(proc.port) as fourth:
                    return bool(fourth.call("queue.state").data == ["RUNNING"])
            except ConnectionError:
                return False

        wait_for(served, "a place freed by the close", timeout=5)
    finally:
        first.close()
        second.close()
    assert "max_connections reached" in proc.log()


def in_flight(client: RawClient) -> None:
    """The call just sent is running: a PING sent after it is answered first (a
    connection's requests are read in order, and a waiting call holds up none)."""
    ping = client.request(PING)
    assert client.recv().sync == ping


def test_sigterm_lets_requests_in_flight_answer(start_server: StartServer) -> None:
    proc = start_server()
    with RawClient(proc.port) as client:
        client.request(CALL, {0x22: "queuebox.sleep", 0x21: [0.5, "finished"]})
        in_flight(client)
        assert proc.proc is not None
        proc.proc.send_signal(signal.SIGTERM)
        assert client.recv().data == ["finished"]
        assert client.closed_by_peer()
    assert proc.proc.wait(10) == 0
    assert "stopped" in proc.log()


def test_sigterm_cancels_what_waits_past_the_grace(start_server: StartServer) -> None:
    proc = start_server("--shutdown-grace-s", "0.3")
    with RawClient(proc.port) as client:
        client.request(CALL, {0x22: "queuebox.sleep", 0x21: [60]})
        in_flight(client)
        assert proc.proc is not None
        started = time.monotonic()
        proc.proc.send_signal(signal.SIGINT)
        assert client.recv().error == (32, "queuebox is shutting down")
    assert proc.proc.wait(10) == 0
    assert time.monotonic() - started < 5
