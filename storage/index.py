"""Ordered indexes over tuples, in memory: the primary index and secondary ones.

Owns: how one index stores its entries and answers lookups (get, first, last,
iterate by prefix), and the bulk build used by recovery; what an index is
(its definition, its key, its errors) is indexdef.py's. Space (space.py)
decides when entries are added and removed; this module never calls back
into a space.

Must not touch: files, the clock, asyncio, the WAL.

An index is an ordered map from an entry key to the row the space holds for
a tuple (rows.py: in a persistent space its msgpack bytes, decoded for the
reader; in a temporary one the tuple itself), in ordered.py's maps: O(1)
for keys that arrive in order, as a queue's do. The entry key is the
indexed fields; a non-unique index appends the primary key fields, so entry
keys are unique and no list of tuples per key is needed. A one-field key is
stored as the bare value, not a 1-tuple: a 48-byte object less per row. A
primary index over one field keeps its rows in a list by key while the keys
are ints in about their order (dense.py: task ids): 8 bytes a task.

A secondary index whose entry key holds the whole primary key (a queue's
status and watch indexes) keeps no dict of its own: its maps are
OrderedKeys, and a key's row is the primary index's row with that primary
key, if that row still has this entry key (and group); the fields are read
from the row's head (RowCodec.fields_getter), not by decoding it. A queue
then pays for one slot per task in its primary index and one run entry per
index.

A grouped index (IndexDef.group = n) keeps one ordered map per value of its
first n fields, keyed by the rest: the fields that take few values (a
task's status; a status and a utube) pick the map, and within one map the
ids arrive in order even when tasks move between statuses. So "the first
ready task (of this utube)" is a dict lookup and the head of one map, and a
map that empties goes away with whatever it had walked past.

The public behaviour is that of an ordered map from the key (a tuple of the
indexed fields) to the tuple; keys of one index must be mutually comparable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from operator import itemgetter
from typing import Any

from .dense import DenseMap
from .indexdef import TOP, DuplicateKey, IndexDef, Key, Tuple, key_getter
from .ordered import ABSENT, HashMap, OrderedKeys, OrderedMap
from .orderedrows import OrderedRows
from .rows import PLAIN, Codec

Map = OrderedMap | DenseMap  # what one group of an index keeps


def _no_group(t: Tuple) -> None:
    return None


def _none(key: Any) -> None:
    return None


def _same(key: Any) -> Any:
    return key


class Index:
    """An ordered map from entry key to tuple, in one map or one per group."""

    def __init__(
        self,
        definition: IndexDef,
        primary_parts: tuple[int, ...],
        primary: PrimaryIndex | None = None,
        codec: Codec = PLAIN,
    ) -> None:
        self.definition = definition
        self._codec = codec
        self.name = definition.name
        self.unique = definition.unique
        parts = definition.parts
        if not self.unique:
            parts = parts + tuple(p for p in primary_parts if p not in parts)
        self._parts = parts
        self._width = len(parts)  # fields of an entry key, unique per tuple
        self._user_key: Callable[[Tuple], Key] = key_getter(definition.parts)
        # Fields of the group key: at least one field stays for the key within.
        self._gw = gw = max(0, min(definition.group, len(parts) - 1))
        self._group_of: Callable[[Tuple], Any] = itemgetter(*parts[:gw]) if gw else _no_group
        # The key within a group: the bare field when there is one, else a tuple.
        self._single = len(parts) - gw == 1
        self._inner: Callable[[Tuple], Any] = itemgetter(*parts[gw:])
        # Tuples found through the primary index (the module doc): the primary
        # key's place in the key within a group, and the primary's dict lookup.
        within = parts[gw:]
        self._by_primary = primary is not None and all(p in within for p in primary_parts)
        # Whether a change can collide with another tuple here: a unique entry
        # key that does not hold the primary key (one that does is unique when
        # the primary is). The space asks only these indexes, per change.
        self.checks_unique = self.unique and not self._by_primary
        self._primary_get: Callable[[Any], Any] = _none
        self._pk_of: Callable[[Any], Any] = _same
        # The same fields read from a row (rows.py): a row's key within its
        # group, its group, its bare primary key.
        self._row_inner = codec.fields_getter(within)
        self._row_group: Callable[[Any], Any] = codec.fields_getter(parts[:gw]) if gw else _none
        self._row_pk: Callable[[Any], Any] = codec.fields_getter(primary_parts)
        if primary is not None and self._by_primary:
            self._primary_get = primary.getter()  # rows
            if not self._single:
                self._pk_of = itemgetter(*(within.index(p) for p in primary_parts))
        self._groups: dict[Any, Map] = {} if gw else {None: self._new_map(None)}
        self._kept: Any = None  # the group last emptied, its map kept (_emptied)

    def key_of(self, t: Tuple) -> Key:
        return self._user_key(t)

    def __len__(self) -> int:
        return sum(map(len, self._groups.values()))

    def _group_key(self, key: Key) -> Any:
        """The group of a key at least as long as the group key."""
        gw = self._gw
        return None if not gw else key[0] if gw == 1 else key[:gw]

    def get(self, key: Key) -> Tuple | None:
        """The tuple with exactly this key (unique indexes), else None."""
        if not self.unique:
            return self.first(key)
        if len(key) != self._width:
            return None
        found = self._groups.get(self._group_key(key))
        if found is None:
            return None
        gw = self._gw
        return self._tuple(found.get(key[gw] if self._single else key[gw:]))

    def _tuple(self, row: Any) -> Tuple | None:
        return None if row is None else self._codec.decode(row)

    def first(self, prefix: Key = ()) -> Tuple | None:
        """The smallest tuple whose key starts with `prefix` (all tuples for ())."""
        # Exactly a group (a status; a status and a utube) is the hot one: every
        # take asks it. A whole map's first goes through first_key, which trims
        # the entries its head walked past (a walk from elsewhere only skips them).
        gw = self._gw
        if len(prefix) == gw:
            found = self._groups.get(self._group_key(prefix))
            return None if found is None else self._tuple(found.first_value())
        return next(self.iterate(prefix), None)

    def first_key(self, group: Key = ()) -> Key | None:
        """The key of first(group), None if it has none, for a whole group key
        (() without groups): the key alone is read from the row, not the
        tuple (a ttl tube's next deadline, asked after every change)."""
        if len(group) != self._gw:
            raise ValueError("first_key takes a whole group key")
        found = self._groups.get(self._group_key(group))
        inner = ABSENT if found is None else found.first_key()
        if inner is ABSENT:
            return None
        return tuple(group) + ((inner,) if self._single else inner)

    def last(self, prefix: Key = ()) -> Tuple | None:
        """The greatest tuple whose key starts with `prefix`."""
        if len(prefix) == self._gw:
            found = self._groups.get(self._group_key(prefix))
            return None if found is None else self._tuple(found.get(found.last_key()))
        return next(self.iterate(prefix, reverse=True), None)

    def iterate(self, prefix: Key = (), reverse: bool = False) -> Iterator[Tuple]:
        """Tuples whose key starts with `prefix`, in key order (or reversed)."""
        n, gw, groups = len(prefix), self._gw, self._groups
        if n > self._width:
            return  # no key is that long
        if n >= gw:
            found = groups.get(self._group_key(prefix))
            if found is not None:
                yield from self._in_group(found, prefix[gw:], reverse)
            return
        # A prefix shorter than the group key: every group it starts, in order.
        keys = [(g,) if gw == 1 else g for g in groups]
        for key in sorted((k for k in keys if k[:n] == prefix), reverse=reverse):
            yield from self._in_group(groups[key[0] if gw == 1 else key], (), reverse)

    def iterate_after(self, group: Key, after: Key) -> Iterator[Tuple]:
        """Tuples of one group (its whole group key; () for an index without
        groups) whose key is greater than `after`, a whole key of that group,
        in key order: a page that starts where the last one ended, found by
        bisection rather than by walking the pages before it."""
        gw = self._gw
        if len(group) != gw or len(after) != self._width or tuple(after[:gw]) != tuple(group):
            raise ValueError("iterate_after takes a whole group key and a whole key in it")
        found = self._groups.get(self._group_key(group))
        if found is None:
            return
        low = after[gw] if self._single else tuple(after[gw:])
        get, decode = found.get, self._codec.decode
        for key in found.keys(low):
            if key != low:
                yield decode(get(key))

    def count(self, prefix: Key) -> int:
        """How many tuples' keys start with `prefix`: a group's size when the
        prefix is a group key or part of one, else by walking."""
        n, gw, groups = len(prefix), self._gw, self._groups
        if n > gw:
            return sum(1 for _ in self.iterate(prefix))
        if n == gw:
            found = groups.get(self._group_key(prefix))
            return 0 if found is None else len(found)
        keys = ((g if gw > 1 else (g,), m) for g, m in groups.items())
        return sum(len(m) for key, m in keys if key[:n] == prefix)

    def group_keys(self) -> list[Key]:
        """The whole group keys that have a tuple, in no order (() for an index
        without groups that has one): which utubes hold tasks, without a
        walk over the tasks."""
        gw = self._gw
        return [(g,) if gw == 1 else g if gw else () for g, found in self._groups.items() if found]

    def _in_group(self, found: Map, prefix: Key, reverse: bool) -> Iterator[Tuple]:
        if not prefix:
            keys = found.keys(reverse=reverse)
        elif self._single:
            keys = iter((prefix[0],) if prefix[0] in found else ())
        else:
            keys = found.keys(prefix, prefix + (TOP,), reverse=reverse)
        get, decode = found.get, self._codec.decode
        for key in keys:
            yield decode(get(key))

    def _new_map(self, group: Any) -> OrderedMap:
        if not self._by_primary:
            return HashMap() if self.definition.hash else OrderedMap()
        get, pk_of = self._primary_get, self._pk_of
        inner, group_of, row_pk = self._row_inner, self._row_group, self._row_pk
        if self._single:  # the key is the primary key: the row found has it

            def lookup_bare(key: Any) -> Any:
                row = get(key)
                return row if row is not None and group_of(row) == group else None

            return OrderedKeys(lookup_bare)

        def lookup(key: Any) -> Any:
            row = get(pk_of(key))
            if row is None:
                return None
            return row if inner(row) == key and group_of(row) == group else None

        def is_live(row: Any) -> bool:
            # The very row the space holds: a changed task is a new row.
            return get(row_pk(row)) is row

        # A key of several fields would be a tuple per task: keep the rows.
        return OrderedRows(lookup, inner, is_live)

    # -- maintained by Space: `t` a tuple, `row` what the space holds for it --
    def _check_insert(self, t: Tuple, space: str, replacing: Any) -> None:
        # Asked only when checks_unique.
        found = self._groups.get(self._group_of(t))
        if found is None:
            return
        there = found.get(self._inner(t))
        if there is not None and there is not replacing:
            raise DuplicateKey(self.name, space)

    def _map_of(self, group: Any) -> Map:
        found = self._groups.get(group)
        if found is None:
            found = self._groups[group] = self._new_map(group)
        return found

    def _add(self, t: Tuple, row: Any) -> None:
        self._map_of(self._group_of(t)).set(self._inner(t), row)

    def _put_back(self, t: Tuple, row: Any) -> None:
        """_add for a row this index held before (an undone change)."""
        self._map_of(self._group_of(t)).put_back(self._inner(t), row)

    def _remove(self, t: Tuple) -> None:
        group = self._group_of(t)
        found = self._groups[group]
        found.pop(self._inner(t))
        if not found and self._gw:
            self._emptied(group, found)

    def _emptied(self, group: Any, found: Map) -> None:
        """A group's map lost its last entry: cleared (every stale entry it held
        goes) and kept, ready for the group's next entry; the group emptied
        before it, if still empty, goes. A consumer's take and ack empty and
        fill the taken group each time: no map made and dropped per pair, and
        at most one empty map is kept (group values may be many: utubes)."""
        found.clear()
        kept = self._kept
        self._kept = group
        if kept is not None and kept != group:
            other = self._groups.get(kept)
            if other is not None and not other:
                del self._groups[kept]

    def _clear(self) -> None:
        if self._gw:
            self._groups.clear()
            self._kept = None
        else:
            self._groups[None].clear()

    def _bulk_load(self, column: Callable[[int], list[Any]], rows: list[Any], space: str) -> None:
        """Build from scratch (the index must be empty): one sort per group.
        column(f): field f of every row, in the order of `rows`."""
        keys = _keys(column, self._parts[self._gw :])
        if not self._gw:
            loaded = self._groups[None].load(keys, rows)
        else:
            groups = _keys(column, self._parts[: self._gw])
            if len(set(groups)) == 1:  # one status, say: the lists as they are
                loaded = self._map_of(groups[0]).load(keys, rows)
            else:
                loaded = sum(self._map_of(g).load(k, r) for g, (k, r) in _split(groups, keys, rows))
        if loaded != len(rows):  # two rows had one key
            raise DuplicateKey(self.name, space)


def _keys(column: Callable[[int], list[Any]], parts: tuple[int, ...]) -> list[Any]:
    """The values at `parts` of every row, as itemgetter(*parts) gives them."""
    if len(parts) == 1:
        return column(parts[0])
    return list(zip(*map(column, parts), strict=True))


def _split(groups: list[Any], keys: list[Any], rows: list[Any]) -> Iterator[tuple[Any, Any]]:
    """(group, (its keys, its rows)) for each group named in `groups`."""
    by_group: dict[Any, tuple[list[Any], list[Any]]] = {}
    for i in range(len(groups)):
        found = by_group.get(groups[i])
        if found is None:
            found = by_group[groups[i]] = ([], [])
        found[0].append(keys[i])
        found[1].append(rows[i])
    return iter(by_group.items())


class PrimaryIndex(Index):
    """The unique primary index: never grouped, so one map from key to row."""

    def __init__(
        self, definition: IndexDef, primary_parts: tuple[int, ...], codec: Codec = PLAIN
    ) -> None:
        super().__init__(definition, primary_parts, codec=codec)
        if self._gw:
            raise ValueError("a primary index is not grouped")
        if self._single and not definition.hash:  # task ids: a list by id while ints in order
            self._groups[None] = DenseMap()
        self._map = self._groups[None]

    def __len__(self) -> int:
        return len(self._map)

    def get(self, key: Key) -> Tuple | None:
        return self._tuple(self.row(key))

    def row(self, key: Key) -> Any:
        """What the space holds for this key (a row), else None."""
        if len(key) != self._width:
            return None
        return self._map.get(key[0] if self._single else key)

    def last(self, prefix: Key = ()) -> Tuple | None:
        if prefix:
            return super().last(prefix)
        found = self._map
        return self._tuple(found.get(found.last_key()))

    def last_key(self) -> Key | None:
        """The greatest key, None if empty: every put asks for the highest id,
        and the key alone costs no decode."""
        key = self._map.last_key()
        if key is ABSENT:
            return None
        return (key,) if self._single else key

    # Index's, without the group lookup: every change passes here.
    def _check_insert(self, t: Tuple, space: str, replacing: Any) -> None:
        there = self._map.get(self._inner(t))
        if there is not None and there is not replacing:
            raise DuplicateKey(self.name, space)

    def _add(self, t: Tuple, row: Any) -> None:
        self._map.set(self._inner(t), row)

    def _remove(self, t: Tuple) -> None:
        self._map.pop(self._inner(t))

    def getter(self) -> Callable[[Any], Any]:
        """The lookup of a row by its bare primary key (a secondary's)."""
        return self._map.getter()

    def values_unordered(self) -> list[Any]:
        """Every row, in no particular order: a C-speed pointer copy."""
        return self._map.values_unordered()
