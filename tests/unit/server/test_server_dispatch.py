"""Function-name resolution, the registry's override rule, and the EVAL table."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from queuebox.drivers.callnames import CallPath
from queuebox.drivers.callnames import split_name as parse_name
from queuebox.protocol import encode_packed_data
from queuebox.server.core.dispatch import encode_answer
from queuebox.server.core.registry import Bound, CallContext, Registry, normalize_eval
from queuebox.server.settings.config import ADMIN, READ, WRITE
from queuebox.storage.packed import Packed, spliced


def triple(found: Bound | None) -> tuple[Any, str, str | None] | None:
    """What a name bound to: (handler, right, tube)."""
    return None if found is None else (found.call, found.right, found.tube)


def h_a(ctx: CallContext, args: list[Any]) -> list[Any]:
    return ["a"]


def h_b(ctx: CallContext, args: list[Any]) -> list[Any]:
    return ["b"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("queue.state", CallPath(("queue", "state"), None)),
        ("queue.tube.jobs:put", CallPath(("queue", "tube", "jobs"), "put")),
        ("box.info", CallPath(("box", "info"), None)),
        ("f", CallPath(("f",), None)),
        ("obj:m", CallPath(("obj",), "m")),
        ("queue.tube.jobs.put", CallPath(("queue", "tube", "jobs", "put"), None)),
    ],
)
def test_parse_name(name: str, expected: CallPath) -> None:
    assert parse_name(name) == expected


@pytest.mark.parametrize(
    "name", ["", ".", "a.", ".a", "a..b", "a:b:c", "a:b.c", "a[1]", "queue.tube['x']:put", ":m"]
)
def test_names_tarantool_cannot_resolve(name: str) -> None:
    assert parse_name(name) is None


def test_fixed_names_win_over_resolvers() -> None:
    registry = Registry()
    registry.register("queue.state", h_a, READ)
    registry.add_resolver(lambda name, path: Bound(h_b, WRITE))
    assert triple(registry.resolve("queue.state")) == (h_a, READ, None)
    assert triple(registry.resolve("queue.tube.jobs:put")) == (h_b, WRITE, None)


def test_resolvers_are_asked_in_order_until_one_answers() -> None:
    asked: list[str] = []

    def tubes(name: str, path: CallPath) -> Bound | None:
        asked.append(name)
        assert path == parse_name(name)  # split once, by the registry
        if path.objects[:2] == ("queue", "tube") and path.objects[2:] == ("jobs",):
            return Bound(h_a, WRITE) if path.method == "put" else None
        return None

    registry = Registry()
    registry.add_resolver(tubes)
    registry.add_resolver(lambda name, path: Bound(h_b, READ) if name == "other" else None)
    assert triple(registry.resolve("queue.tube.jobs:put")) == (h_a, WRITE, None)
    assert registry.resolve("queue.tube.q9:put") is None  # object missing
    assert registry.resolve("queue.tube.jobs:nosuch") is None  # method missing
    assert triple(registry.resolve("other")) == (h_b, READ, None)
    assert asked == ["queue.tube.jobs:put", "queue.tube.q9:put", "queue.tube.jobs:nosuch", "other"]


def test_malformed_names_never_reach_resolvers() -> None:
    registry = Registry()
    registry.add_resolver(lambda name, path: Bound(h_a, READ))
    assert registry.resolve("a..b") is None
    assert triple(registry.resolve("a")) == (h_a, READ, None)


def test_override_must_be_explicit() -> None:
    registry = Registry()
    registry.register("queue.state", h_a, READ)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("queue.state", h_b, READ)
    registry.register("queue.state", h_b, READ, replace=True)
    assert triple(registry.resolve("queue.state")) == (h_b, READ, None)
    assert registry.has("queue.state") and not registry.has("queue.stats")


def test_access_class_is_checked_at_registration() -> None:
    registry = Registry()
    with pytest.raises(ValueError, match="access"):
        registry.register("f", h_a, "execute")
    with pytest.raises(ValueError, match="function name"):
        registry.register("a..b", h_a, READ)


def test_eval_texts_match_with_whitespace_folded() -> None:
    registry = Registry()
    registry.register_eval(
        "local name, type, cfg = ... ; queue.create_tube(name, type, cfg)", h_a, ADMIN
    )
    sent = "local name, type, cfg = ...\n  ;\tqueue.create_tube(name,  type, cfg)\n"
    assert triple(registry.resolve_eval(sent)) == (h_a, ADMIN, None)
    assert registry.has_eval(sent)
    assert registry.resolve_eval("return queue.create_tube()") is None
    assert normalize_eval("  return   1 ") == "return 1"


def test_eval_override_must_be_explicit() -> None:
    registry = Registry()
    registry.register_eval("return queue.state()", h_a, READ)
    with pytest.raises(ValueError, match="already registered"):
        registry.register_eval("return  queue.state()", h_b, READ)
    registry.register_eval("return queue.state()", h_b, READ, replace=True)
    assert triple(registry.resolve_eval("return queue.state()")) == (h_b, READ, None)


def test_a_name_is_resolved_once_until_forgotten() -> None:
    asked: list[str] = []

    def resolver(name: str, path: CallPath) -> Bound | None:
        asked.append(name)
        return Bound(h_b, WRITE) if name.endswith(":put") else None

    registry = Registry()
    registry.register("queue.state", h_a, READ)
    registry.add_resolver(resolver)
    for _ in range(3):
        assert triple(registry.resolve("queue.tube.jobs:put")) == (h_b, WRITE, None)
    assert asked == ["queue.tube.jobs:put"]  # one resolution, kept
    assert registry.resolve("queue.tube.jobs:nosuch") is None
    assert registry.resolve("queue.tube.jobs:nosuch") is None
    assert asked.count("queue.tube.jobs:nosuch") == 2  # a miss is never kept
    registry.forget()
    assert triple(registry.resolve("queue.tube.jobs:put")) == (h_b, WRITE, None)
    assert asked.count("queue.tube.jobs:put") == 2
    # fixed names survive forget()
    assert triple(registry.resolve("queue.state")) == (h_a, READ, None)


@pytest.mark.parametrize(
    "task_id", [0, 1, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 2**32 - 1, 2**32, 2**64 - 1]
)
@pytest.mark.parametrize("status", ["r", "t", "!", "~", "-"])
def test_a_task_answer_is_the_bytes_msgpack_writes(task_id: int, status: str) -> None:
    """A task's reply (its head written by hand, encode_answer) is byte for byte
    the reply the general encoder (`spliced`) gives, at every uint width."""
    data = Packed(msgpack.packb({"k": [1, "x" * 40]}))
    task = (task_id, status, data)
    expected = encode_packed_data(7, 3, 1, spliced([task]))
    assert encode_answer(7, 3, [task]) == expected
    assert encode_answer(7, 3, [list(task)]) == expected


@pytest.mark.parametrize(
    ("task_id", "status"),
    [(True, "r"), (-1, "r"), (1.5, "r"), (1, "rt"), (1, "é"), (1, None), ("1", "r")],
)
def test_an_answer_the_head_does_not_cover_goes_through_the_packer(
    task_id: Any, status: Any
) -> None:
    data = Packed(msgpack.packb("x"))
    task = (task_id, status, data)
    assert encode_answer(7, 3, [task]) == encode_packed_data(7, 3, 1, spliced([task]))
