"""The buffer budget is a cap (docs/limits.md): what all connections buffer stays within
it, measured as the server's resident memory, and a normal request still gets through
while abusers hold unfinished frames; a frame the budget drops is answered and its
connection goes on."""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time

import msgpack

from tests.e2e.client_targets import free_port
from tests.e2e.serverproc import CALL, PING, RawClient, ServerProc, StartServer, frame
from tests.waiting import metric, wait_for

MiB = 1 << 20


class RssWatch:
    """Samples the server's RSS every 20 ms on a thread; `peak` is the highest seen."""

    def __init__(self, proc: ServerProc) -> None:
        self.proc = proc
        self.peak = proc.rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.proc.rss())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.peak


def call_frame(sync: int, name: str, data_size: int) -> bytes:
    """A CALL of `name` with one bin argument of `data_size` bytes."""
    return frame(CALL, sync, {0x22: name, 0x21: [b"x" * data_size]})


def reserved(metrics: int, nbytes: int) -> None:
    """Until the server holds `nbytes` for frames (it has read their length prefix)."""
    wait_for(
        lambda: (metric(metrics, "queuebox_buffer_bytes") or 0) >= nbytes, f"{nbytes} reserved"
    )


class Hogs:
    """Sockets that each send a frame of about 15 MiB but its last 100 bytes, as
    fast as the server takes them, and never finish it."""

    def __init__(self, port: int, count: int, data_size: int) -> None:
        self.whole = call_frame(1, "queuebox.echo", data_size)
        self.socks = [
            socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)
        ]
        for sock in self.socks:
            greeting = b""
            while len(greeting) < 128:
                greeting += sock.recv(128 - len(greeting))
            sock.setblocking(False)
        self.sent = dict.fromkeys(self.socks, 0)

    def push(self, seconds: float) -> None:
        """Send what the sockets take for `seconds` (replies are read and dropped)."""
        view = memoryview(self.whole)
        stop_at = len(self.whole) - 100
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            want = [s for s in self.socks if self.sent[s] < stop_at]
            readable, writable, _ = select.select(self.socks, want, [], 0.05)
            for sock in readable:
                with contextlib.suppress(BlockingIOError, ConnectionError):
                    sock.recv(65536)
            for sock in writable:
                with contextlib.suppress(BlockingIOError, ConnectionError):
                    self.sent[sock] += sock.send(view[self.sent[sock] : stop_at])

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


def test_200_stalled_15_mib_frames_stay_within_the_budget_and_puts_get_through(
    start_server: StartServer,
) -> None:
    # 152M: 24 MiB for unfinished frames, the rest kept to handle the request at
    # hand (8 x max_frame: decoding, copying, storing, logging and answering a
    # 16 MiB request takes about that).
    budget = 152 * MiB
    metrics = free_port()
    server = start_server("--buffer-budget", "152M", "--metrics-listen", f"127.0.0.1:{metrics}")
    with RawClient(server.port) as warm:  # the code paths a put takes, loaded before
        assert warm.call("queue.create_tube", "jobs", "fifo").error is None
        assert warm.call("queue.tube.jobs:put", b"w" * MiB).error is None
    hogs = Hogs(server.port, 200, 15 * MiB - 200)
    try:
        wait_for(lambda: metric(metrics, "queuebox_connections") == 200, "200 connections")
        before = server.rss()  # 200 connections open: only what they hold counts
        watch = RssWatch(server)
        hogs.push(2.0)  # one fills what the budget has for frames; the others wait
        replies: list[object] = []

        def put() -> None:
            with RawClient(server.port, timeout=30) as normal:
                for size in (MiB, 15 * MiB):  # a normal put, then one of the biggest
                    replies.append(normal.call("queue.tube.jobs:put", b"n" * size))

        normal = threading.Thread(target=put)
        normal.start()
        while normal.is_alive():  # the hogs keep pushing meanwhile
            hogs.push(0.2)
        normal.join()
        hogs.push(1.5)  # the waiting hogs take turns: each stalled one gives way
        peak = watch.stop()
    finally:
        hogs.close()
    assert [r.error for r in replies] == [None, None]  # type: ignore[attr-defined]
    assert [r.data[0][0] for r in replies] == [1, 2]  # type: ignore[attr-defined]
    grew = peak - before
    print(f"RSS grew by {grew / MiB:.1f} MiB (budget {budget / MiB:.0f} MiB)")
    # Before: 200 such frames grew RSS by hundreds of MB (757 MB with a 256M
    # budget), and with a 64M budget a 1 MiB put got no reply in 15 s.
    assert grew <= budget, f"RSS grew by {grew / MiB:.1f} MiB over a {budget / MiB:.0f} MiB budget"
    assert "frame dropped: buffer budget full" in server.log()
    with RawClient(server.port) as other:
        assert other.roundtrip(PING).error is None


def test_a_dropped_frame_is_answered_and_its_connection_goes_on(start_server: StartServer) -> None:
    # 76M less 8 x 8M kept for handling: 12 MiB for frames, not two of 7.
    metrics = free_port()
    server = start_server(
        "--max-frame", "8M", "--buffer-budget", "76M", "--metrics-listen", f"127.0.0.1:{metrics}"
    )
    with RawClient(server.port, timeout=20) as stalled, RawClient(server.port, timeout=20) as other:
        whole = call_frame(77, "queuebox.echo", 7 * MiB)
        stalled.send(whole[: 3 * MiB])  # then nothing
        reserved(metrics, 7 * MiB)
        # Another big frame needs the room: the stalled one gives way to it once
        # it has been coming for a second (the server's own timer).
        reply = other.call("queuebox.echo", b"y" * (7 * MiB))
        assert reply.data == [b"y" * (7 * MiB)]
        dropped = stalled.recv()
        assert dropped.sync == 77
        assert dropped.error is not None and dropped.error[0] == 2  # ER_MEMORY_ISSUE
        assert "Failed to allocate" in dropped.error[1]
        stalled.send(whole[3 * MiB :])  # the rest is read and thrown away
        assert stalled.roundtrip(PING).error is None  # and the connection goes on
        assert stalled.call("queuebox.echo", "small").data == ["small"]


def test_a_frame_is_read_into_one_buffer_of_its_size(start_server: StartServer) -> None:
    # A frame sent a byte at a time costs one buffer of its size, not a buffer
    # grown and copied per piece; and pipelined requests around it still work.
    server = start_server()
    with RawClient(server.port) as client:
        client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        big = call_frame(2, "queuebox.echo", 300_000)
        data = frame(PING, 1) + big + frame(PING, 3)
        for start in range(0, len(data), 65_536):
            client.send(data[start : start + 65_536])
            time.sleep(0.002)  # the load's shape: each piece its own read on the server
        replies = [client.recv() for _ in range(3)]
    assert [r.sync for r in replies] == [1, 2, 3]
    assert replies[1].data == [b"x" * 300_000]


def test_the_length_prefix_decides_the_reservation(start_server: StartServer) -> None:
    # A frame whose prefix promises more than it sends holds its reservation; a
    # normal client is not stuck behind it for long.
    metrics = free_port()
    server = start_server(  # 5 MiB for frames
        "--max-frame", "4M", "--buffer-budget", "37M", "--metrics-listen", f"127.0.0.1:{metrics}"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as liar:
        liar.recv(128)
        header = msgpack.packb({0: CALL, 1: 5})
        liar.sendall(b"\xce" + struct.pack(">I", 4 * MiB) + header)  # and no more
        reserved(metrics, 4 * MiB)
        with RawClient(server.port, timeout=20) as normal:
            assert normal.call("queuebox.echo", b"z" * (2 * MiB)).data == [b"z" * (2 * MiB)]
