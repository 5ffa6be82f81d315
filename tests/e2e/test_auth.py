"""AUTH (chap-sha1), users and rights, and the default-guest rule."""

from __future__ import annotations

import subprocess
import sys

from tests.e2e.serverproc import (
    AUTH,
    CALL,
    PING,
    REPO,
    SELECT,
    RawClient,
    ServerProc,
    StartServer,
    clean_env,
    frame,
    scramble,
)


def test_auth_and_call_as_user(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        assert client.auth("tester", "secret").error is None
        assert client.call("queuebox.test.whoami").data[0] == "tester"


def test_wrong_password(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        assert client.auth("tester", "wrong").error == (
            47,
            "Incorrect password supplied for user 'tester'",
        )
        assert client.roundtrip(PING).error is None  # the socket stays open


def test_unknown_user(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        assert client.auth("nobody", "x").error == (45, "User 'nobody' is not found")


def test_failed_auth_leaves_the_previous_user(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        assert client.auth("reader", "readpw").error is None
        assert client.auth("tester", "wrong").error is not None
        assert client.call("queuebox.test.whoami").data[0] == "reader"


def test_auth_applies_before_the_next_pipelined_request(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        auth = {0x23: "reader", 0x21: ["chap-sha1", scramble(client.salt, "readpw")]}
        client.send(
            frame(CALL, 1, {0x22: "queuebox.test.whoami", 0x21: []})
            + frame(AUTH, 2, auth)
            + frame(CALL, 3, {0x22: "queuebox.test.whoami", 0x21: []})
        )
        replies = {reply.sync: reply for reply in (client.recv() for _ in range(3))}
    assert replies[1].data[0] == "guest"
    assert replies[2].error is None
    assert replies[3].data[0] == "reader"


def test_back_to_guest_with_an_empty_tuple(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        assert client.auth("tester", "secret").error is None
        assert client.roundtrip(AUTH, {0x23: "guest", 0x21: []}).error is None
        assert client.call("queuebox.test.whoami").data[0] == "guest"


def test_bad_auth_requests(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        short = {0x23: "tester", 0x21: ["chap-sha1", b"short"]}
        bad_size = (20, "Invalid MsgPack - invalid scramble size")
        assert client.roundtrip(AUTH, short).error == bad_size
        assert client.roundtrip(AUTH, {0x23: "tester"}).error == (
            69,
            "Missing mandatory field 'tuple' in request",
        )
        assert client.roundtrip(PING).error is None


def test_read_only_user_is_denied_a_write_call(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        assert client.auth("reader", "readpw").error is None
        assert client.call("queue.state").data == ["RUNNING"]
        assert client.call("queuebox.test.write").error == (
            42,
            "Execute access to function 'queuebox.test.write' is denied for user 'reader'",
        )
        assert client.call("queuebox.test.admin").error == (
            42,
            "Execute access to function 'queuebox.test.admin' is denied for user 'reader'",
        )
        assert client.auth("tester", "secret").error is None
        assert client.call("queuebox.test.write").data == ["written"]
        assert client.call("queuebox.test.admin").data == ["administered"]


def test_guest_without_rights(start_server: StartServer) -> None:
    proc = start_server("--guest-rights", "none")
    with RawClient(proc.port) as tester:
        assert tester.auth("tester", "secret").error is None
        assert tester.call("queue.create_tube", "hidden", "fifo").error is None
    with RawClient(proc.port) as client:
        assert client.roundtrip(PING).error is None
        # _vspace shows the guest the views themselves (Tarantool's public role
        # lets every user read them) and none of the queue's spaces.
        select = {0x10: 281, 0x12: 10, 0x14: 2, 0x20: []}
        rows = client.roundtrip(SELECT, select).data
        assert [row[2] for row in rows] == ["_vspace", "_vindex"]
        assert client.call("queue.state").error == (
            42,
            "Execute access to function 'queue.state' is denied for user 'guest'",
        )
        assert client.call("nosuch").error == (
            42,
            "Execute access to function 'nosuch' is denied for user 'guest'",
        )
        assert client.auth("tester", "secret").error is None
        assert client.call("queue.state").data == ["RUNNING"]


def test_env_user_can_log_in(start_server: StartServer) -> None:
    proc = start_server(env={"QUEUEBOX_USER": "envuser", "QUEUEBOX_PASSWORD": "pw"})
    with RawClient(proc.port) as client:
        assert client.auth("envuser", "pw").error is None
        assert client.call("queuebox.test.admin").data == ["administered"]


def serve_exit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "queuebox", "serve", *args],
        cwd=REPO,
        env={**clean_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


def test_open_listen_without_users_refuses_to_start() -> None:
    # Config is checked before anything binds, so nothing listens on 0.0.0.0 here.
    done = serve_exit("--listen", "0.0.0.0:0")
    assert done.returncode == 2
    assert "no user configured" in done.stderr


def test_open_listen_with_guest_rights_needs_allow_open_guest() -> None:
    env = {"QUEUEBOX_USER": "u", "QUEUEBOX_PASSWORD": "p", "QUEUEBOX_GUEST_RIGHTS": "read"}
    done = serve_exit("--listen", "0.0.0.0:0", env=env)
    assert done.returncode == 2
    assert "allow_open_guest" in done.stderr
