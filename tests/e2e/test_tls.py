"""TLS on every port, client certificates as logins, refusals, and a certificate
reload under load. Real server processes, real sockets; the certificates are
made for each test by tests/e2e/certs.py into its tmp_path.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import tarantool

from queuebox.clients import aio, blocking
from queuebox.clients.errors import NetworkError, ServerError
from queuebox.clients.tls import tls_context
from tests.e2e.certs import Pki, make_pki, tarantool_tls, tls_flags
from tests.e2e.client_targets import free_port
from tests.e2e.cluster import wait_for
from tests.e2e.serverproc import REPO, USERS_TOML, ServerProc, StartServer, clean_env, unique
from tests.e2e.webclient import http_port

ER_ACCESS_DENIED = 42

# Users with passwords, the guest with nothing on the main port (so a login by
# certificate shows), and legacy tubes for the 1.5 port, whose clients are guest.
TLS_TOML = (
    USERS_TOML.replace('guest_rights = "all"', "")
    + """
[users.guest]
write = ["space0.*"]
read = ["space0.*"]
"""
)


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path)


def peer_certificate(port: int, ca: Path, host: str = "127.0.0.1") -> dict[str, object]:
    """The certificate the port presents, checked against `ca` and `host`."""
    context = ssl.create_default_context(cafile=str(ca))
    raw = socket.create_connection((host, port), timeout=10)
    with context.wrap_socket(raw, server_hostname=host) as sock:
        cert = sock.getpeercert()
        assert cert is not None
        return cert


def common_name(cert: dict[str, object]) -> str:
    return next(v for rdn in cert["subject"] for k, v in rdn if k == "commonName")  # type: ignore[attr-defined]


def test_every_port_presents_the_server_certificate(start_server: StartServer, pki: Pki) -> None:
    legacy_port = free_port()
    server = start_server(
        *tls_flags(pki),
        "--http-listen", "127.0.0.1:0", "--legacy-listen", f"127.0.0.1:{legacy_port}",
        toml=TLS_TOML,
    )  # fmt: skip
    # IPROTO: a stock connector, and the bundled clients, check the certificate.
    conn = tarantool_tls(server.port, pki, user="tester", password="secret")
    tube = unique("tls")
    try:
        conn.call("queue.create_tube", [tube, "fifo"])
        assert conn.call(f"queue.tube.{tube}:put", ["over tls"]).data[0][2] == "over tls"
    finally:
        conn.close()
    context = tls_context(str(pki.ca.cert))
    with blocking.connect("127.0.0.1", server.port, "tester", "secret", tls=context) as b:
        assert b.tube(tube).take(0).data == "over tls"

    async def aio_put() -> object:
        async with aio.connect("127.0.0.1", server.port, "tester", "secret", tls=context) as a:
            return (await a.tube(tube).put("async")).data

    assert asyncio.run(aio_put()) == "async"
    # HTTP: the console, /metrics and /healthz over HTTPS.
    web = http_port(server)
    assert common_name(peer_certificate(web, pki.ca.cert, "localhost")) == "server"
    https = ssl.create_default_context(cafile=str(pki.ca.cert))
    with urllib.request.urlopen(f"https://127.0.0.1:{web}/healthz", context=https) as reply:
        assert reply.read().strip() == b"RUNNING"
    # The console's login cookies are sent back over TLS only.
    console = http.client.HTTPSConnection("127.0.0.1", web, context=https, timeout=10)
    form = "user=tester&password=secret"
    console.request("POST", "/login", form, {"Content-Type": "application/x-www-form-urlencoded"})
    answer = console.getresponse()
    cookies = answer.headers.get_all("Set-Cookie") or []
    console.close()
    assert answer.status == 303 and len(cookies) == 2
    assert all("Secure" in cookie for cookie in cookies), cookies
    # The 1.5 port: a TLS socket carrying the 1.5 wire (a PING comes back as is).
    assert common_name(peer_certificate(legacy_port, pki.ca.cert)) == "server"
    raw = socket.create_connection(("127.0.0.1", legacy_port), timeout=10)
    with https.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        ping = struct.pack("<III", 0xFF00, 0, 41)
        sock.sendall(ping)
        assert sock.recv(100) == ping
    # Plain TCP on a TLS port gets no greeting: the server waits for a ClientHello.
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as plain:
        plain.sendall(b"\xce\x00\x00\x00\x05" + b"\x82\x00\x40\x01\x01")
        plain.settimeout(10)
        data = b""
        try:
            while chunk := plain.recv(4096):
                data += chunk
        except ConnectionResetError:
            pass
        assert b"Tarantool" not in data


def test_the_legacy_port_can_stay_plain(start_server: StartServer, pki: Pki) -> None:
    legacy_port = free_port()
    server = start_server(
        *tls_flags(pki), "--legacy-listen", f"127.0.0.1:{legacy_port}", "--legacy-tls", "false",
        toml=TLS_TOML,
    )  # fmt: skip
    with socket.create_connection(("127.0.0.1", legacy_port), timeout=10) as sock:
        ping = struct.pack("<III", 0xFF00, 0, 7)
        sock.sendall(ping)
        assert sock.recv(100) == ping
    assert server.alive


def test_a_client_certificate_logs_in_as_its_user_and_keeps_its_rights(
    start_server: StartServer, pki: Pki
) -> None:
    # asyncio's own TLS here; the other tests run on uvloop's (the default).
    server = start_server(*tls_flags(pki), "--loop", "asyncio", toml=TLS_TOML)
    tube = unique("certs")
    tester = tarantool_tls(server.port, pki, pki.tester)
    reader = tarantool_tls(server.port, pki, pki.reader)
    stranger = tarantool_tls(server.port, pki, pki.stranger)
    try:
        assert tester.call("queuebox.test.whoami").data[0] == "tester"
        tester.call("queue.create_tube", [tube, "fifo"])
        tester.call(f"queue.tube.{tube}:put", ["one"])
        assert reader.call("queuebox.test.whoami").data[0] == "reader"
        assert reader.call(f"queue.tube.{tube}:peek", [0]).data[0][2] == "one"
        with pytest.raises(tarantool.DatabaseError) as refused:
            reader.call(f"queue.tube.{tube}:put", ["two"])
        assert refused.value.args[0] == ER_ACCESS_DENIED
        # A CN that names no user is the guest, who may not touch this tube.
        assert stranger.call("queuebox.test.whoami").data[0] == "guest"
        with pytest.raises(tarantool.DatabaseError) as refused:
            stranger.call(f"queue.tube.{tube}:peek", [0])
        assert refused.value.args[0] == ER_ACCESS_DENIED
    finally:
        for conn in (tester, reader, stranger):
            conn.close()
    assert "client certificate names no user" in server.log()
    # The bundled client: a certificate and no user name.
    context = tls_context(str(pki.ca.cert), str(pki.reader.cert), str(pki.reader.key))
    with blocking.connect("127.0.0.1", server.port, tls=context) as conn:
        assert conn.call("queuebox.test.whoami")[0] == "reader"
        with pytest.raises(ServerError):
            conn.tube(tube).put("refused")


def refused(port: int, context: ssl.SSLContext) -> str:
    """What the bundled client says when the TLS connection cannot be made."""
    with (
        pytest.raises(NetworkError) as failed,
        blocking.connect("127.0.0.1", port, tls=context, reconnect=False) as conn,
    ):
        conn.ping()
    return str(failed.value)


def test_wrong_and_expired_certificates_are_refused(
    start_server: StartServer, pki: Pki, tmp_path: Path
) -> None:
    server = start_server(*tls_flags(pki, "--tls-client-auth", "required"), toml=TLS_TOML)
    ca = str(pki.ca.cert)
    good = tls_context(ca, str(pki.tester.cert), str(pki.tester.key))
    with blocking.connect("127.0.0.1", server.port, tls=good) as conn:
        assert conn.call("queuebox.test.whoami")[0] == "tester"
    # A client certificate of another CA, or an expired one, or none at all (required).
    forged = pki.forged_tester
    for cert in (forged, pki.expired_tester):
        refused(server.port, tls_context(ca, str(cert.cert), str(cert.key)))
    refused(server.port, tls_context(ca))
    # The client refuses a server it cannot check: the other CA, or a wrong name.
    other_ca = str(pki.other_ca.cert)
    assert "CERTIFICATE_VERIFY_FAILED" in refused(server.port, tls_context(other_ca))
    # An expired server certificate is refused by the client.
    expired = pki.ca.issue("server", server=True, days=-1, tag="-expired")
    old = start_server(
        "--tls-cert", str(expired.cert), "--tls-key", str(expired.key), toml=TLS_TOML
    )
    assert "expired" in refused(old.port, tls_context(ca))
    assert server.alive and old.alive


def test_bad_tls_files_stop_the_start(pki: Pki, tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    for flags, said in (
        (["--tls-cert", str(pki.server.cert)], "tls_cert and tls_key go together"),
        (["--tls-cert", str(missing), "--tls-key", str(pki.server.key)], "missing.pem"),
        (["--tls-cert", str(pki.server.cert), "--tls-key", str(pki.tester.key)], "tls_key"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "queuebox", "serve", "--listen", "127.0.0.1:0",
             "--data-dir", str(tmp_path / "data"), *flags],
            cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert said in done.stderr


def test_the_cli_takes_the_tls_options(start_server: StartServer, pki: Pki) -> None:
    server = start_server(*tls_flags(pki), toml=TLS_TOML)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "queuebox", *args, "--port", str(server.port), "--json"],
            cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    done = cli("status", "--tls-ca", str(pki.ca.cert), "--tls-cert", str(pki.tester.cert),
               "--tls-key", str(pki.tester.key))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["instances"][0]["status"]["role"] == "primary"
    assert cli("status", "--tls-ca", str(pki.other_ca.cert)).returncode != 0
    bad = cli("status", "--tls-ca", str(pki.server.key))
    assert bad.returncode == 2 and "--tls-ca" in bad.stderr


def test_a_certificate_reload_under_load_drops_no_connection(
    start_server: StartServer, pki: Pki
) -> None:
    live = pki.ca.directory / "live"
    live.mkdir()
    cert, key = live / "server.crt", live / "server.key"
    cert.write_bytes(pki.server.cert.read_bytes())
    key.write_bytes(pki.server.key.read_bytes())
    server = start_server(
        "--tls-cert", str(cert), "--tls-key", str(key), "--tls-ca", str(pki.ca.cert),
        toml=TLS_TOML,
    )  # fmt: skip
    before = peer_certificate(server.port, pki.ca.cert)["serialNumber"]
    tube = unique("reload")
    context = tls_context(str(pki.ca.cert))
    with blocking.connect("127.0.0.1", server.port, "tester", "secret", tls=context) as admin:
        admin.create_tube(tube, "fifo")
    stop = threading.Event()
    counts: list[int] = []
    errors: list[BaseException] = []

    def put_load(worker: int) -> None:
        done = 0
        try:
            with blocking.connect(
                "127.0.0.1", server.port, "tester", "secret", tls=context, reconnect=False
            ) as conn:
                deadline = time.monotonic() + 60  # bounded, whatever happens
                while not stop.is_set() and done < 200_000 and time.monotonic() < deadline:
                    conn.tube(tube).put([worker, done])
                    done += 1
                # reconnect=False: a dropped connection raises; none was reopened either.
                assert conn.reconnects == 0 and conn.sockets == 1
        except BaseException as exc:  # noqa: BLE001  # reported by the test below
            errors.append(exc)
        counts.append(done)

    threads = [threading.Thread(target=put_load, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(server.log().split("connection opened")) > 4, what="load running")
        # A broken pair is refused and the old certificate stays.
        key.write_bytes(pki.tester.key.read_bytes())
        assert server.proc is not None
        server.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "TLS reload failed" in server.log(), what="the refused reload")
        assert peer_certificate(server.port, pki.ca.cert)["serialNumber"] == before
        renewed = pki.ca.issue("server", server=True, tag="-renewed")
        cert.write_bytes(renewed.cert.read_bytes())
        key.write_bytes(renewed.key.read_bytes())
        server.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "TLS certificate reloaded" in server.log(), what="the reload")
        after = peer_certificate(server.port, pki.ca.cert)["serialNumber"]
        assert after != before
        # The load goes on over the connections opened before the reload.
        progress = server_tasks(server, context, tube)
        wait_for(lambda: server_tasks(server, context, tube) > progress + 500, what="puts")
    finally:
        stop.set()
        for thread in threads:
            thread.join(90)
    assert not errors, errors
    assert len(counts) == 4 and min(counts) > 0
    assert server_tasks(server, context, tube) == sum(counts)
    print(f"puts during the reloads: {sum(counts)} over 4 connections, none dropped")


def server_tasks(server: ServerProc, context: ssl.SSLContext, tube: str) -> int:
    with blocking.connect("127.0.0.1", server.port, "tester", "secret", tls=context) as conn:
        return int(conn.tube(tube).statistics()["tasks"]["total"])


def test_sighup_without_tls_leaves_the_server_serving(start_server: StartServer) -> None:
    server = start_server()
    assert server.proc is not None
    server.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "SIGHUP: no TLS certificate to reload" in server.log(), what="the line")
    with blocking.connect("127.0.0.1", server.port) as conn:
        conn.ping()
    assert server.alive
