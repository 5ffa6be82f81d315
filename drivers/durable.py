"""Sessions that outlive the process: the in_replicaset journal (QUEUE.md §6, §13).

Owns three small spaces, made the first time in_replicaset is switched on
and emptied when it is switched off:

    _queue_cfg       (key, value)              "ttr" and "in_replicaset"
    _queue_sessions  (session,)                every identified session
    _queue_taken     (tube, task_id, session)  tasks held by those sessions

They are ordinary persistent spaces, so a restart recovers them and a
replica receives them through the WAL; a rebuilt Queue (restart, or a
promoted replica) reads them back with `saved_state`. While the journal is
on, `Ownership` reports every take and every end of ownership to it (one row
change each, and only for identified sessions: a session nobody can name
again cannot be reclaimed, so its tasks are released on a rebuild as ever).
Must not touch: tasks, the clock, in-memory sessions (the Queue restores
them from what `saved_state` returns).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef, Space

from .sessions import Ownership, SessionId

CFG_SPACE = "_queue_cfg"
SESSIONS_SPACE = "_queue_sessions"
TAKEN_SPACE = "_queue_taken"

SPACES: dict[str, tuple[tuple[IndexDef, ...], tuple[str, ...]]] = {
    CFG_SPACE: ((IndexDef("key", (0,)),), ("key", "value")),
    SESSIONS_SPACE: ((IndexDef("session", (0,)),), ("session",)),
    TAKEN_SPACE: ((IndexDef("task", (0, 1)),), ("tube", "task_id", "session")),
}


@dataclass
class SavedState:
    """What a rebuilt queue resumes from: the cfg, the sessions, who held what."""

    ttr: Any
    sessions: set[SessionId]
    taken: list[tuple[str, int, SessionId]] = field(default_factory=list)

    def held(self) -> dict[str, set[int]]:
        """Per tube, the ids that stay taken through the rebuild."""
        kept: dict[str, set[int]] = {}
        for tube, task_id, _ in self.taken:
            kept.setdefault(tube, set()).add(task_id)
        return kept


def saved_state(catalog: Catalog) -> SavedState | None:
    """The journal as the last process left it; None when in_replicaset was off."""
    cfg = catalog.get(CFG_SPACE)
    if cfg is None:
        return None
    values = {row[0]: row[1] for row in cfg}
    if values.get("in_replicaset") is not True:
        return None
    sessions = {row[0] for row in catalog.space(SESSIONS_SPACE)}
    # A row whose session is gone can only be left over: its task is released.
    taken = [(t, i, s) for t, i, s in catalog.space(TAKEN_SPACE) if s in sessions]
    return SavedState(values.get("ttr", 0), sessions, taken)


class SessionJournal:
    """Ownership's write-through (sessions.TakenJournal) while in_replicaset is on."""

    def __init__(self, catalog: Catalog, identified: set[SessionId]) -> None:
        self._identified = identified  # Sessions.identified itself, kept current there
        self._spaces = {name: _open(catalog, name) for name in SPACES}
        self._cfg = self._spaces[CFG_SPACE]
        self._sessions = self._spaces[SESSIONS_SPACE]
        self._taken = self._spaces[TAKEN_SPACE]

    # -- sessions.TakenJournal --
    def took(self, tube: str, task_id: int, session: SessionId) -> None:
        if session in self._identified:
            self._taken.replace((tube, task_id, session))

    def cleared(self, tube: str, task_id: int) -> None:
        self._taken.delete((tube, task_id))  # absent: no change, nothing logged

    # -- the Queue's --
    def save_cfg(self, ttr: Any) -> None:
        for key, value in (("ttr", ttr), ("in_replicaset", True)):
            if self._cfg.get((key,)) != (key, value):
                self._cfg.replace((key, value))

    def identified(self, session: SessionId, held: Iterable[tuple[str, int]]) -> None:
        """identify handed out or claimed `session`: from now on it is journaled,
        with the tasks it already holds."""
        if self._sessions.get((session,)) is not None:
            return
        self._sessions.insert((session,))
        for tube, task_id in held:
            self._taken.replace((tube, task_id, session))

    def ended(self, session: SessionId) -> None:
        self._sessions.delete((session,))

    def sync(self, owners: Ownership) -> None:
        """Make the rows say exactly what memory says (switching on, resuming)."""
        sessions = set(self._identified)
        taken = {
            (tube, task_id): session
            for session in sessions
            for tube, task_id in owners.held_by(session)
        }
        for (session,) in list(self._sessions):
            if session not in sessions:
                self._sessions.delete((session,))
        for tube, task_id, session in list(self._taken):
            if taken.get((tube, task_id)) != session:
                self._taken.delete((tube, task_id))
        for session in sessions - {row[0] for row in self._sessions}:
            self._sessions.insert((session,))
        for (tube, task_id), session in taken.items():
            if self._taken.get((tube, task_id)) is None:
                self._taken.insert((tube, task_id, session))

    def clear(self) -> None:
        """in_replicaset switched off: nothing survives a rebuild any more."""
        for space in self._spaces.values():
            space.truncate()


def _open(catalog: Catalog, name: str) -> Space:
    existing = catalog.get(name)
    if existing is not None:
        return existing
    indexes, fmt = SPACES[name]
    return catalog.create_space(name, indexes, format=fmt)
