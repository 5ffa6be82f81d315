"""Applying a primary's WAL record to this engine's live spaces (a replica).

Owns: what each record op does to the catalog when it arrives from a primary
(`apply_record`), as recovery's staging does for the spaces it rebuilds, but
on live spaces with their indexes. The engine wraps each call so the change
is journaled with the primary's own frame and LSN (engine.apply_replicated).

Must not touch: files, LSNs, the order of records (the engine checks them),
sockets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .catalog import Catalog
from .errors import ReplicationError
from .records import BadBody, space_def
from .space import Space, StorageError

Body = dict[str, Any]


def _space(catalog: Catalog, body: Body) -> Space:
    space = catalog.get(body["space"])
    if space is None:
        raise ReplicationError(
            f"LSN {body['lsn']}: {body['op']} in unknown space {body['space']!r}"
        )
    return space


def _insert(catalog: Catalog, body: Body) -> None:
    _space(catalog, body).insert(body["tuple"])


def _replace(catalog: Catalog, body: Body) -> None:
    _space(catalog, body).replace(body["tuple"])


def _delete(catalog: Catalog, body: Body) -> None:
    space = _space(catalog, body)
    if space.delete(tuple(body["key"])) is None:  # every version writes "key"
        raise ReplicationError(f"LSN {body['lsn']}: delete of a tuple {body['space']!r} lacks")


def _create_space(catalog: Catalog, body: Body) -> None:
    catalog.add(space_def(body), log=True)


def _drop_space(catalog: Catalog, body: Body) -> None:
    _space(catalog, body)
    catalog.drop_space(body["space"])


APPLY: dict[str, Callable[[Catalog, Body], None]] = {
    "insert": _insert,
    "replace": _replace,
    "delete": _delete,
    "create_space": _create_space,
    "drop_space": _drop_space,
}


def apply_record(catalog: Catalog, body: Body) -> None:
    """Make the change `body` describes; ReplicationError if it cannot apply."""
    apply = APPLY.get(body.get("op"))  # type: ignore[arg-type]
    if apply is None:
        raise ReplicationError(f"LSN {body.get('lsn')}: unknown op {body.get('op')!r}")
    try:
        apply(catalog, body)
    except (StorageError, BadBody) as e:
        raise ReplicationError(f"LSN {body['lsn']}: {body['op']} does not apply: {e}") from None
