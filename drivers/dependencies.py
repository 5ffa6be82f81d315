"""Dependencies between tasks: a task put with `after` waits until every parent
is done (acked), in any mix of tubes of one queue.

Owns: the put options `after` and `on_parent_failure`, the waiting state and
one persistent space shared by every tube (one row per child and parent):

    _queuebox_deps  (tube, task_id, parent_tube, parent_id, on_parent_failure)

A waiting task is buried in its tube (not takeable; peek shows `!`), with the
reason "waiting for N parents: tube/id, ..."; `queuebox.result` answers
"pending" for it. What becomes of it, drawn once:

    every parent acked ──────────────────────▶ kicked: ready, a fresh start
    a parent failed (buried, or deleted, ────┬─ "bury":   stays buried, reason
      expired, its tube dropped)             │            "parent T/ID failed: WHY"
                                             └─ "cancel": deleted
    an operator kicks or deletes it ─────────▶ its rows go (it no longer waits)

A child that failed (buried or cancelled) is a failed parent in turn, so a
failure runs down a whole chain. The rows are written in the same WAL batch
as the change that settles them, replicated and read back at a start.
Settling is deferred to the end of the entry point (`settle`, run by
Queue): a change never re-enters a tube in the middle of another change.
Must not touch: task tuples but through the tubes' drivers (settle does it
through `Settler`), the clock (`now` comes in), sockets.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef, Space

from .args import is_number, lua_tostring
from .errors import module_error

DEPS_SPACE = "_queuebox_deps"
BURY, CANCEL = "bury", "cancel"
ON_FAILURE = (BURY, CANCEL)
MAX_PARENTS = 1000
Key = tuple[str, int]  # (tube, task id)


class Settler(Protocol):
    """What settling needs of the queue (Queue implements it over its tubes)."""

    def task_status(self, key: Key) -> str | None: ...
    def kept_result(self, key: Key) -> tuple[str, str | None] | None: ...
    def reason(self, key: Key) -> str | None: ...
    def ready(self, key: Key, now: int) -> None: ...
    def fail(self, key: Key, reason: str, cancel: bool, now: int) -> None: ...


def name(key: Key) -> str:
    return f"{key[0]}/{key[1]}"


def parse_after(tube: str, raw: Any) -> list[Key]:
    """`after = {ID, ...}` (parents in the same tube) or `{{TUBE, ID}, ...}`, mixed."""
    if not isinstance(raw, list) or not 0 < len(raw) <= MAX_PARENTS:
        raise module_error(
            f"Invalid value of after: {lua_tostring(raw)} (a list of 1 to {MAX_PARENTS} "
            "task ids, or of {tube, id} pairs)"
        )
    parents: list[Key] = []
    for item in raw:
        if isinstance(item, list) and len(item) == 2 and isinstance(item[0], str):
            parent_tube, parent_id = item
        else:
            parent_tube, parent_id = tube, item
        if not is_number(parent_id) or parent_id < 0 or not float(parent_id).is_integer():
            raise module_error(f"Invalid value of after: {lua_tostring(item)}")
        if (parent_tube, int(parent_id)) not in parents:
            parents.append((parent_tube, int(parent_id)))
    return parents


def on_failure_of(opts: Mapping[Any, Any]) -> str:
    value = opts.get("on_parent_failure", BURY)
    if value not in ON_FAILURE:
        raise module_error(f"Invalid value of on_parent_failure: {lua_tostring(value)}")
    return str(value)


class Dependencies:
    """The queue's waiting tasks: rows mirrored as child -> parents and back."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.waiting: dict[Key, dict[Key, str]] = {}  # child -> {parent: on_failure}
        self.children: dict[Key, set[Key]] = {}  # parent -> its waiting children
        # Parents that finished since the last settle: (parent, None: done | why it failed).
        self.finished: list[tuple[Key, str | None]] = []
        self.gone: list[Key] = []  # waiting children kicked or deleted by someone else

    @property
    def active(self) -> bool:
        return bool(self.waiting)

    def space(self) -> Space:
        found = self.catalog.get(DEPS_SPACE)
        if found is not None:
            return found
        return self.catalog.create_space(
            DEPS_SPACE,
            (IndexDef("task", (0, 1, 2, 3)),),
            format=("tube", "task_id", "parent_tube", "parent_id", "on_parent_failure"),
        )

    # -- what the tubes report --
    def wait(self, child: Key, parents: list[Key], on_failure: str) -> None:
        space = self.space()
        for parent in parents:
            space.replace((*child, *parent, on_failure))
            self.children.setdefault(parent, set()).add(child)
        self.waiting[child] = dict.fromkeys(parents, on_failure)

    def parent_finished(self, parent: Key, failure: str | None) -> None:
        if parent in self.children:
            self.finished.append((parent, failure))

    def child_gone(self, child: Key) -> None:
        if child in self.waiting:
            self.gone.append(child)

    def tube_dropped(self, tube: str) -> None:
        for child in [c for c in self.waiting if c[0] == tube]:
            self._forget(child)
        for parent in [p for p in self.children if p[0] == tube]:
            self.finished.append((parent, "its tube was dropped"))

    # -- settling, at the end of an entry point --
    def settle(self, queue: Settler, now: int) -> None:
        while self.finished or self.gone:
            while self.gone:
                self._forget(self.gone.pop())
            if self.finished:
                parent, failure = self.finished.pop(0)
                for child in sorted(self.children.pop(parent, ())):
                    self._settle_child(queue, child, parent, failure, now)

    def _settle_child(
        self, queue: Settler, child: Key, parent: Key, failure: str | None, now: int
    ) -> None:
        parents = self.waiting.get(child)
        if parents is None:
            return
        on_failure = parents.pop(parent)
        self.space().delete((*child, *parent))
        if failure is None:
            if not parents:
                del self.waiting[child]
                queue.ready(child, now)
            return
        self._forget(child)
        queue.fail(child, f"parent {name(parent)} failed: {failure}", on_failure == CANCEL, now)

    def _forget(self, child: Key) -> None:
        """The child waits no more: its rows go."""
        parents = self.waiting.pop(child, None) or {}
        for parent in parents:
            self.space().delete((*child, *parent))
            siblings = self.children.get(parent)
            if siblings is not None:
                siblings.discard(child)
                if not siblings:
                    del self.children[parent]

    # -- a start --
    def load(self, queue: Settler) -> None:
        """The rows as the last process left them; children gone are forgotten,
        parents that finished meanwhile (or failed at the restart) are settled next."""
        found = self.catalog.get(DEPS_SPACE)
        if found is None:
            return
        for tube, task_id, parent_tube, parent_id, on_failure in list(found):
            child, parent = (tube, task_id), (parent_tube, parent_id)
            self.waiting.setdefault(child, {})[parent] = on_failure
            self.children.setdefault(parent, set()).add(child)
        for child in list(self.waiting):
            if queue.task_status(child) is None:
                self._forget(child)
        for parent in list(self.children):
            outcome = self._outcome(queue, parent)
            if outcome is not None:
                self.finished.append((parent, outcome[1]))

    def _outcome(self, queue: Settler, parent: Key) -> tuple[bool, str | None] | None:
        """(True, None): done; (False, why): failed; None: still to come."""
        status = queue.task_status(parent)
        if status == "!" and parent not in self.waiting:
            return False, queue.reason(parent) or "buried"
        if status is not None:
            return None
        kept = queue.kept_result(parent)
        if kept is None:
            return False, "gone"
        return (True, None) if kept[0] == "done" else (False, kept[1] or "buried")

    # -- a put --
    def resolve(self, queue: Settler, parents: list[Key]) -> tuple[list[Key], str | None]:
        """(parents still to come, why one failed or None) for a put with `after`;
        a parent that is gone without a kept result is refused."""
        pending: list[Key] = []
        for parent in parents:
            if queue.task_status(parent) is None and queue.kept_result(parent) is None:
                raise module_error(
                    f"Parent task {name(parent)} not found (gone, and its tube keeps no "
                    "result of it: result_ttl)"
                )
            outcome = self._outcome(queue, parent)
            if outcome is None:
                pending.append(parent)
            elif not outcome[0]:
                return pending, f"parent {name(parent)} failed: {outcome[1]}"
        return pending, None

    def rows(self) -> Iterator[tuple[Key, dict[Key, str]]]:
        yield from self.waiting.items()
