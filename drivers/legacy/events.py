"""What happens to legacy tasks without a call: time passing, a client leaving, a restart.

Owns: the timer step (delays ending, ttr and ttl passing, in deadline order),
the release of a departed connection's tasks and of every task that was taken
when the server stopped, and the earliest deadline of all legacy spaces.
Must not touch: argument parsing, replies, waiters (every move into ready is
reported by the store's write funnel, which wakes one waiter) or the clock
(the server passes `now`).
"""

from __future__ import annotations

from .store import (
    F_EVENT,
    F_STATUS,
    F_TUBE,
    TAKEN,
    WORDS,
    LegacySpace,
    LegacyStore,
    Task,
    ttl_end,
)


def next_deadline(store: LegacyStore) -> int | None:
    """The earliest task event of every space: each space's "event" index head."""
    events = [e for e in (ls.next_event() for ls in store.spaces.values()) if e is not None]
    return min(events, default=None)


def expire_due(store: LegacyStore, now_us: int) -> None:
    for ls in list(store.spaces.values()):
        while (task := ls.by_event.first()) is not None and task[F_EVENT] <= now_us:
            _expire(store, ls, task, now_us)


def _expire(store: LegacyStore, ls: LegacySpace, task: Task, now_us: int) -> None:
    if now_us >= ttl_end(task):
        # ttl wins over everything, whatever the status (done tasks end here).
        store.write(ls, task, None)
        store.inc(ls.number, task[F_TUBE], "ttl.total")
        store.inc(ls.number, task[F_TUBE], f"ttl.{WORDS[task[F_STATUS]]}")
    else:
        # Ready, buried and done tasks wait for ttl_end, so an earlier event is
        # a delay or a ttr ending; taken -> ready also drops the owner.
        store.to_ready(ls, task)


def release_connection(store: LegacyStore, conn_id: int) -> None:
    """Every task the connection had taken, in every space and tube, goes back to ready."""
    for number, task_id in store.taken_by(conn_id):
        ls = store.spaces[number]
        task = ls.get(task_id)
        if task is not None:
            store.to_ready(ls, task)
            store.inc(number, task[F_TUBE], "ready_by_disconnect")


def release_after_restart(store: LegacyStore) -> None:
    """Owners do not survive a restart, so nothing may stay taken (one scan, at start)."""
    for ls in store.spaces.values():
        for task in [t for t in ls.space if t[F_STATUS] == TAKEN]:
            store.to_ready(ls, task)
            store.inc(ls.number, task[F_TUBE], "ready_by_restart")
