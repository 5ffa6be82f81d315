"""Queue sessions and task ownership (QUEUE.md §6).

Owns: which session (a 16-byte UUID) each connection belongs to, the live
and pending sessions, and which session holds each taken task. A connection
gets a session lazily, the first time it needs one. When the last connection
of a session leaves (disconnect, or identify into another session):

    cfg.ttr == 0 ──► the session ends now: its taken tasks are released
    cfg.ttr  > 0 ──► pending, expiry = now + ttr (a deadline in Deadlines,
                     no sweeper); identify(uuid) before then reactivates it;
                     at expiry it ends as above and its UUID is forgotten.

Sessions also remember which of them were identified (their UUID handed
out or claimed by identify): only those can be reclaimed after a rebuild,
so only those are journaled when in_replicaset is on (durable.py). A
rebuilt queue brings them back pending (`restore_pending`).

Must not touch: tasks (ending a session calls back `on_end`, which releases
through the tubes), the clock (`now` comes in), the wire, spaces (the
journal behind `Ownership.journal` writes them).
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable
from typing import Any, Protocol

from .args import event_time, lua_truthy
from .deadlines import Deadlines
from .errors import module_error

SessionId = bytes
UUID_LEN = 16


def session_text(raw: bytes) -> str:
    """The canonical UUID text as Tarantool prints it: first groups in host (LE) order."""
    return str(uuidlib.UUID(bytes_le=raw))


def uuid_arg(value: object) -> bytes:
    """identify's argument: MP_STR (decoded with surrogateescape) or MP_BIN of 16 bytes."""
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogateescape")
    elif isinstance(value, bytes):
        raw = value
    else:
        raise module_error("Invalid UUID format.")
    if len(raw) != UUID_LEN:
        raise module_error("Invalid UUID format.")
    return raw


class TakenJournal(Protocol):
    """Where ownership changes go when they must outlive the process (durable.py)."""

    def took(self, tube: str, task_id: int, session: SessionId) -> None: ...
    def cleared(self, tube: str, task_id: int) -> None: ...


class Ownership:
    """Which session holds each taken task, per tube (upstream's _queue_taken_2)."""

    def __init__(self) -> None:
        # tube -> task -> (session, connection that took it, when): the module's
        # _queue_taken_2. One entry a taken task: a take and an ack each add or
        # remove one tuple here and one (tube, task) in `_held`.
        self._owner: dict[str, dict[int, tuple[SessionId, int, int]]] = {}
        self._held: dict[SessionId, set[tuple[str, int]]] = {}
        # None unless in_replicaset is on: then the one extra step of take and clear.
        self.journal: TakenJournal | None = None

    def take(
        self, tube: str, task_id: int, session: SessionId, conn_id: int = 0, now: int = 0
    ) -> None:
        owners = self._owner.get(tube)
        if owners is None:
            owners = self._owner[tube] = {}
        elif task_id in owners:
            self.clear(tube, task_id)
            owners = self._owner.setdefault(tube, {})
        owners[task_id] = (session, conn_id, now)
        held = self._held.get(session)
        if held is None:
            held = self._held[session] = set()
        held.add((tube, task_id))
        if self.journal is not None:
            self.journal.took(tube, task_id, session)

    def owner(self, tube: str, task_id: int) -> SessionId | None:
        owners = self._owner.get(tube)
        entry = None if owners is None else owners.get(task_id)
        return None if entry is None else entry[0]

    def clear(self, tube: str, task_id: int) -> None:
        owners = self._owner.get(tube)
        if owners is None:
            return
        entry = owners.pop(task_id, None)
        if entry is None:
            return
        # The tube's map stays when empty: a consumer that takes and acks one task
        # at a time would make a new one per pair (clear_tube lets it go).
        session = entry[0]
        held = self._held[session]
        held.discard((tube, task_id))
        if not held:
            del self._held[session]
        if self.journal is not None:
            self.journal.cleared(tube, task_id)

    def clear_tube(self, tube: str) -> None:
        for task_id in list(self._owner.get(tube, ())):
            self.clear(tube, task_id)
        self._owner.pop(tube, None)

    def tube_has_taken(self, tube: str) -> bool:
        return bool(self._owner.get(tube))

    def held_by(self, session: SessionId) -> list[tuple[str, int]]:
        return list(self._held.get(session, ()))

    def rows(self) -> list[tuple[str, int, SessionId, int, int]]:
        """(tube, task id, session, connection that took it, when) of every taken task."""
        return [
            (tube, task_id, *entry)
            for tube, owners in self._owner.items()
            for task_id, entry in owners.items()
        ]


class Sessions:
    def __init__(
        self,
        deadlines: Deadlines,
        on_end: Callable[[SessionId, int], None],
        new_id: Callable[[], bytes] = lambda: uuidlib.uuid4().bytes,
    ) -> None:
        self._deadlines = deadlines
        self._on_end = on_end
        self._new_id = new_id
        self.ttr: Any = 0  # queue.cfg{ttr=...}, seconds
        self._of_conn: dict[int, SessionId] = {}
        self._conns: dict[SessionId, set[int]] = {}
        self._pending: set[SessionId] = set()
        self.identified: set[SessionId] = set()

    def session_of(self, conn_id: int) -> SessionId:
        """The connection's session, created on first need."""
        session = self._of_conn.get(conn_id)
        if session is None:
            session = self._new_id()
            self._join(conn_id, session)
        return session

    def current(self, conn_id: int) -> SessionId | None:
        return self._of_conn.get(conn_id)

    def known(self, session: SessionId) -> bool:
        return session in self._conns or session in self._pending

    def pending(self) -> list[SessionId]:
        """Sessions no connection is in, kept for their ttr (a console lists them)."""
        return list(self._pending)

    def identify(self, conn_id: int, value: object, now: int) -> SessionId:
        session = self._claim(conn_id, value, now)
        self.identified.add(session)
        return session

    def adopt(self, conn_id: int, value: object, now: int) -> SessionId:
        """identify(uuid) that makes the session when it is unknown: a router
        gives one client's session the same UUID on every shard it uses."""
        session = uuid_arg(value)
        if not self.known(session):
            self.leave(conn_id, now)
            self._join(conn_id, session)
        return self.identify(conn_id, session, now)

    def _claim(self, conn_id: int, value: object, now: int) -> SessionId:
        if value is None:
            return self.session_of(conn_id)
        session = uuid_arg(value)
        if not self.known(session):
            raise module_error(f"The UUID {session_text(session)} is unknown.")
        if self._of_conn.get(conn_id) != session:
            self.leave(conn_id, now)
            self._join(conn_id, session)
        if session in self._pending:
            self._pending.discard(session)
            self._deadlines.discard(("session", session))
        return session

    def leave(self, conn_id: int, now: int) -> None:
        """The connection leaves its session (disconnect, or identify elsewhere)."""
        session = self._of_conn.pop(conn_id, None)
        if session is None:
            return
        conns = self._conns[session]
        conns.discard(conn_id)
        if conns:
            return
        del self._conns[session]
        if lua_truthy(self.ttr) and self.ttr > 0:
            self._pending.add(session)
            self._deadlines.set(("session", session), event_time(self.ttr, now))
        else:
            self._end(session, now)

    def connections(self) -> list[tuple[int, SessionId]]:
        """(connection, session) of every connection that has a session."""
        return list(self._of_conn.items())

    def shared(self) -> list[tuple[SessionId, int, bool]]:
        """(session, expiry µs, active) of every live or pending session, as the
        module's _queue_shared_sessions: a live one expires 0, a pending one at its end."""
        rows = [(session, 0, True) for session in self._conns]
        for session in self._pending:
            rows.append((session, self._deadlines.get(("session", session)) or 0, False))
        return rows

    def restore_pending(self, session: SessionId, now: int) -> None:
        """An identified session found after a rebuild: as if its last connection just left."""
        self.identified.add(session)
        self._pending.add(session)
        self._deadlines.set(("session", session), event_time(self.ttr, now))

    def expire(self, session: SessionId, now: int) -> None:
        """A pending session's deadline passed: it ends, and its UUID is forgotten."""
        self._deadlines.discard(("session", session))
        if session in self._pending:
            self._pending.discard(session)
            self._end(session, now)

    def _end(self, session: SessionId, now: int) -> None:
        self.identified.discard(session)
        self._on_end(session, now)

    def _join(self, conn_id: int, session: SessionId) -> None:
        self._of_conn[conn_id] = session
        self._conns.setdefault(session, set()).add(conn_id)
