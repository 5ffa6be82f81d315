"""queuebox.tasks (QUEUE.md §14): a tube's tasks by state, a page at a time, in take order."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.unit.drivers.queue_harness import SEC, T0, VARIANT_IDS, VARIANTS, Q, error_of, make_tube


def page(h: Q, tube: str = "t", **opts: Any) -> dict[str, Any]:
    return h.q.list_tasks(tube, opts)  # type: ignore[no-any-return]


def ids(answer: dict[str, Any]) -> list[int]:
    return [task["id"] for task in answer["tasks"]]


def every_page(h: Q, **opts: Any) -> list[int]:
    found, after = [], None
    while True:
        answer = page(h, **opts, **({"after": after} if after is not None else {}))
        found += ids(answer)
        after = answer["next"]
        if after is None:
            return found


@pytest.mark.parametrize(("type_", "mode"), VARIANTS, ids=VARIANT_IDS)
def test_each_state_lists_its_tasks_and_paging_sees_each_once(type_: str, mode: str | None) -> None:
    h = Q()
    make_tube(h, "t", type_, mode)
    for n in range(7):
        h.put("t", f"d{n}", utube=str(n))
    h.take("t")  # 0
    h.one("t", "bury", 1)
    h.one("t", "bury", 2)
    assert every_page(h, state="ready", limit=2) == [3, 4, 5, 6]
    assert every_page(h, state="buried", limit=1) == [1, 2]
    assert every_page(h, state="taken") == [0]
    assert every_page(h, state="delayed") == []
    assert every_page(h, limit=3) == list(range(7))
    answer = page(h, state="t")  # the status letter works too
    assert answer["tasks"][0]["state"] == "taken"
    assert answer["tasks"][0]["data"] == "d0"
    assert (answer["tube"], answer["type"]) == ("t", type_)


def test_the_ttl_drivers_list_in_priority_order_and_page_by_pri_and_id() -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    for n, pri in enumerate([5, 1, 0, 1, 9, 0]):
        h.put("t", n, pri=pri)
    first = page(h, state="ready", limit=3)
    assert ids(first) == [2, 5, 1]
    assert first["next"] == [1, 1]
    h.put("t", "late", pri=0)  # id 6 sorts before the cursor: the next page skips it
    assert ids(page(h, state="ready", after=first["next"])) == [3, 0, 4]


def test_a_ttl_task_shows_its_times() -> None:
    h = Q()
    make_tube(h, "t", "utubettl", ttl=100)
    h.put("t", "a", ttr=10, pri=3, utube="u")
    h.put("t", "b", delay=5, utube="v")
    h.take("t")
    taken, delayed = page(h)["tasks"]
    now = T0 / SEC
    session = taken.pop("session")  # who holds it: the session of connection 1
    assert uuid.UUID(session).bytes == h.q.sessions.session_of(1)
    assert taken == {
        "id": 0, "state": "taken", "data": "a", "utube": "u", "pri": 3,
        "created": now, "ttl": 100.0, "ttr": 10.0, "expires_at": now + 100, "deadline": now + 10,
    }  # fmt: skip
    assert (delayed["ready_at"], delayed["expires_at"]) == (now + 5, now + 105)


def test_a_delayed_fifo_task_shows_when_it_is_ready() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    h.put("t", "a")
    h.take("t")
    h.one("t", "release", 0, {"delay": 2.5})
    assert page(h, id=0)["tasks"] == [
        {"id": 0, "state": "delayed", "ready_at": T0 / SEC + 2.5, "data": "a"}
    ]
    assert page(h, id=1)["tasks"] == []


@pytest.mark.parametrize(
    ("opts", "text"),
    [
        ({"state": "done"}, "Invalid value of state: done"),
        ({"limit": 0}, "Invalid value of limit: 0 (1 to 1000)"),
        ({"limit": 1001}, "Invalid value of limit: 1001 (1 to 1000)"),
        ({"after": "x"}, "Invalid value of after: give back the `next` of the last page"),
        ({"after": [1, 2]}, "Invalid value of after: expected 1 numbers"),
        ({"id": -1}, "Invalid value of id: -1"),
        ({"colour": 1}, "Unknown option colour"),
    ],
)
def test_bad_options_are_refused(opts: dict[str, Any], text: str) -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    assert error_of(h.q.list_tasks, "t", opts) == (32, text)


def test_an_unknown_tube_is_named() -> None:
    h = Q()
    assert error_of(h.q.list_tasks, "nosuch", None) == (32, "Tube 'nosuch' not found")
    assert error_of(h.q.list_tasks, 5, None) == (32, "Tube '5' not found")
