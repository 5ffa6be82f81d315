"""Task-change events (drivers/events.py): every change is named, live and from the WAL alike.

A listener hears each change once its call is done; the same changes read back
from the WAL (the note each record carries as `why`) get the same names,
tasks and order, which is what lets a subscriber resume from an LSN.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from queuebox.drivers.events import (
    ReadBack,
    TaskChange,
    event_name,
    normalizer,
    record_change,
)
from queuebox.drivers.fifottl import FifoTtl
from queuebox.drivers.queue import Queue
from queuebox.storage.engine import Engine
from queuebox.storage.framing import FrameDecoder
from queuebox.storage.records import BodyDecoder
from tests.unit.drivers.queue_harness import T0, FakeClock, Q


class Heard:
    def __init__(self, q: Queue) -> None:
        self.changes: list[TaskChange] = []
        self.batches: list[int] = []
        q.listen(self.hear)

    def hear(self, changes: list[TaskChange]) -> None:
        self.batches.append(len(changes))
        self.changes += changes

    def names(self) -> list[tuple[str, int, str]]:
        """(event, task id, status) of each change heard, and forget them."""
        out = [(c.event, c.task[0], c.task[1]) for c in self.changes]
        self.changes.clear()
        return out


def script(h: Q) -> None:
    """Every kind of change a fifottl tube makes."""
    h.create("t", "fifottl", ttl=100, ttr=10)
    h.put("t", "a")  # 0
    h.put("t", "b", delay=1)  # 1
    h.take("t")  # 0
    h.tcall("t", "touch", 0, 5)
    h.tcall("t", "release", 0)
    h.tcall("t", "bury", 0)
    h.tcall("t", "kick", 5)
    h.take("t")  # 0 again
    h.tcall("t", "ack", 0)
    h.advance(1)  # 1: delay over
    h.take("t")  # 1
    h.advance(10)  # 1: ttr
    h.put("t", "c", ttl=2)  # 2
    h.advance(2)  # 2: ttl
    h.tcall("t", "delete", 1)
    h.put("t", "d")  # 0: ids are reused
    h.put("t", "e")  # 1
    h.take("t")
    h.tcall("t", "release_all")
    h.tcall("t", "truncate")


EXPECTED = [
    ("put", 0, "r"),
    ("put", 1, "~"),
    ("take", 0, "t"),
    ("touch", 0, "t"),
    ("release", 0, "r"),
    ("bury", 0, "!"),
    ("kick", 0, "r"),
    ("take", 0, "t"),
    ("ack", 0, "-"),
    ("delay", 1, "r"),
    ("take", 1, "t"),
    ("ttr", 1, "r"),
    ("put", 2, "r"),
    ("ttl", 2, "-"),
    ("delete", 1, "-"),
    ("put", 0, "r"),
    ("put", 1, "r"),
    ("take", 0, "t"),
    ("release", 0, "r"),
    ("truncate", 0, "-"),
    ("truncate", 1, "-"),
]


def test_every_change_is_heard_with_its_event_after_its_call() -> None:
    h = Q()
    heard = Heard(h.q)
    script(h)
    assert heard.names() == EXPECTED
    # One delivery per call (a truncate of two tasks is one), none while a call runs.
    assert heard.batches[-1] == 2
    change = TaskChange("t", "put", (0, "r", "x"), [0, "r", "x"])
    assert "put" in repr(change)


def test_a_change_carries_the_stored_task_and_what_clients_see_of_it() -> None:
    h = Q()
    heard = Heard(h.q)
    h.create("u", "utubettl")
    h.put("u", "payload", utube="a", pri=3)
    (change,) = heard.changes
    assert change.tube == "u" and change.event == "put"
    assert change.task == [0, "r", "payload"]
    assert change.fields[5] == 3 and change.fields[7] == "a"  # pri, utube: the stored tuple
    assert change.lsn is None  # the server adds the WAL's position


def test_session_end_and_restart_release_are_release_events() -> None:
    h = Q()
    heard = Heard(h.q)
    h.create("t", "fifo")
    h.put("t", "a")
    h.put("t", "b")
    h.take("t", conn=7)
    h.q.disconnected(7)
    assert heard.names()[-1] == ("release", 0, "r")
    h.take("t", conn=8)
    restarted = h.restart()
    after = Heard(restarted.q)
    assert after.changes == []  # listeners come after the rebuild's own releases


def test_a_listener_that_calls_the_queue_hears_its_own_changes_after() -> None:
    h = Q()
    h.create("t", "fifo")
    h.create("audit", "fifo")
    seen: list[tuple[str, str]] = []

    def hear(changes: list[TaskChange]) -> None:
        for change in changes:
            seen.append((change.tube, change.event))
            if change.tube == "t":
                h.put("audit", change.event)

    h.q.listen(hear)
    h.put("t", "x")
    assert seen == [("t", "put"), ("audit", "put")]
    assert h.tcall("audit", "peek", 0) == [[0, "r", "put"]]


def test_listening_stops() -> None:
    h = Q()
    heard = Heard(h.q)
    h.q.listen(None)
    h.create("t", "fifo")
    h.put("t", "x")
    assert heard.changes == []


@pytest.mark.parametrize(
    ("note", "op", "event"),
    [
        ("take", "replace", "take"),
        ("release_all", "replace", "release"),
        ("session", "replace", "release"),
        ("restart", "replace", "release"),
        ("requeue_by_plugin", "replace", "requeue_by_plugin"),
        (None, "insert", "put"),
        (None, "replace", "change"),
        (None, "delete", "delete"),
    ],
)
def test_event_names(note: str | None, op: str, event: str) -> None:
    assert event_name(note, op) == event


def test_a_record_that_changes_no_task_is_no_event() -> None:
    body = {"op": "create_space", "lsn": 1, "ts": 1.0, "space": "t"}
    assert record_change("t", body, normalizer(None)) is None
    put = {"op": "insert", "lsn": 2, "ts": 2.0, "space": "t", "tuple": (0, "r", 7, "x")}
    change = record_change("t", put, normalizer(None))
    assert change is not None and change.task == [0, "r", "x"]  # unknown driver: last field
    assert (change.lsn, change.ts) == (2, 2.0)


def test_a_key_only_delete_is_the_task_its_reader_saw_put_else_its_id() -> None:
    """Format 4: a delete record holds the key alone (storage/FORMAT.md §5.2)."""
    read_back = ReadBack()
    put = {"op": "insert", "lsn": 2, "ts": 2.0, "space": "t", "tuple": (0, "r", "x")}
    ack = {"op": "delete", "lsn": 3, "ts": 3.0, "space": "t", "key": (0,), "why": "ack"}
    assert read_back(put) is None
    change = record_change("t", ack, normalizer(None), read_back(ack))
    assert change is not None and (change.event, change.task) == ("ack", [0, "-", "x"])
    # The same ack read from after its put: the id and status, no data.
    again = record_change("t", ack, normalizer(None), read_back(ack))
    assert again is not None and (again.event, again.task, again.fields) == (
        "ack",
        [0, "-", None],
        (0, "-"),
    )
    # It keeps the tasks changed last, up to its limit.
    small = ReadBack(limit=2)
    for i, op in ((1, "insert"), (2, "insert"), (1, "replace"), (3, "insert")):
        small({"op": op, "tuple": (i, "r", f"d{i}")})
    assert [small({"op": "delete", "key": (i,)}) for i in (1, 2, 3)] == [
        (1, "r", "d1"),
        None,
        (3, "r", "d3"),
    ]


def test_the_wal_names_every_change_as_the_live_listener_did(tmp_path: Path) -> None:
    engine = Engine(tmp_path, "write", clock=lambda: 1.0)
    engine.open()
    try:
        h = Q(engine.catalog, FakeClock(T0))
        heard = Heard(h.q)
        script(h)
        live = [(c.event, c.task, c.fields) for c in heard.changes]
        batch = engine.take_batch()
        assert batch is not None
        engine.write_batch(batch)
        replayed = [
            (c.event, c.task, c.fields) for c in changes_of(engine, "t", normalizer(FifoTtl))
        ]
    finally:
        engine.close()
    assert replayed == live
    assert [e for e, _, _ in replayed] == [e for e, _, _ in EXPECTED]


def changes_of(engine: Engine, tube: str, normalize: Any) -> list[TaskChange]:
    data = engine.wal_cursor(0).read(limit=1 << 24)
    decoder = FrameDecoder(0)
    decoder.feed(data)
    bodies = BodyDecoder("wal").decode_many([frame[1] for frame in decoder.take()])
    out = []
    read_back = ReadBack()  # a delete record holds the key alone (format 4)
    for body in bodies:
        assert isinstance(body, dict)
        if body["space"] == tube:
            change = record_change(tube, body, normalize, read_back(body))
            if change is not None:
                out.append(change)
    return out
