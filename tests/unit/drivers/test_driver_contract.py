"""The driver contract: a driver class missing a required method is refused at
registration, on both builds (compiled, `@abstractmethod` is not enforced: the
check is driver.check_driver's own); drivers written in Python, as plugins
write them, subclass the compiled classes and run."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from queuebox.drivers.driver import (
    DECLARED,
    DRIVERS,
    READY,
    REQUIRED_METHODS,
    TAKEN,
    TaskStore,
    Tuple,
    register_driver,
)
from queuebox.drivers.errors import QueueError
from queuebox.drivers.fifo import Fifo
from queuebox.drivers.untimed import UntimedStore
from tests.unit.drivers.queue_harness import Q


class NoPut(UntimedStore):
    """Everything a fifo has except put: the base class does not stand in for it."""

    TYPE = "noput"

    def next_ready(self) -> Tuple | None:
        return None


class NoNextReady(UntimedStore):
    """A fifo's put, but not how to find the next ready task (UntimedStore's declaration)."""

    TYPE = "nonext"

    def put(self, data: Any, opts: dict[Any, Any], now: int) -> Tuple | None:
        return self._insert((self.next_id(), READY, data))


class NoTimers(Fifo):
    pass


class Stack(TaskStore):
    """A whole driver on TaskStore alone, in Python: the newest ready task first,
    no timers (delays refused), as a plugin could write it."""

    TYPE = "stack"
    TIMED = False

    def put(self, data: Any, opts: dict[Any, Any], now: int) -> Tuple | None:
        task = self._insert((self.next_id(), READY, data))
        self.events.stat("put")
        return task

    def take(self, now: int) -> Tuple | None:
        task = self.by_status.last((READY,))
        if task is None:
            return None
        self.events.stat("take")
        return self._update(task[0], {1: TAKEN}, task)

    def touch(self, task_id: int, delta_us: int) -> Tuple:
        raise QueueError(32, "stack queue does not support touch")

    def release(self, task_id: int, opts: dict[Any, Any], now: int, why: str = "") -> Tuple:
        self.events.stat("release")
        return self._update(task_id, {1: READY})

    def bury(self, task_id: int) -> Tuple:
        self.events.stat("bury")
        return self._update(task_id, {1: "!"})

    def next_deadline(self) -> int | None:
        return None

    def fire(self, now: int) -> bool:
        return False


def test_a_driver_without_put_is_refused() -> None:
    with pytest.raises(QueueError) as caught:
        register_driver("noput", NoPut)
    assert caught.value.message == (
        'The "noput" driver does not have an implementation of method "put".'
    )
    assert "noput" not in DRIVERS


@pytest.mark.parametrize("method", REQUIRED_METHODS)
def test_every_required_method_is_checked(method: str) -> None:
    # A class that hides one required method (set to None) is refused for that method.
    deficient: type[Any] = type(f"No_{method}", (Fifo,), {method: None})
    with pytest.raises(QueueError, match=f'method "{method}"'):
        register_driver(f"no_{method}", deficient)
    assert f"no_{method}" not in DRIVERS


def test_a_complete_driver_registers_once() -> None:
    try:
        register_driver("fifo_copy", NoTimers)
        assert DRIVERS["fifo_copy"] is NoTimers
        with pytest.raises(QueueError, match='overriding registered driver "fifo_copy"'):
            register_driver("fifo_copy", NoTimers)
    finally:
        DRIVERS.pop("fifo_copy", None)


def test_a_driver_without_next_ready_is_refused() -> None:
    with pytest.raises(QueueError) as caught:
        register_driver("nonext", NoNextReady)
    assert caught.value.message == (
        'The "nonext" driver does not have an implementation of method "next_ready".'
    )
    assert "nonext" not in DRIVERS


def test_the_declared_methods_are_the_abstract_ones() -> None:
    # DECLARED, read by check_driver, says what `@abstractmethod` says in the source.
    abstract: dict[str, set[str]] = {}
    # The source tree's files: in the compiled run `driver` is a .so, maybe elsewhere.
    for path in (Path(__file__).resolve().parents[3] / "drivers").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and any(
                        isinstance(d, ast.Name) and d.id == "abstractmethod"
                        for d in item.decorator_list
                    ):
                        abstract.setdefault(node.name, set()).add(item.name)
    assert {cls.__name__: set(names) for cls, names in DECLARED.items()} == abstract


def test_a_python_driver_on_taskstore_alone_runs() -> None:
    register_driver("stack", Stack)
    try:
        h = Q()
        h.create("s", "stack")
        assert [h.put("s", d) for d in ("a", "b", "c")] == [
            [0, "r", "a"],
            [1, "r", "b"],
            [2, "r", "c"],
        ]
        assert h.take("s") == [2, "t", "c"]
        assert h.one("s", "release", 2) == [2, "r", "c"]
        assert h.take("s") == [2, "t", "c"]
        assert h.one("s", "ack", 2) == [2, "-", "c"]
        assert h.take("s") == [1, "t", "b"]
        assert h.one("s", "bury", 0) == [0, "!", "a"]
        assert h.one("s", "kick", 1) == 1
        assert h.stats("s")["tasks"] == {
            "ready": 1,
            "taken": 1,
            "buried": 0,
            "delayed": 0,
            "done": 1,
            "total": 2,
        }
        restarted = h.restart(via_msgpack=True)
        assert restarted.status("s", 1) == "r"  # a restart gives the taken task back
    finally:
        DRIVERS.pop("stack", None)


def test_a_driver_class_is_a_subclass_only_of_its_own_bases() -> None:
    # Compiled, while TaskStore was an ABC, every driver class shared ABC's
    # subclass cache: once FifoTtl had been checked as a TaskStore (at its
    # registration), issubclass(FifoTtl, UntimedStore) said True, and the web
    # console called a fifottl tube's oldest ready age an estimate.
    from queuebox.drivers.heads import UtubeRules
    from queuebox.drivers.ttl import TtlStore

    bases = (TaskStore, UntimedStore, TtlStore, UtubeRules, *DRIVERS.values())
    for cls in DRIVERS.values():
        assert issubclass(cls, TaskStore)
        for base in bases:
            assert issubclass(cls, base) == (base in cls.__mro__), (cls, base)
