"""The queue's spaces, readable: SELECT, the `_vspace`/`_vindex` views, and no writes.

Owns: which spaces a client sees (the module's, drivers/schema.py: `_queue`,
the four bookkeeping spaces, each tube's task space; to users with the read
right), their ids (catalog spaces keep theirs; the bookkeeping ones, which
queuebox keeps as waiters, ownership and sessions, get fixed ids below the
catalog's), the rows of `_vspace` (281) and `_vindex` (289) that describe
them, SELECT on all of these with Tarantool's tree-iterator rules and errors,
and the answer to a write into one of them. Must not touch: the queue or
the spaces it reads (nothing here changes data), sockets.

A SELECT reads a module index in its own order: through the storage index
when queuebox's has the same parts (a tube's task_id, status, utube...),
else the candidate rows sorted by the module's key (a ttl tube's `watch`,
the bookkeeping spaces: small, or narrowed by the status they start with).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from itertools import dropwhile, islice, takewhile
from typing import Any

from queuebox.drivers import reads
from queuebox.drivers.schema import (
    BOOKKEEPING,
    CONSUMERS,
    QUEUE,
    TAKEN,
    SpaceSchema,
    bookkeeping_rows,
    task_space,
)
from queuebox.protocol import ErrorCode
from queuebox.storage.catalog import Catalog
from queuebox.storage.space import Space

from ..access.rights import Grant
from ..runtime.errors import CallError
from ..settings.config import READ
from .app import App

Row = tuple[Any, ...]
ADMIN_ID = 1  # the owner Tarantool shows for spaces the module made
BOOKKEEPING_IDS = dict(zip((s.name for s in BOOKKEEPING), range(508, 512), strict=True))
VSPACE, VINDEX = 281, 289
EMPTY_VIEWS = {277: "_vcollation", 341: "_vspace_sequence"}  # nothing of the queue's in them
EQ, REQ, ALL, LT, LE, GE, GT = 0, 1, 2, 3, 4, 5, 6
TREE_ITERATORS = 11  # BITS_*, OVERLAPS, NEIGHBOR: known, not for a tree

# The views themselves, as Tarantool 2.6 defines them (format, indexes).
VIEW_SCHEMAS = {
    VSPACE: SpaceSchema(
        "_vspace",
        (
            ("id", "unsigned"),
            ("owner", "unsigned"),
            ("name", "string"),
            ("engine", "string"),
            ("field_count", "unsigned"),
            ("flags", "map"),
            ("format", "array"),
        ),  # fmt: skip
        (
            ("primary", ((0, "unsigned"),), True),
            ("owner", ((1, "unsigned"),), False),
            ("name", ((2, "string"),), True),
        ),
    ),
    VINDEX: SpaceSchema(
        "_vindex",
        (
            ("id", "unsigned"),
            ("iid", "unsigned"),
            ("name", "string"),
            ("type", "string"),
            ("opts", "map"),
            ("parts", "array"),
        ),  # fmt: skip
        (
            ("primary", ((0, "unsigned"), (1, "unsigned")), True),
            ("name", ((0, "unsigned"), (2, "string")), True),
        ),
    ),
}
# Index ids where they are not 0, 1, 2...: _vindex has no index 1.
INDEX_IDS: dict[int, tuple[int, ...]] = {VINDEX: (0, 2)}
KEY_TYPES: dict[str, Callable[[Any], bool]] = {
    "unsigned": lambda v: type(v) is int and v >= 0,
    "string": lambda v: type(v) is str,
    "boolean": lambda v: type(v) is bool,
}


class Visible:
    """One space a client may read: its id, what Tarantool shows of it, its rows."""

    def __init__(
        self,
        sid: int,
        schema: SpaceSchema,
        source: Space | None,
        engine: str,
        tube: str | None = None,
    ) -> None:
        self.id = sid
        self.schema = schema
        self.source = source  # the catalog space; None: a bookkeeping one
        self.engine = engine
        self.tube = tube  # a tube's space: reading it needs the read right on the tube

    def readable(self, grant: Grant) -> bool:
        return grant.allows(READ, self.tube)


class Spaces:
    def __init__(self, app: App, catalog: Catalog) -> None:
        self.app = app
        self.catalog = catalog

    def _catalog_space(self, name: str) -> Space | None:
        return self.catalog.get(name)

    def visible(self) -> list[Visible]:
        registry = self._catalog_space(QUEUE.name)
        if registry is None:
            return []
        out = [Visible(registry.id, QUEUE, registry, "memtx")]
        out += [Visible(BOOKKEEPING_IDS[s.name], s, None, "memtx") for s in BOOKKEEPING]
        for tube in reads.tubes(self.catalog).values():
            space = reads.task_space(self.catalog, tube)
            if space is None:
                continue
            opts = tube.opts if isinstance(tube.opts, dict) else {}
            schema = task_space(tube.space, tube.driver, space.temporary)
            engine = str(opts.get("engine") or "memtx")
            out.append(Visible(space.id, schema, space, engine, tube.name))
        return out

    # -- the views --
    def view_rows(self, view: int, grant: Grant) -> list[Row]:
        """The rows of a view: the views themselves (every user may read them, as
        Tarantool's public role does), then the spaces `grant` may read."""
        shown = [Visible(sid, schema, None, "sysview") for sid, schema in VIEW_SCHEMAS.items()]
        shown += [v for v in self.visible() if v.readable(grant)]
        rows: list[Row] = []
        for v in shown:
            s = v.schema
            if view == VSPACE:
                flags = {"temporary": True} if s.temporary else {}
                fmt = [{"name": name, "type": kind} for name, kind in s.format]
                rows.append((v.id, ADMIN_ID, s.name, v.engine, 0, flags, fmt))
            else:
                iids = INDEX_IDS.get(v.id, range(len(s.indexes)))
                for iid, (name, parts, unique) in zip(iids, s.indexes, strict=True):
                    keys = [[field, kind] for field, kind in parts]
                    rows.append((v.id, iid, name, "tree", {"unique": unique}, keys))
        return rows

    # -- SELECT --
    def select(
        self, grant: Grant, user: str, space_id: int, index_id: int,
        key: list[Any], iterator: int, offset: int, limit: int,
    ) -> list[Row]:  # fmt: skip
        if space_id in EMPTY_VIEWS:
            return []
        if space_id in VIEW_SCHEMAS:
            view = Visible(space_id, VIEW_SCHEMAS[space_id], None, "sysview")
            rows = self.view_rows(space_id, grant)
            return _select(view, rows, None, index_id, key, iterator, offset, limit)
        found = next((v for v in self.visible() if v.id == space_id), None)
        if found is None:
            raise CallError(ErrorCode.ER_NO_SUCH_SPACE, f"Space '{space_id}' does not exist")
        if not found.readable(grant):
            raise denied("Read", found.schema.name, user)
        source = found.source
        kept = bookkeeping_rows(self.app.changes.queue, found.schema) if source is None else None
        if found.tube is None and grant.limited(READ):
            # Rows about tubes the user may not read are left out, as statistics() does.
            every: Iterable[Row] = kept if kept is not None else (source or ())
            kept = [row for row in every if self._shown(row, found, grant)]
            source = None
        return _select(found, kept, source, index_id, key, iterator, offset, limit)

    def _shown(self, row: Row, found: Visible, grant: Grant) -> bool:
        name = found.schema.name
        if name == QUEUE.name:
            return grant.allows(READ, reads.row_tube(row))
        if name in (CONSUMERS.name, TAKEN.name):
            column = 2 if name == CONSUMERS.name else 0
            return grant.allows(READ, reads.tube_names(self.catalog).get(row[column], ""))
        return True  # sessions: no tube's data

    def refuse_write(self, space_id: int | None, user: str) -> CallError:
        """What a write into one of these spaces answers: queue data changes only
        through queue calls (Tarantool says this to a user without the write right)."""
        if space_id in VIEW_SCHEMAS or space_id in EMPTY_VIEWS:
            name = (
                VIEW_SCHEMAS[space_id].name if space_id in VIEW_SCHEMAS else EMPTY_VIEWS[space_id]
            )
            return CallError(ErrorCode.ER_VIEW_IS_RO, f"View '{name}' is read-only")
        found = next((v for v in self.visible() if v.id == space_id), None)
        if found is None:
            return CallError(ErrorCode.ER_NO_SUCH_SPACE, f"Space '{space_id}' does not exist")
        return denied("Write", found.schema.name, user)


def denied(what: str, space: str, user: str) -> CallError:
    return CallError(
        ErrorCode.ER_ACCESS_DENIED, f"{what} access to space '{space}' is denied for user '{user}'"
    )


def _select(
    found: Visible, rows: list[Row] | None, source: Space | None, index_id: int,
    key: list[Any], iterator: int, offset: int, limit: int,
) -> list[Row]:  # fmt: skip
    schema = found.schema
    iids = INDEX_IDS.get(found.id, tuple(range(len(schema.indexes))))
    if index_id not in iids:
        raise CallError(
            ErrorCode.ER_NO_SUCH_INDEX_ID,
            f"No index #{index_id} is defined in space '{schema.name}'",
        )
    name, parts, unique = schema.indexes[iids.index(index_id)]
    if not 0 <= iterator <= GT:
        if iterator <= TREE_ITERATORS:
            raise CallError(
                ErrorCode.ER_ITERATOR_TYPE,
                f"Index '{name}' (TREE) of space '{schema.name}' ({found.engine}) "
                "does not support requested iterator type",
            )
        raise CallError(ErrorCode.ER_ILLEGAL_PARAMS, "Illegal parameters, Invalid iterator type")
    _check_key(key, parts)
    fields = [field for field, _ in parts]
    if not unique:  # Tarantool orders a non-unique index by the primary key after its own
        fields += [f for f, _ in schema.indexes[0][1] if f not in fields]
    prefix = tuple(key)
    ordered = _ordered(rows, source, tuple(fields), prefix, iterator)
    width = len(prefix)

    def head(row: Row) -> tuple[Any, ...]:
        return tuple(row[f] for f in fields[:width])

    stop = min(offset + limit, sys.maxsize)  # asynctnt asks for 2^64 - 1 rows
    return list(islice(_pick(ordered, head, prefix, iterator), min(offset, stop), stop))


def _check_key(key: list[Any], parts: tuple[tuple[int, str], ...]) -> None:
    if len(key) > len(parts):
        raise CallError(
            ErrorCode.ER_KEY_PART_COUNT,
            f"Invalid key part count (expected [0..{len(parts)}], got {len(key)})",
        )
    for n, (value, (_, kind)) in enumerate(zip(key, parts, strict=False)):
        check = KEY_TYPES.get(kind)
        if check is not None and not check(value):
            raise CallError(
                ErrorCode.ER_KEY_PART_TYPE,
                f"Supplied key type of part {n} does not match index part type: expected {kind}",
            )


def _ordered(
    rows: list[Row] | None,
    source: Space | None,
    fields: tuple[int, ...],
    prefix: Row,
    iterator: int,
) -> Iterator[Row]:
    """The candidate rows in the index's order (descending for REQ, LE, LT)."""
    reverse = iterator in (REQ, LE, LT)
    exact = iterator in (EQ, REQ)
    if source is not None:
        same = next((i for i in source.indexes.values() if _parts(i, source) == fields), None)
        if same is not None:  # queuebox's own index has the module's order
            return same.iterate(prefix if exact else (), reverse)
        rows = _narrowed(source, fields, prefix, exact)
    assert rows is not None
    return iter(sorted(rows, key=lambda row: tuple(row[f] for f in fields), reverse=reverse))


def _parts(index: Any, source: Space) -> tuple[int, ...]:
    """The fields a storage index orders by: a non-unique one's, then the primary key's."""
    parts = tuple(index.definition.parts)
    if index.unique:
        return parts
    return parts + tuple(p for p in source.primary.definition.parts if p not in parts)


def _narrowed(source: Space, fields: tuple[int, ...], prefix: Row, exact: bool) -> list[Row]:
    """Rows that may match: those of one status when the index starts with the
    status and the key gives it (a tube's `watch`), else every row."""
    status = source.indexes.get("status")
    if exact and prefix and fields[0] == 1 and status is not None:
        return list(status.iterate(prefix[:1]))
    return list(source)


def _pick(
    rows: Iterable[Row], head: Callable[[Row], Row], key: Row, iterator: int
) -> Iterable[Row]:
    """Tarantool's tree iterators over rows in index order (descending for REQ, LE, LT)."""
    if not key:
        return rows
    if iterator in (EQ, REQ):
        before = (lambda r: head(r) < key) if iterator == EQ else (lambda r: head(r) > key)
        return takewhile(lambda r: head(r) == key, dropwhile(before, rows))
    passed: Callable[[Row], bool] = {
        ALL: lambda r: head(r) < key,  # ALL with a key reads as GE
        GE: lambda r: head(r) < key,
        GT: lambda r: head(r) <= key,
        LE: lambda r: head(r) > key,
        LT: lambda r: head(r) >= key,
    }[iterator]
    return dropwhile(passed, rows)
