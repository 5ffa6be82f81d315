"""The set of spaces by name and id: create, drop, look up.

Owns: which spaces exist and the hooks through which space definitions
(create/drop) and tuple changes of persistent spaces are reported to whoever
journals them (the engine). Must not touch files, the clock or asyncio.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .space import ChangeHook, IndexDef, Space, SpaceDef, StorageError

# (op, definition): op is "create_space" or "drop_space".
DdlHook = Callable[[str, SpaceDef], None]
# (op, space): the same events with the Space object itself, which the engine
# keeps so that a failed write can put a dropped space back with its tuples.
SpaceHook = Callable[[str, Space], None]


class SpaceExists(StorageError):
    def __init__(self, name: str) -> None:
        super().__init__(f"Space '{name}' already exists")
        self.name = name


class NoSuchSpace(StorageError):
    def __init__(self, name: str) -> None:
        super().__init__(f"Space '{name}' does not exist")
        self.name = name


class Catalog:
    """Spaces by name. Ids are allocated from 512 up, like Tarantool's user spaces."""

    FIRST_ID = 512

    def __init__(
        self,
        on_change: ChangeHook | None = None,
        on_ddl: DdlHook | None = None,
        on_space: SpaceHook | None = None,
    ) -> None:
        self._by_name: dict[str, Space] = {}
        self.on_change = on_change
        self.on_ddl = on_ddl
        self.on_space = on_space
        # More that want to know a space was created or dropped (op, space), after
        # the hooks above: a server's schema version moves with them.
        self.ddl_listeners: list[SpaceHook] = []

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Space]:
        return iter(list(self._by_name.values()))

    def get(self, name: str) -> Space | None:
        return self._by_name.get(name)

    def space(self, name: str) -> Space:
        try:
            return self._by_name[name]
        except KeyError:
            raise NoSuchSpace(name) from None

    def next_id(self) -> int:
        return max((s.id for s in self._by_name.values()), default=self.FIRST_ID - 1) + 1

    def create_space(
        self,
        name: str,
        indexes: list[IndexDef] | tuple[IndexDef, ...],
        *,
        temporary: bool = False,
        format: tuple[str, ...] = (),
        opts: dict[str, Any] | None = None,
    ) -> Space:
        if name in self._by_name:
            raise SpaceExists(name)
        definition = SpaceDef(
            id=self.next_id(),
            name=name,
            indexes=tuple(indexes),
            temporary=temporary,
            format=format,
            opts=dict(opts or {}),
        )
        return self.add(definition, log=True)

    def add(self, definition: SpaceDef, *, log: bool) -> Space:
        """Register a space from its definition (recovery passes log=False)."""
        if definition.name in self._by_name:
            raise SpaceExists(definition.name)
        space = Space(definition, self.on_change)
        self._by_name[definition.name] = space
        if log:
            self._report("create_space", space)
        return space

    def relayout(self, name: str, wanted: Sequence[IndexDef]) -> Space:
        """The space `name`, its indexes laid out in memory as `wanted` says
        where they differ from it only in `group` or `hash` (FORMAT.md §5.1: how
        an index keeps its keys in memory, never what it holds).

        A space made by an older release comes back from its files with the
        indexes it was made with, and its owner (a queue driver, the keys of
        exactly-once puts) reads them by the layout of today's definitions.
        Same parts, same uniqueness: the same tuples in the same order, so
        nothing is logged; the next snapshot holds the new definition. Returns
        the space in place now (the same object when nothing differed)."""
        space = self.space(name)
        by_name = {d.name: d for d in wanted}
        defs = list(space.definition.indexes)
        for i, have in enumerate(defs):
            want = by_name.get(have.name)
            same = want is not None and (want.parts, want.unique) == (have.parts, have.unique)
            if same and want is not None and (want.group, want.hash) != (have.group, have.hash):
                defs[i] = want
        if defs == list(space.definition.indexes):
            return space
        again = Space(dataclasses.replace(space.definition, indexes=tuple(defs)), space.on_change)
        again.load_rows(space.copy_rows())
        self._by_name[name] = again
        return again

    def drop_space(self, name: str, *, log: bool = True) -> None:
        space = self.space(name)
        del self._by_name[name]
        if log:
            self._report("drop_space", space)

    def restore_space(self, space: Space) -> None:
        """Put back a dropped Space object as it is, tuples and all (rollback); not logged."""
        if space.name in self._by_name:
            raise SpaceExists(space.name)
        self._by_name[space.name] = space

    def _report(self, op: str, space: Space) -> None:
        if self.on_ddl is not None:
            self.on_ddl(op, space.definition)
        if self.on_space is not None:
            self.on_space(op, space)
        for listener in self.ddl_listeners:
            listener(op, space)
