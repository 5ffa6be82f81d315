"""The legacy (1.5) queue API end to end: a real server, real sockets, two kinds of client.

Every test runs twice: tarantool-python sending numbers, and a raw msgpack
client sending every numeric argument (space, delay, ttl, ttr, pri, timeout,
count) as a string, as Tarantool 1.5 clients did.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.legacy_clients import (
    FLAVOURS,
    LONG_TAKE_S,
    WAIT_S,
    Clients,
    LegacyClient,
    fresh_tube,
)
from tests.e2e.serverproc import REPO, ServerProc
from tests.waiting import all_waiting_takes, wait_for, wait_for_one_more_take

SPACE = 3
US = 1_000_000

Connect = Callable[[], LegacyClient]


@pytest.fixture(params=FLAVOURS)
def connect(request: pytest.FixtureRequest, server: ServerProc) -> Iterator[Connect]:
    clients = Clients(request.param, server.port, SPACE)
    try:
        yield clients
    finally:
        clients.close()


def key(tube: str, counter: str) -> str:
    return f"space{SPACE}.{tube}.{counter}"


def test_put_take_ack(connect: Connect) -> None:
    q, tube = connect(), fresh_tube()
    data = ("first", 2, {"k": [1, 2]})
    put = q.put(tube, *data, ttl=60, ttr=30)
    tid = put[0]
    assert isinstance(tid, str) and re.fullmatch(r"[0-9a-f]{32}", tid)
    assert put == [tid, tube, "ready", *data]  # every extra argument is its own field
    assert q.take(tube) == [tid, tube, "taken", *data]
    assert q.take(tube) is None  # timeout 0, nothing left: `[]`
    assert q.on("ack", tid) == [tid, tube, "taken", *data]  # the task as it was
    assert q.error("queue.peek", q.n(SPACE), tid) == "Task not found"
    assert q.put(tube) == [q.take_id(tube), tube, "ready"]  # no data
    assert q.stats(tube) == {
        key(tube, "put"): "2",
        key(tube, "take"): "2",
        key(tube, "take_timeout"): "1",
        key(tube, "ack"): "1",
        key(tube, "tasks.total"): "1",
        key(tube, "tasks.ready"): "0",
        key(tube, "tasks.delayed"): "0",
        key(tube, "tasks.taken"): "1",
        key(tube, "tasks.buried"): "0",
        key(tube, "tasks.done"): "0",
    }


def test_take_order_urgent_then_higher_pri_then_fifo(connect: Connect) -> None:
    q, tube = connect(), fresh_tube()
    for name, pri in (("old1", 0), ("old2", 0), ("high", 5), ("low", -5)):
        q.put(tube, name, pri=pri)
    assert q.urgent(tube, "urgent1")[2] == "ready"
    q.urgent(tube, "urgent2")  # ahead of the earlier urgent task too
    assert q.urgent(tube, "later", delay=30)[2] == "delayed"  # with a delay: a plain put
    taken = [q.take(tube) for _ in range(7)]
    assert [t[3] for t in taken if t] == ["urgent2", "urgent1", "high", "old1", "old2", "low"]
    assert taken[-1] is None


def test_requeue_goes_to_the_tail(connect: Connect) -> None:
    q, tube = connect(), fresh_tube()
    for name in "abc":
        q.put(tube, name)
    first = q.take(tube)
    assert first is not None and first[3] == "a"
    assert q.on("requeue", first[0]) == [first[0], tube, "ready", "a"]
    assert [q.on("peek", q.take_id(tube))[3] for _ in range(3)] == ["b", "c", "a"]
    assert q.stats(tube)[key(tube, "requeue")] == "1"


def test_release_plain_keeps_ttl_and_place(connect: Connect) -> None:
    q, tube = connect(), fresh_tube()
    tid = q.put(tube, "x", ttl=100)[0]
    q.put(tube, "y")
    q.take(tube)
    assert q.release(tid) == [tid, tube, "ready", "x"]
    assert q.meta(tid)["ttl"] == 100 * US  # time64, as 1.5 stored it
    assert q.take_id(tube) == tid


def test_release_with_delay_and_new_ttl(connect: Connect) -> None:
    q, tube = connect(), fresh_tube()
    tid = q.put(tube, "x", ttl=100)[0]
    q.take(tube)
    before = q.meta(tid)["now"]
    assert q.release(tid, delay=0.5, ttl=30) == [tid, tube, "delayed", "x"]
    m = q.meta(tid)
    assert m["status"] == "delayed"
    assert before + US // 2 <= m["next_event"] <= m["now"] + US // 2
    # The new ttl counts from the release, plus the delay.
    ttl_end = m["created"] + m["ttl"]
    assert before + 30 * US + US // 2 <= ttl_end <= m["now"] + 30 * US + US // 2
    assert q.take(tube) is None  # still delayed
    woken = q.take(tube, WAIT_S)  # the delay ends while the take waits
    assert woken is not None and woken[:3] == [tid, tube, "taken"]
    assert q.meta(tid)["ctaken"] == 2


def test_release_with_new_ttl_only(connect: Connect) -> None:
    q, tube = connect(), fresh_tube()
    tid = q.put(tube, "x", ttl=100)[0]
    q.take(tube)
    before = q.meta(tid)["now"]
    assert q.release(tid, ttl=20)[2] == "ready"
    m = q.meta(tid)
    assert isinstance(m["ttl"], int)  # µs from creation, never a float of seconds
    ttl_end = m["created"] + m["ttl"]
    assert before + 20 * US <= ttl_end <= m["now"] + 20 * US
    assert m["next_event"] == ttl_end


def test_bury_dig_kick_up_to_count(connect: Connect) -> None:
    q, tube = connect(), fresh_tube()
    ids = [q.put(tube, n)[0] for n in range(5)]
    for n, tid in enumerate(ids):
        assert q.take_id(tube) == tid
        assert q.on("bury", tid) == [tid, tube, "buried", n]
    assert q.error("queue.bury", q.n(SPACE), ids[0]) == "Task is not taken"
    assert q.on("dig", ids[0]) == [ids[0], tube, "ready", 0]
    assert q.error("queue.dig", q.n(SPACE), ids[0]) == "Task is not buried"
    assert q.on("unbury", ids[1])[2] == "ready"
    assert q.kick(tube) == 1  # count defaults to 1
    assert [q.status(t) for t in ids[2:]] == ["ready", "buried", "buried"]
    assert q.kick(tube, 0) == 0
    assert q.kick(tube, -2) == 0
    # Up to count: 1.5 kicked every buried task of the tube, whatever count said.
    q.on("bury", q.take_id(tube))  # ids[0] again: 3 buried
    assert q.kick(tube, 2) == 2
    assert [q.status(t) for t in ids] == ["ready", "ready", "ready", "ready", "buried"]
    assert q.kick(tube, 0.5) == 0  # never more than count
    assert q.kick(tube, 10) == 1
    assert q.kick(tube, 10) == 0
    s = q.stats(tube)
    assert (s[key(tube, "bury")], s[key(tube, "dig")]) == ("6", "6")
    assert (s[key(tube, "tasks.ready")], s[key(tube, "tasks.buried")]) == ("5", "0")
    assert q.meta(ids[0])["cbury"] == 2


def test_meta_fields(connect: Connect) -> None:
    q, tube = connect(), fresh_tube()
    tid = q.put(tube, "m", ttl=100, ttr=7, pri=5)[0]
    m = q.meta(tid)
    assert (m["id"], m["tube"], m["status"]) == (tid, tube, "ready")
    assert (m["ipri"], m["pri"]) == ("127", "123")  # pri is stored as 255 - (127 + 5)
    assert (m["cid"], m["ttl"], m["ttr"], m["cbury"], m["ctaken"]) == (0, 100 * US, 7 * US, 0, 0)
    assert all(isinstance(m[f], int) for f in ("next_event", "created", "ttl", "ttr", "now"))
    assert m["created"] <= m["now"] and m["next_event"] == m["created"] + 100 * US
    q.take(tube)
    t = q.meta(tid)
    assert (t["status"], t["ctaken"]) == ("taken", 1)
    assert isinstance(t["cid"], int) and t["cid"] > 0  # the owner: this connection
    assert m["now"] + 7 * US <= t["next_event"] <= t["now"] + 7 * US  # the ttr window
    q.on("bury", tid)
    assert (q.meta(tid)["cbury"], q.meta(tid)["cid"]) == (1, 0)
    plain = q.meta(q.put(tube, "d")[0])
    assert (plain["pri"], plain["ttl"], plain["ttr"]) == ("128", 25 * 86_400 * US, 60 * US)
    assert q.meta(q.urgent(tube, "u")[0])["ipri"] == "126"  # one step ahead of the head
    assert q.stats(tube)[key(tube, "meta")] == "6"


def test_statistics_is_a_flat_list_of_string_pairs(connect: Connect) -> None:
    q, tube, other = connect(), fresh_tube(), fresh_tube()
    q.put(tube, "a")
    q.put(tube, "b", delay=30)
    tid = q.take_id(tube)
    q.on("ack", tid)
    q.put(other, "c")
    raw = q.call("queue.statistics", q.n(SPACE), tube)
    assert raw == [
        [
            key(tube, "put"), "2",
            key(tube, "take"), "1",
            key(tube, "ack"), "1",
            key(tube, "tasks.total"), "1",
            key(tube, "tasks.ready"), "0",
            key(tube, "tasks.delayed"), "1",
            key(tube, "tasks.taken"), "0",
            key(tube, "tasks.buried"), "0",
            key(tube, "tasks.done"), "0",
        ]
    ]  # fmt: skip
    whole_space = q.stats()
    assert whole_space[key(tube, "put")] == "2" and whole_space[key(other, "put")] == "1"
    assert not [k for k in whole_space if not k.startswith(f"space{SPACE}.")]


def test_other_calls(connect: Connect) -> None:
    q, tube = connect(), fresh_tube()
    first = q.put(tube, "same", 1, fn="put_unique")
    assert q.put(tube, "same", 2, fn="put_unique") == first  # the existing task
    tid = q.take_id(tube)
    assert q.on("touch", tid)[2] == "taken"
    assert q.on("done", tid, "result", 42) == [tid, tube, "done", "result", 42]
    assert q.on("peek", tid) == [tid, tube, "done", "result", 42]  # kept until its ttl
    assert q.on("delete", tid)[2] == "done"
    for n in range(3):
        q.put(tube, n)
    assert q.call("queue.truncate", q.n(SPACE), tube) == [3]
    assert q.take(tube) is None


def test_take_timeout_answers_nothing(connect: Connect) -> None:
    q, tube = connect(), fresh_tube()
    started = time.monotonic()
    assert q.call("queue.take", q.n(SPACE), tube, q.n(0.3)) == []
    assert time.monotonic() - started >= 0.25  # it did wait for its timeout
    assert q.stats(tube)[key(tube, "take_timeout")] == "1"


def test_waiting_take_is_woken_by_a_put_on_another_connection(connect: Connect) -> None:
    consumer, producer, tube = connect(), connect(), fresh_tube()
    pending = consumer.start_take(tube, LONG_TAKE_S)
    with pytest.raises(TimeoutError):
        pending(0.3)  # it waits: nothing to take yet
    put = producer.put(tube, "wake", "up")
    assert pending(WAIT_S) == [put[0], tube, "taken", "wake", "up"]  # long before its timeout
    assert producer.error("queue.ack", producer.n(SPACE), put[0]) == (
        "Only consumer that took the task can it ack"
    )
    assert consumer.on("ack", put[0])[2] == "taken"


def test_disconnect_releases_taken_tasks_and_wakes_a_waiting_take(connect: Connect) -> None:
    leaver, stayer, tube = connect(), connect(), fresh_tube()
    tid = stayer.put(tube, "x")[0]
    assert leaver.take_id(tube) == tid
    pending = stayer.start_take(tube, LONG_TAKE_S)
    leaver.close()
    assert pending(WAIT_S) == [tid, tube, "taken", "x"]
    stats = stayer.stats(tube)
    assert stats[key(tube, "ready_by_disconnect")] == "1"
    assert stayer.meta(tid)["ctaken"] == 2


def test_a_closed_waiting_take_takes_nothing(connect: Connect, server: ServerProc) -> None:
    leaver, stayer, tube = connect(), connect(), fresh_tube()
    before = all_waiting_takes(server.port)
    leaver.start_take(tube, LONG_TAKE_S)
    wait_for_one_more_take(server.port, before)
    leaver.close()
    tid = stayer.put(tube, "x")[0]
    # Either the dead take never got it, or its disconnect gave it back: not lost.
    got = stayer.take(tube, WAIT_S)
    assert got is not None and got[0] == tid
    wait_for(lambda: stayer.stats(tube)[key(tube, "tasks.taken")] == "1", "one taken task")


ERRORS: list[tuple[str, Callable[[LegacyClient, str], list[object]], str]] = [
    ("queue.put", lambda q, t: ["x", t, 0, 0, 0, 0], "Invalid value of space: 'x'"),
    ("queue.put", lambda q, t: [q.n(SPACE), t, "soon", 0, 0, 0], "Invalid value of delay: 'soon'"),
    ("queue.put", lambda q, t: [q.n(SPACE), t, 0, True, 0, 0], "Invalid value of ttl: true"),
    ("queue.put", lambda q, t: [q.n(SPACE), t, 0, 0, None, 0], "Invalid value of ttr: nil"),
    ("queue.put", lambda q, t: [q.n(SPACE), t, 0, 0, 0, "1x"], "Invalid value of pri: '1x'"),
    ("queue.put", lambda q, t: [q.n(SPACE), 7, 0, 0, 0, 0], "Invalid value of tube: 7"),
    ("queue.put", lambda q, t: [q.n(SPACE), t, 0, 0, 0], "Invalid value of pri: nil"),
    ("queue.take", lambda q, t: [q.n(SPACE), t, q.n(-1)], "Timeout can't be less then 0"),
    ("queue.take", lambda q, t: [q.n(SPACE), t, "nan"], "Invalid value of timeout: 'nan'"),
    ("queue.kick", lambda q, t: [q.n(SPACE), t, "all"], "Invalid value of count: 'all'"),
    ("queue.ack", lambda q, t: [q.n(SPACE), "0" * 32], "Task not found"),
    ("queue.put_unique", lambda q, t: [q.n(SPACE), t, 0, 0, 0, 0], "Can not put unique task "
     "without data"),
    ("queue.statistics", lambda q, t: [q.n(SPACE), 5], "Invalid value of tube: 5"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "args", "text"), ERRORS, ids=[e[2] for e in ERRORS])
def test_bad_arguments_get_clear_errors(
    connect: Connect, name: str, args: Callable[[LegacyClient, str], list[object]], text: str
) -> None:
    q, tube = connect(), fresh_tube()
    assert q.error(name, *args(q, tube)) == text
    assert q.put(tube, "still fine")[2] == "ready"  # the connection carries on


def test_numeric_values_are_shown_as_sent(connect: Connect) -> None:
    q, tube = connect(), fresh_tube()
    shown = "'-1'" if q.as_text else "-1"
    assert q.error("queue.put", q.n(-1), tube, 0, 0, 0, 0) == f"Invalid value of space: {shown}"
    shown = "'1.5'" if q.as_text else "1.5"
    assert q.error("queue.take", q.n(1.5), tube) == f"Invalid value of space: {shown}"


def test_ownership_errors(connect: Connect) -> None:
    owner, other, tube = connect(), connect(), fresh_tube()
    tid = owner.put(tube, "x")[0]
    assert owner.error("queue.ack", owner.n(SPACE), tid) == "Task is not taken"
    owner.take(tube)
    words = {"ack": "ack", "touch": "touch", "done": "done", "bury": "done",
             "release": "release", "requeue": "release"}  # fmt: skip
    for fn, word in words.items():
        text = other.error(f"queue.{fn}", other.n(SPACE), tid)
        assert text == f"Only consumer that took the task can it {word}"
    assert owner.status(tid) == "taken"


def test_the_readme_example_runs_as_written(server: ServerProc, tmp_path: Path) -> None:
    manual = (REPO / "docs" / "legacy.md").read_text(encoding="utf-8")
    code = re.search(r"^```python\n(.*?)^```", manual, re.S | re.M)
    assert code and '"127.0.0.1", 3301' in code.group(1)
    script = tmp_path / "legacy_example.py"
    script.write_text(code.group(1).replace('"127.0.0.1", 3301', f'"127.0.0.1", {server.port}'))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    printed = ast.literal_eval(done.stdout.strip())
    assert printed[0][1:] == ["emails", "ready", "to@example.org", "hi"]
    assert re.fullmatch(r"[0-9a-f]{32}", printed[0][0])
    stats = LegacyClient("numbers", server.port, 0)
    try:
        assert stats.stats("emails")["space0.emails.ack"] == "1"
    finally:
        stats.close()
