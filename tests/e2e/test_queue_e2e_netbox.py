"""Tarantool's own net.box (the tarantool 2.6 binary as the client) using the queue.

net.box is what most programs written for Tarantool + queue use. It runs
each call in its own fiber over one connection, reads identify's 16 raw
bytes as a Lua string, and raises errors as box errors with code and text.
The Lua script records what it saw; the assertions are here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.serverproc import ServerProc

SCRIPT = r"""
local json = require('json')
local fiber = require('fiber')
local netbox = require('net.box')
local uri, tube = arg[1], arg[2]
local out = {}
local conn = netbox.connect(uri, {wait_connected = 10})
local function err(fn, ...)
    local ok, e = pcall(fn, ...)
    if ok then return {ok = true} end
    return {code = e.code, message = tostring(e)}
end
local q = 'queue.tube.' .. tube .. ':'

out.create = err(conn.call, conn, 'queue.create_tube', {tube, 'fifottl'})
out.exists = conn:eval('local name = ... ; return queue.tube[name] ~= nil', {tube})

-- A take waiting in one fiber does not hold up a put in another, on one connection.
local taken = fiber.channel(1)
fiber.create(function() taken:put(conn:call(q .. 'take', {5})) end)
fiber.sleep(0.05)
out.put = conn:call(q .. 'put', {{job = 1}, {pri = 2}})
out.taken = taken:get(5)

out.take_empty = {conn:call(q .. 'take', {0})}
out.kick = conn:call(q .. 'kick', {1})
out.peek_missing = err(conn.call, conn, q .. 'peek', {99})
out.not_taken = err(conn.call, conn, q .. 'ack', {99})
out.nosuch = err(conn.call, conn, 'queue.tube.nosuch_tube:put', {1})

-- identify: the session's 16 raw bytes, and a second connection acks through it.
local session = conn:call('queue.identify')
out.session_len = #session
out.session_same = conn:call('queue.identify') == session
local other = netbox.connect(uri, {wait_connected = 10})
out.foreign_ack = err(other.call, other, q .. 'ack', {0})
out.identified = other:call('queue.identify', {session}) == session
out.ack = other:call(q .. 'ack', {0})
out.bad_uuid = err(other.call, other, 'queue.identify', {'short'})
out.unknown_uuid = err(other.call, other, 'queue.identify', {'0123456789abcdef'})
other:close()

out.stats = conn:call('queue.statistics', {tube})
out.state = conn:call('queue.state')
out.version = conn:eval('return queue._VERSION')
out.drop = conn:call(q .. 'drop')
conn:close()
print(json.encode(out))
os.exit(0)
"""


def run_script(tmp_path: Path, port: int, tube: str) -> dict[str, Any]:
    binary = shutil.which("tarantool")
    if binary is None:
        pytest.skip("the tarantool binary is not installed (tests/run.sh installs it)")
    script = tmp_path / "queue_client.lua"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [binary, str(script), f"tester:secret@127.0.0.1:{port}", tube],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_queue_through_netbox(server: ServerProc, tmp_path: Path) -> None:
    out = run_script(tmp_path, server.port, "netbox_jobs")
    assert out["create"] == {"ok": True}  # queuebox answers [] (upstream: an error)
    assert out["exists"] is True
    assert out["put"] == [0, "r", {"job": 1}]
    assert out["taken"] == [0, "t", {"job": 1}]
    assert out["take_empty"] == []
    assert out["kick"] == 0
    assert out["peek_missing"] == {"code": 32, "message": "Task 99 not found"}
    assert out["not_taken"] == {"code": 32, "message": "Task was not taken"}
    assert out["nosuch"] == {
        "code": 33,
        "message": "Procedure 'queue.tube.nosuch_tube:put' is not defined",
    }
    assert out["session_len"] == 16 and out["session_same"] is True
    assert out["foreign_ack"] == {"code": 32, "message": "Task was not taken"}
    assert out["identified"] is True
    assert out["ack"] == [0, "-", {"job": 1}]
    assert out["bad_uuid"] == {"code": 32, "message": "Invalid UUID format."}
    assert out["unknown_uuid"] == {
        "code": 32,
        "message": "The UUID 33323130-3534-3736-3839-616263646566 is unknown.",
    }
    stats = out["stats"]
    assert stats["tasks"]["done"] == 1 and stats["tasks"]["total"] == 0
    assert (stats["calls"]["put"], stats["calls"]["take"], stats["calls"]["ack"]) == (1, 1, 1)
    assert out["state"] == "RUNNING"
    assert out["version"] == "1.5.0"
    assert out["drop"] is True
