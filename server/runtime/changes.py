"""Who in this process hears of task changes, and the queue they hear them from.

Owns: `ChangeHub`, the list of in-process listeners of task changes (the
plugin host's callbacks, event subscriptions of tubes whose changes have no
WAL record) and the names of the callbacks plugins named (what a tube may be
bound to over the wire). The queue reports changes only while someone
listens (drivers/queue.py `listen`): a listener added or removed switches it
on or off, and a queue built anew (a reload, a promotion) is attached again.
Must not touch: what a listener does with a change (plugins/host.py,
events.py), sockets.
"""

from __future__ import annotations

from collections.abc import Callable

from queuebox.drivers.events import TaskChange
from queuebox.drivers.queue import Queue

Listener = Callable[[list[TaskChange]], None]


class ChangeHub:
    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self.callback_names: set[str] = set()
        self.queue: Queue | None = None

    def attach(self, queue: Queue) -> None:
        """`queue` is the one serving now (built at start, after a reload or a promotion)."""
        self.queue = queue
        self._listen()

    def add(self, listener: Listener) -> None:
        self._listeners.append(listener)
        if len(self._listeners) == 1:
            self._listen()

    def remove(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)
            if not self._listeners:
                self._listen()

    def _listen(self) -> None:
        if self.queue is not None:
            self.queue.listen(self._hear if self._listeners else None, self.callback_names)

    def _hear(self, changes: list[TaskChange]) -> None:
        for listener in list(self._listeners):
            listener(changes)
