"""The queue's spaces, readable over real sockets: SELECT, `_vspace`/`_vindex`, no writes.

The select script (tests/e2e/select_script.py) runs against a fresh queuebox
and must answer, row for row, what Tarantool 2.6 + queue 1.5.0 answered
(tests/e2e/select_expected.json, recorded from the reference server with the
script's `record` command; `compare` runs both side by side). The rest:
writes are refused with Tarantool's texts, reading needs the read right, a
new tube is found by name by asynctnt (the schema version moves), and a
replica answers selects from its replicated spaces.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asynctnt
import pytest
import tarantool

from tests.e2e import select_script
from tests.e2e.cluster import start_replica
from tests.e2e.serverproc import SELECT, RawClient, ServerProc, StartServer, login_tester
from tests.waiting import wait_for, wait_for_async

EXPECTED = Path(__file__).with_name("select_expected.json")


def test_the_select_script_answers_what_tarantool_and_queue_answer(
    start_server: StartServer,
) -> None:
    server = start_server()
    answers = json.loads(
        json.dumps(select_script.run(f"127.0.0.1:{server.port}", "tester", "secret"))
    )
    expected = json.loads(EXPECTED.read_text())
    assert [label for label, _ in answers] == [label for label, _ in expected]
    for (label, rows), (_, wanted) in zip(answers, expected, strict=True):
        assert rows == wanted, label


def test_writes_into_the_queues_spaces_are_refused_as_tarantool_refuses_them(
    start_server: StartServer,
) -> None:
    server = start_server()
    conn = login_tester(server.port)
    conn.call("queue.create_tube", "jobs", "fifo")
    conn.call("queue.tube.jobs:put", "x")
    with pytest.raises(tarantool.DatabaseError) as caught:
        conn.insert("jobs", [5, "r", "sneaky"])
    assert caught.value.args == (42, "Write access to space 'jobs' is denied for user 'tester'")
    with pytest.raises(tarantool.DatabaseError) as queue_space:
        conn.delete("_queue", ["jobs"])
    assert queue_space.value.args[0] == 42
    with pytest.raises(tarantool.DatabaseError) as view:
        conn.insert(289, [1])
    assert view.value.args == (113, "View '_vindex' is read-only")
    with pytest.raises(tarantool.DatabaseError) as nowhere:
        conn.replace(9999, [1])
    assert nowhere.value.args == (36, "Space '9999' does not exist")
    assert conn.select("jobs").data == [[0, "r", "x"]]  # nothing changed
    conn.close()


def test_reading_needs_the_read_right_on_the_tube(start_server: StartServer) -> None:
    toml = (
        '[users.tester]\npassword = "secret"\nrights = "all"\n'
        '[users.watcher]\npassword = "w"\nrights = "none"\nread = ["jobs*"]\n'
        '[users.nobody]\npassword = "n"\nrights = ["admin"]\n'
    )
    server = start_server(toml=toml)
    conn = login_tester(server.port)
    for tube in ("jobs", "secret"):
        conn.call("queue.create_tube", tube, "fifo")
        conn.call(f"queue.tube.{tube}:put", tube)
    watcher = login_tester(server.port, user="watcher", password="w")
    names = {row[2] for row in watcher.select(281, []).data}
    assert "jobs" in names and "_queue" in names and "secret" not in names
    assert [row[0] for row in watcher.select("_queue").data] == ["jobs"]  # rows it may read
    assert watcher.select("jobs").data == [[0, "r", "jobs"]]
    secret = conn.select(281, ["secret"], index=2).data[0][0]
    with pytest.raises(tarantool.DatabaseError) as caught:
        watcher.select(secret, [])
    assert caught.value.args == (42, "Read access to space 'secret' is denied for user 'watcher'")
    nobody = login_tester(server.port, user="nobody", password="n")
    # The views show what a user may read: the views themselves (Tarantool's public role).
    assert [row[2] for row in nobody.select(281, []).data] == ["_vspace", "_vindex"]
    assert nobody.select("_vspace", ["_vindex"], index="name").data[0][0] == 289
    for c in (watcher, nobody, conn):
        c.close()


async def test_asynctnt_finds_a_tube_created_after_it_connected(start_server: StartServer) -> None:
    server = start_server()
    conn = asynctnt.Connection(
        host="127.0.0.1", port=server.port, username="tester", password="secret"
    )
    await conn.connect()
    try:
        await conn.call("queue.create_tube", ["late", "utube"])
        await conn.call("queue.tube.late:put", ["x", {"utube": "a"}])

        # The create moved the schema version: asynctnt fetches the schema again, in
        # the background, as it does after DDL on Tarantool.
        async def selected() -> list[Any] | None:
            try:
                return [list(row) for row in await conn.select("late", ["r", "a"], index="utube")]
            except asynctnt.exceptions.TarantoolSchemaError:
                return None  # its schema not fetched again yet

        rows = await wait_for_async(selected, "asynctnt to find the new tube", timeout=10)
        assert rows == [[0, "r", "a", "x"]]
        taken = await conn.select("_queue_session_ids", [])
        assert list(taken) == []
    finally:
        await conn.disconnect()


def test_the_schema_version_moves_with_a_tube_created_or_dropped(server: ServerProc) -> None:
    with RawClient(server.port) as raw:
        raw.auth("tester", "secret")
        # A server's first tube also makes the keys space (drivers/keys.py): one more.
        raw.call("queue.create_tube", "moves_first", "fifo", {"if_not_exists": True})
        before = raw.roundtrip(SELECT, {0x10: 281, 0x12: 100, 0x20: []}).header[5]
        assert raw.call("queue.create_tube", "moves", "fifo").header[5] == before + 1
        assert raw.call("queue.tube.moves:drop").header[5] == before + 2
        assert raw.call("queue.statistics").header[5] == before + 2


def test_a_big_tube_pages_by_its_primary_key(start_server: StartServer) -> None:
    server = start_server()
    conn = login_tester(server.port)
    conn.call("queue.create_tube", "big", "fifottl")
    for i in range(2000):
        conn.call("queue.tube.big:put", i)
    seen: list[int] = []
    after: Any = None
    while True:
        key = [] if after is None else [after]
        page = conn.select("big", key, iterator=select_script.GT, limit=300).data
        if not page:
            break
        seen += [row[0] for row in page]
        after = page[-1][0]
    assert seen == list(range(2000))
    watch = conn.select("big", ["r"], index="watch", limit=5).data
    assert [row[0] for row in watch] == [0, 1, 2, 3, 4]
    conn.close()


def test_a_replica_answers_selects_from_what_it_replicated(start_server: StartServer) -> None:
    primary = start_server()
    conn = login_tester(primary.port)
    conn.call("queue.create_tube", "jobs", "utube")
    conn.call("queue.tube.jobs:put", "x", {"utube": "u"})
    replica = start_replica(start_server, primary)
    found: list[Any] = [None, []]  # the replica's connection, the rows it read

    def replicated() -> bool:
        try:
            if found[0] is None:
                # The connection fetches the spaces, then the indexes: a space
                # replicated in between fails the login (NetworkError), so retry.
                found[0] = login_tester(replica.port)
            found[1] = found[0].select("jobs", ["r"], index="utube").data
        except (tarantool.DatabaseError, tarantool.error.SchemaError):
            if found[0] is not None:
                found[0].close()  # not replicated yet: the next one fetches the schema
            found[0] = None
        return bool(found[1])

    wait_for(replicated, "the tube on the replica", timeout=15)
    on_replica, rows = found
    assert rows == [[0, "r", "u", "x"]]
    assert on_replica.select("_queue_session_ids").data == []
    on_replica.close()
    conn.close()
