"""The sequential latency's clock (clients/bench/latency.py): it stops at the
reply's last byte, however the reply arrives, and the reply is decoded whole."""

from __future__ import annotations

import socket
import threading

import pytest

from queuebox import protocol
from queuebox.clients.bench.conn import BenchError
from queuebox.clients.bench.latency import _Blocking

REPLY = protocol.encode_data(7, 82, [[1, "r", "x" * 64]])


def blocking_over(sock: socket.socket) -> _Blocking:
    """A `_Blocking` over one end of a socket pair (no greeting, no login)."""
    conn = _Blocking.__new__(_Blocking)
    conn.sock = sock
    conn._decoder = protocol.ResponseDecoder()
    conn._sync = 0
    return conn


def peer_answers(peer: socket.socket, rest: bytes) -> threading.Thread:
    """The peer reads the request, then sends `rest` (what is left of the reply)."""

    def run() -> None:
        peer.recv(65536)
        peer.sendall(rest)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("early", [0, 3, 5, len(REPLY) - 1])
def test_exchange_waits_for_the_whole_reply_frame(early: int) -> None:
    ours, peer = socket.socketpair()
    with ours, peer:
        # The reply's first `early` bytes are there before the request is sent,
        # the rest only once the peer has read the request.
        peer.sendall(REPLY[:early])
        thread = peer_answers(peer, REPLY[early:])
        try:
            reply, spent = blocking_over(ours).exchange(protocol.encode_call(7, "f", []))
        finally:
            thread.join()
    assert reply.ok and reply.sync == 7
    assert reply.data == [[1, "r", "x" * 64]]
    assert spent > 0


def test_exchange_raises_when_the_peer_closes_mid_reply() -> None:
    ours, peer = socket.socketpair()
    with ours, peer:
        # Four bytes of a reply, then the peer sends no more (it still reads).
        peer.sendall(REPLY[:4])
        peer.shutdown(socket.SHUT_WR)
        with pytest.raises(BenchError, match="connection closed"):
            blocking_over(ours).exchange(protocol.encode_call(1, "f", []))
