"""What an index is, apart from how it stores its entries: its definition (as
a space definition carries it on the wire), the key it reads from a tuple,
and the errors of a bad operation on a space.

Owns: `IndexDef`, `key_getter`, `TOP` (the upper bound of a key prefix's
range), `StorageError` and `DuplicateKey`, and the `Tuple`/`Key` shapes.
Must not touch: entries, maps, rows (index.py), files, the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

Tuple = tuple[Any, ...]
Key = tuple[Any, ...]


class StorageError(Exception):
    """Base of the errors a space raises for a bad operation."""


class DuplicateKey(StorageError):
    def __init__(self, index: str, space: str) -> None:
        super().__init__(f"Duplicate key exists in unique index '{index}' in space '{space}'")
        self.index = index
        self.space = space


@dataclass(frozen=True)
class IndexDef:
    """An index over `parts` (field numbers, 0-based); `group`: see index.py's
    module doc; `hash`: its keys are kept in a dict alone and sorted only when
    walked (ordered.py's HashMap: lookups by key, rare walks)."""

    name: str
    parts: tuple[int, ...]
    unique: bool = True
    group: int = 0
    hash: bool = False

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name, "parts": list(self.parts), "unique": self.unique}
        if self.group:
            wire["group"] = self.group
        if self.hash:
            wire["hash"] = True
        return wire

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> IndexDef:
        return cls(
            str(d["name"]),
            tuple(int(p) for p in d["parts"]),
            bool(d["unique"]),
            int(d.get("group", 0)),
            bool(d.get("hash", False)),
        )


def key_getter(parts: Sequence[int]) -> Callable[[Tuple], Key]:
    """The function that extracts the key (a tuple of the fields at `parts`)."""
    if len(parts) == 1:
        (p,) = parts
        return lambda t: (t[p],)
    return itemgetter(*parts)


class TopType:
    """Compares greater than anything: the upper bound of a prefix range."""

    def __lt__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return other is not self

    def __eq__(self, other: object) -> bool:
        return other is self

    def __hash__(self) -> int:
        return 0


TOP = TopType()
