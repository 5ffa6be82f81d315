"""The partitioning proxy in front of a real queuebox server: it tells dialers apart
by the user of their AUTH, cuts one and not another, closes or blackholes, heals."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.serverproc import PING, RawClient, ServerProc, closed_by_peer
from tests.fault.cluster import CLIENT_USER, PASSWORD, users_toml
from tests.proxy import FaultProxy, Network


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProc]:
    config = tmp_path / "queuebox.toml"
    config.write_text(users_toml())
    proc = ServerProc(tmp_path / "server", ["--config", str(config)]).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def net() -> Network:
    return Network()


@pytest.fixture
def proxy(server: ServerProc, net: Network) -> Iterator[FaultProxy]:
    proxy = FaultProxy("a", net, lambda: server.port, users={"repl_b": "b"}).start()
    try:
        yield proxy
    finally:
        proxy.stop()


def login(port: int, user: str, timeout: float = 5.0) -> RawClient:
    client = RawClient(port, timeout=timeout)
    reply = client.auth(user, PASSWORD)
    assert reply.error is None, reply.error
    return client


def test_a_cut_closes_one_dialers_connections_and_refuses_its_new_ones(
    proxy: FaultProxy, net: Network
) -> None:
    with login(proxy.port, "repl_b") as repl, login(proxy.port, CLIENT_USER) as client:
        assert repl.roundtrip(PING).error is None
        net.cut("b", "a", "refuse")
        assert repl.closed_by_peer(timeout=2)
        assert client.roundtrip(PING).error is None  # another dialer: untouched
        with RawClient(proxy.port) as again, pytest.raises(ConnectionError):
            again.auth("repl_b", PASSWORD)  # greeting through, then closed
        net.uncut("b", "a", "refuse")
        with login(proxy.port, "repl_b") as healed:
            assert healed.roundtrip(PING).error is None


def test_a_blackhole_holds_a_new_connection_silent_until_it_heals(
    proxy: FaultProxy, net: Network
) -> None:
    net.cut("client", "a", "blackhole")
    with RawClient(proxy.port, timeout=1.0) as held:
        with pytest.raises(TimeoutError):
            held.auth(CLIENT_USER, PASSWORD)
        with login(proxy.port, "repl_b") as repl:  # not cut
            assert repl.roundtrip(PING).error is None
        net.heal()
        assert held.closed_by_peer(timeout=2)
    with login(proxy.port, CLIENT_USER) as client:
        assert client.roundtrip(PING).error is None


def test_a_dead_upstream_refuses_and_an_etcd_style_proxy_knows_its_dialer(
    server: ServerProc, net: Network
) -> None:
    fixed = FaultProxy("etcd", net, lambda: server.port, src="b").start()
    gone = FaultProxy("x", net, lambda: None).start()
    try:
        with login(fixed.port, CLIENT_USER) as client:
            assert client.roundtrip(PING).error is None
            net.cut("b", "etcd", "refuse")  # whoever logs in: it is b's link
            assert client.closed_by_peer(timeout=2)
        with socket.create_connection(("127.0.0.1", gone.port), timeout=2) as dialer:
            assert closed_by_peer(dialer, timeout=2)  # nobody behind: closed at once
    finally:
        fixed.stop()
        gone.stop()
