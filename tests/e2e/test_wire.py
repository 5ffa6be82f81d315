"""The wire as a raw client sees it: replies, errors, pipelining, system spaces, EVAL."""

from __future__ import annotations

import time

from tests.e2e.serverproc import CALL, CALL_16, EVAL, ID, PING, SELECT, RawClient, ServerProc, frame

SCHEMA_VERSION = 81


def test_ping_reply_header(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        reply = client.roundtrip(PING)
    assert reply.header == {0: 0, 1: 1, 5: SCHEMA_VERSION}
    assert reply.body == {}


def test_every_reply_carries_the_same_schema_version(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        replies = [
            client.roundtrip(PING),
            client.call("queue.state"),
            client.call("nosuch"),
            client.roundtrip(99),
            client.roundtrip(SELECT, {0x10: 281, 0x12: 100, 0x20: []}),
        ]
    assert {reply.header[5] for reply in replies} == {SCHEMA_VERSION}


def test_sync_is_echoed_exactly(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        for sync in (0, 1, 2**32 + 5, 2**64 - 1):
            client.send(frame(PING, sync))
            assert client.recv().sync == sync


def test_pipelined_slow_call_answers_after_fast_ones(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        client.send(
            frame(CALL, 1, {0x22: "queuebox.sleep", 0x21: [0.5, "slow"]})
            + frame(CALL, 2, {0x22: "queuebox.echo", 0x21: ["fast"]})
            + frame(PING, 3)
            + frame(CALL, 4, {0x22: "queuebox.sleep", 0x21: [0.1, "medium"]})
        )
        started = time.monotonic()
        replies = [client.recv() for _ in range(4)]
        elapsed = time.monotonic() - started
    assert [reply.sync for reply in replies] == [2, 3, 4, 1]
    assert replies[0].data == ["fast"]
    assert replies[2].data == ["medium"]
    assert replies[3].data == ["slow"]
    assert elapsed < 5  # the sleeps ran together, not one after another


def test_unknown_function(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        assert client.call("queue.tube.q9:put", "x").error == (
            33,
            "Procedure 'queue.tube.q9:put' is not defined",
        )
        assert client.call("no_such_fn").error == (33, "Procedure 'no_such_fn' is not defined")
        assert client.call("a..b").error == (33, "Procedure 'a..b' is not defined")
        assert client.roundtrip(PING).error is None  # the connection stays


def test_unknown_request_type_keeps_the_connection(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        assert client.roundtrip(99).error == (48, "Unknown request type 99")
        assert client.roundtrip(0).error == (48, "Unknown request type 0")
        assert client.call("queue.state").data == ["RUNNING"]


def test_call_16_shapes_results(server: ServerProc) -> None:
    with RawClient(server.port) as client:

        def call16(*args: object) -> object:
            return client.roundtrip(CALL_16, {0x22: "queuebox.echo", 0x21: list(args)}).data

        assert call16() == []
        assert call16(1, "two", [3]) == [[1], ["two"], [3]]
        assert call16([0, "r", "x"]) == [[0, "r", "x"]]
        assert call16({"a": 1}) == [[{"a": 1}]]
        assert call16(None) == [[None]]
        assert client.roundtrip(CALL_16, {0x22: "queue.state"}).data == [["RUNNING"]]


def test_call_without_args_and_without_name(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        assert client.roundtrip(CALL, {0x22: "queuebox.echo"}).data == []
        assert client.roundtrip(CALL, {0x21: []}).error == (
            69,
            "Missing mandatory field 'function name' in request",
        )


def test_handler_errors_keep_code_and_connection(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        assert client.call("queuebox.test.error", 4242, "custom").error == (4242, "custom")
        code, message = client.call("queuebox.test.crash").error or (0, "")
        assert (code, "boom" in message) == (32, True)
        assert client.call("queue.state").data == ["RUNNING"]
    assert "request failed" in server.log()  # logged with its traceback


def test_system_views_describe_the_queues_spaces_consistently(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        spaces = client.roundtrip(SELECT, {0x10: 281, 0x12: 2**32 - 1, 0x14: 2, 0x20: []}).data
        indexes = client.roundtrip(SELECT, {0x10: 289, 0x12: 2**32 - 1, 0x14: 2, 0x20: []}).data
        names = {row[2] for row in spaces}
        assert {"_queue", "_queue_consumers", "_queue_taken_2"} <= names
        # Every _vindex row names a space of _vspace (tarantool-python needs that).
        assert {row[0] for row in indexes} <= {row[0] for row in spaces}
        for space in (277, 341):
            body = {0x10: space, 0x11: 0, 0x12: 2**32 - 1, 0x13: 0, 0x14: 2, 0x20: []}
            assert client.roundtrip(SELECT, body).data == []
        lookup = {0x10: 281, 0x11: 2, 0x12: 1, 0x14: 0, 0x20: ["queue"]}
        assert client.roundtrip(SELECT, lookup).data == []
        other = {0x10: 9999, 0x12: 1, 0x20: []}
        assert client.roundtrip(SELECT, other).error == (36, "Space '9999' does not exist")
        assert client.roundtrip(SELECT, {0x10: 281, 0x20: []}).error == (
            69,
            "Missing mandatory field 'limit' in request",
        )
        assert client.roundtrip(SELECT, {0x10: 281, 0x12: 1}).error == (
            69,
            "Missing mandatory field 'key' in request",
        )


def test_id_is_answered(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        reply = client.roundtrip(ID, {0x54: 3, 0x55: [0, 1, 2]})
    assert reply.error is None
    assert reply.body == {0x54: 3, 0x55: [], 0x5B: "chap-sha1"}


def test_dml_is_refused_clearly(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        queue_id = client.roundtrip(SELECT, {0x10: 281, 0x11: 2, 0x12: 1, 0x20: ["_queue"]}).data
        for request_type in (2, 3, 4, 5, 9):  # INSERT, REPLACE, UPDATE, DELETE, UPSERT
            body = {0x10: queue_id[0][0], 0x21: [1]}
            assert client.roundtrip(request_type, body).error == (
                42,
                "Write access to space '_queue' is denied for user 'guest'",
            )
            assert client.roundtrip(request_type, {0x10: 9999, 0x21: [1]}).error == (
                36,
                "Space '9999' does not exist",
            )
        assert client.roundtrip(PING).error is None


def test_eval_table(server: ServerProc) -> None:
    with RawClient(server.port) as client:
        state = client.roundtrip(EVAL, {0x27: "return  queue.state()\n", 0x21: []})
        assert state.data == ["RUNNING"]
        code, message = client.roundtrip(EVAL, {0x27: "return 1 + 1", 0x21: []}).error or (0, "")
        assert code == 32 and message.startswith("queuebox does not run Lua")


def test_session_ids_are_monotonic(server: ServerProc) -> None:
    ids = []
    for _ in range(3):
        with RawClient(server.port) as client:
            ids.append(client.call("queuebox.test.whoami").data[1])
    assert ids == sorted(ids) and len(set(ids)) == 3
