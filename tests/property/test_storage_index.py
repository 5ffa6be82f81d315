"""Every Space/Index operation against a plain model: a dict plus sorted lists.

The model recomputes each index by brute force (sort every tuple by its key,
non-unique keys extended by the primary key) and answers each lookup by
scanning, so any disagreement with the real indexes is a bug in them.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from queuebox.storage.space import (
    DuplicateKey,
    IndexDef,
    NoSuchTuple,
    Space,
    SpaceDef,
    StorageError,
)

# Field domains: small, so keys collide and unique violations happen.
IDS = st.integers(0, 12)
STATUS = st.sampled_from(["a", "b", "c"])
PRI = st.integers(0, 2)
DATA = st.sampled_from([b"v", b"w", b"x", b"y", b"z"])
DOMAINS = [IDS, STATUS, PRI, DATA]
TUPLES = st.tuples(IDS, STATUS, PRI, DATA)

SINGLE_PK = SpaceDef(
    512,
    "single",
    (
        IndexDef("pk", (0,)),
        IndexDef("status", (1, 0), group=1),  # unique, two parts, one map per status
        IndexDef("pri", (2,), unique=False),
        IndexDef("data", (3,)),  # unique, one part: violations are common
        IndexDef("status_pri", (1, 2), unique=False, group=2),  # + pk: 3 fields
        IndexDef("status_flat", (1, 0)),  # the same order as "status", in one map
    ),
)
DOUBLE_PK = SpaceDef(
    513,
    "double",
    (
        IndexDef("pk", (1, 0)),
        IndexDef("pri", (2, 1), unique=False, group=5),  # clamped to 1
        IndexDef("data", (3,), unique=False),
    ),
)


class Model:
    def __init__(self, definition: SpaceDef) -> None:
        self.d = definition
        self.pk_parts = definition.indexes[0].parts
        self.rows: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def pk(self, t: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(t[p] for p in self.pk_parts)

    def entries(self, idef: IndexDef) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
        parts = idef.parts
        if not idef.unique:
            parts = parts + tuple(p for p in self.pk_parts if p not in parts)
        return sorted(
            ((tuple(t[p] for p in parts), t) for t in self.rows.values()), key=lambda e: e[0]
        )

    def violates(self, t: tuple[Any, ...], replacing: tuple[Any, ...] | None) -> bool:
        for idef in self.d.indexes:
            if not idef.unique:
                continue
            key = tuple(t[p] for p in idef.parts)
            for other in self.rows.values():
                if other is not replacing and tuple(other[p] for p in idef.parts) == key:
                    return True
        return False


def key_strategy(idef: IndexDef, pk_parts: tuple[int, ...]) -> st.SearchStrategy[tuple[Any, ...]]:
    """Keys (prefixes, full keys, one field too long) with the right type at each place.

    A non-unique index orders by its parts then the primary key, so a key may
    go on into the primary key fields.
    """
    parts = list(idef.parts)
    if not idef.unique:
        parts += [p for p in pk_parts if p not in parts]
    n = len(parts)
    width_extra = 1
    return st.integers(0, n + width_extra).flatmap(
        lambda k: st.tuples(*[DOMAINS[p] for p in parts[:k]], *[IDS] * max(0, k - n))
    )


class IndexMachine(RuleBasedStateMachine):
    definition = SINGLE_PK

    def __init__(self) -> None:
        super().__init__()
        self.space = Space(self.definition)
        self.model = Model(self.definition)

    @rule(t=TUPLES)
    def insert(self, t: tuple[Any, ...]) -> None:
        m = self.model
        expect_dup = m.pk(t) in m.rows or m.violates(t, None)
        try:
            self.space.insert(t)
        except DuplicateKey:
            assert expect_dup
            return
        assert not expect_dup
        m.rows[m.pk(t)] = t

    @rule(t=TUPLES)
    def replace(self, t: tuple[Any, ...]) -> None:
        m = self.model
        old = m.rows.get(m.pk(t))
        expect_dup = m.violates(t, old)
        try:
            self.space.replace(t)
        except DuplicateKey:
            assert expect_dup
            return
        assert not expect_dup
        m.rows[m.pk(t)] = t

    @rule(t=TUPLES, field=st.integers(0, 3), value=st.data())
    def update(self, t: tuple[Any, ...], field: int, value: st.DataObject) -> None:
        m = self.model
        key = m.pk(t)
        new_value = value.draw(DOMAINS[field])
        old = m.rows.get(key)
        if old is None:
            try:
                self.space.update(key, {field: new_value})
            except NoSuchTuple:
                return
            raise AssertionError("update of a missing tuple succeeded")
        new = list(old)
        new[field] = new_value
        new_t = tuple(new)
        if m.pk(new_t) != key:
            try:
                self.space.update(key, {field: new_value})
            except StorageError:
                return
            raise AssertionError("update changed the primary key")
        expect_dup = m.violates(new_t, old)
        try:
            got = self.space.update(key, {field: new_value})
        except DuplicateKey:
            assert expect_dup
            return
        assert not expect_dup and got == new_t
        m.rows[key] = new_t

    @rule(t=TUPLES)
    def delete(self, t: tuple[Any, ...]) -> None:
        m = self.model
        key = m.pk(t)
        assert self.space.delete(key) == m.rows.pop(key, None)

    @precondition(lambda self: self.model.rows)
    @rule(t=TUPLES, data=st.data())
    def change_then_restore(self, t: tuple[Any, ...], data: st.DataObject) -> None:
        """What the engine's rollback does: undo a change with restore(old, new)."""
        before = dict(self.model.rows)
        victim = data.draw(st.sampled_from(sorted(before)))
        row = self.space.primary.row  # the engine's undo entries hold rows
        old = row(victim)
        self.space.delete(victim)
        self.space.restore(old, None)
        key = self.model.pk(t)
        old = row(key)
        try:
            self.space.replace(t)
        except DuplicateKey:
            return
        self.space.restore(old, row(key))
        assert sorted(self.space) == sorted(before.values())

    @rule()
    def rebuild_with_load_many(self) -> None:
        fresh = Space(self.definition)
        fresh.load_many(list(self.space))
        for name, idx in fresh.indexes.items():
            assert list(idx.iterate()) == list(self.space.index(name).iterate())
        self.space = fresh

    @rule(data=st.data())
    def lookups(self, data: st.DataObject) -> None:
        for idef in self.definition.indexes:
            idx = self.space.index(idef.name)
            entries = self.model.entries(idef)
            key = data.draw(key_strategy(idef, self.model.pk_parts), label=f"key for {idef.name}")
            n = len(key)
            pref = [t for k, t in entries if k[:n] == key]
            assert list(idx.iterate(key)) == pref
            assert list(idx.iterate(key, reverse=True)) == pref[::-1]
            assert idx.first(key) == (pref[0] if pref else None)
            assert idx.last(key) == (pref[-1] if pref else None)
            if idef.unique:
                exact = [t for k, t in entries if k == key]
                assert idx.get(key) == (exact[0] if exact else None)
            else:
                assert idx.get(key) == (pref[0] if pref else None)
            width = len(entries[0][0]) if entries else None
            if width is not None and n == width:  # a whole key: the page after it
                gw = max(0, min(idef.group, width - 1))
                after = [t for k, t in entries if k[:gw] == key[:gw] and k > key]
                assert list(idx.iterate_after(key[:gw], key)) == after

    @invariant()
    def same_contents(self) -> None:
        rows = self.model.rows
        assert len(self.space) == len(rows)
        for idef in self.definition.indexes:
            idx = self.space.index(idef.name)
            entries = self.model.entries(idef)
            assert len(idx) == len(rows)
            assert list(idx.iterate()) == [t for _, t in entries]
            gw = max(0, min(idef.group, len(entries[0][0]) - 1)) if entries else 0
            assert sorted(idx.group_keys()) == sorted({k[:gw] for k, _ in entries})


class DoublePkMachine(IndexMachine):
    definition = DOUBLE_PK


TestSingleKeySpace = IndexMachine.TestCase
TestSingleKeySpace.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestDoubleKeySpace = DoublePkMachine.TestCase
TestDoubleKeySpace.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
