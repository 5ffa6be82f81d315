"""Real connectors connect with a password, ping and call: tarantool-python, asynctnt, net.box."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import asynctnt
import pytest
import tarantool

from tests.e2e.serverproc import CALL, REPO, RawClient, ServerProc, StartServer, clean_env, frame

NO_SUCH_PROC = "Procedure 'queue.tube.q9:put' is not defined"


def test_startup_line_names_the_bound_port(server: ServerProc) -> None:
    assert re.search(rf"listening .*address=127\.0\.0\.1:{server.port}\b", server.log())


def test_greeting_is_tarantool_2_6(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        greeting = client.greeting
    assert len(greeting) == 128 and greeting[63:64] == b"\n" and greeting[127:128] == b"\n"
    assert re.fullmatch(rb"Tarantool 2\.6\.0 \(Binary\) [0-9a-f-]{36} *", greeting[:63])
    assert len(client.salt) == 32


# --- tarantool-python 1.3.0 ---


def test_tarantool_python_call(server: ServerProc) -> None:
    conn = tarantool.connect("127.0.0.1", server.port, user="tester", password="secret")
    try:
        assert conn.ping(notime=True) == "Success"
        assert conn.call("queue.state").data == ["RUNNING"]
        assert conn.call("queuebox.echo", [1, "two", [3]]).data == [1, "two", [3]]
        with pytest.raises(tarantool.DatabaseError) as info:
            conn.call("queue.tube.q9:put", "x")
        assert info.value.args[:2] == (33, NO_SUCH_PROC)
        assert conn.eval("return queue.state()").data == ["RUNNING"]
    finally:
        conn.close()


def test_tarantool_python_call_16(server: ServerProc) -> None:
    conn = tarantool.Connection(
        "127.0.0.1", server.port, user="tester", password="secret", call_16=True
    )
    try:
        assert conn.call("queue.state").data == [["RUNNING"]]
        assert conn.call("queuebox.echo", [1, "two", [3]]).data == [[1], ["two"], [3]]
        assert conn.call("queuebox.echo", [[0, "r", "x"]]).data == [[0, "r", "x"]]
    finally:
        conn.close()


def test_tarantool_python_wrong_password_fails_the_connect(server: ServerProc) -> None:
    with pytest.raises(tarantool.error.NetworkError) as info:
        tarantool.connect("127.0.0.1", server.port, user="tester", password="wrong")
    assert "Incorrect password supplied for user 'tester'" in str(info.value)


# --- asynctnt 2.4.0 ---


async def test_asynctnt_call(server: ServerProc) -> None:
    conn = asynctnt.Connection(
        host="127.0.0.1", port=server.port, username="tester", password="secret"
    )
    await conn.connect()
    try:
        await conn.ping()
        assert (await conn.call("queue.state")).body == ["RUNNING"]
        assert (await conn.call("queuebox.echo", [{"a": 1}])).body == [{"a": 1}]
        with pytest.raises(asynctnt.exceptions.TarantoolDatabaseError) as info:
            await conn.call("queue.tube.q9:put", ["x"])
        assert info.value.code == 33
        assert info.value.message == NO_SUCH_PROC
        assert (await conn.call16("queue.state")).body == [["RUNNING"]]
        assert (await conn.eval("return queue.state()")).body == ["RUNNING"]
    finally:
        await conn.disconnect()


async def test_asynctnt_wrong_password(server: ServerProc) -> None:
    conn = asynctnt.Connection(
        host="127.0.0.1", port=server.port, username="tester", password="nope",
        reconnect_timeout=0,
    )  # fmt: skip
    with pytest.raises(asynctnt.exceptions.TarantoolDatabaseError) as info:
        await conn.connect()
    assert info.value.code == 47
    await conn.disconnect()


# --- Tarantool's own net.box, with the tarantool binary as the client process ---

NETBOX_SCRIPT = r"""
local json = require('json')
local netbox = require('net.box')
local uri = arg[1]
local conn = netbox.connect(uri, {wait_connected = 10})
local out = {connected = conn:is_connected(), error = conn.error}
if out.connected then
    out.ping = conn:ping()
    out.state = conn:call('queue.state')
    out.echo = {conn:call('queuebox.echo', {1, 'two', {3}})}
    local ok, err = pcall(conn.call, conn, 'queue.tube.q9:put', {'x'})
    out.nosuch = {ok = ok, code = (not ok) and err.code or nil, message = tostring(err)}
    out.eval = conn:eval('return queue.state()')
    out.sleep = conn:call('queuebox.sleep', {0.05, 'late'})
    conn:close()
end
print(json.encode(out))
os.exit(0)
"""


def run_netbox(tmp_path: Path, uri: str) -> dict[str, object]:
    tarantool_bin = shutil.which("tarantool")
    if tarantool_bin is None:
        pytest.skip("the tarantool binary is not installed (tests/run.sh installs it)")
    script = tmp_path / "netbox_client.lua"
    script.write_text(NETBOX_SCRIPT)
    done = subprocess.run(
        [tarantool_bin, str(script), uri], capture_output=True, text=True, timeout=60,
        cwd=tmp_path, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_netbox_call(server: ServerProc, tmp_path: Path) -> None:
    out = run_netbox(tmp_path, f"tester:secret@127.0.0.1:{server.port}")
    assert out["connected"] is True, out
    assert out["ping"] is True
    assert out["state"] == "RUNNING"
    assert out["echo"] == [1, "two", [3]]
    assert out["nosuch"] == {"ok": False, "code": 33, "message": NO_SUCH_PROC}
    assert out["eval"] == "RUNNING"
    assert out["sleep"] == "late"


def test_netbox_wrong_password(server: ServerProc, tmp_path: Path) -> None:
    out = run_netbox(tmp_path, f"tester:bad@127.0.0.1:{server.port}")
    assert out["connected"] is False
    assert "Incorrect password supplied for user 'tester'" in str(out["error"])


def test_asyncio_loop_and_json_logs(start_server: StartServer) -> None:
    proc = start_server("--loop", "asyncio", "--log-format", "json")
    with RawClient(proc.port) as client:
        client.send(
            frame(CALL, 1, {0x22: "queuebox.sleep", 0x21: [0.2, "slow"]})
            + frame(CALL, 2, {0x22: "queuebox.echo", 0x21: ["fast"]})
        )
        assert [client.recv().sync, client.recv().sync] == [2, 1]
    assert proc.stop() == 0
    events = [json.loads(line) for line in proc.log().splitlines()]
    listening = [event for event in events if event["event"] == "listening"]
    assert listening and listening[0]["port"] == proc.port and listening[0]["loop"] == "asyncio"
    assert {"connection opened", "connection closed", "stopped"} <= {e["event"] for e in events}


def test_a_busy_port_is_a_clear_failure(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "queuebox", "serve", "--listen", f"127.0.0.1:{port}",
             "--data-dir", str(tmp_path / "data")],
            cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert done.returncode == 1
    assert "cannot listen" in done.stdout + done.stderr
