"""How a dependency's outcome reaches its child's tube (dependencies.py).

Owns: `TubeSettler`, the `Settler` the queue hands Dependencies: what a task's
status is, what result its tube keeps, and the two things settling does to
a waiting task, through its tube's driver: make it ready (a kick: a fresh
start), or fail it (buried with the parent's failure, or deleted when its
put asked for "cancel"). Must not touch: the dependency rows (dependencies.py
owns them), the clock (`now` comes in), other tasks.
"""

from __future__ import annotations

from collections.abc import Mapping

from .dependencies import Key
from .driver import BURIED
from .results import F_ERROR, F_STATUS
from .retries import F_REASON
from .tube import Tube


class TubeSettler:
    def __init__(self, tubes: Mapping[str, Tube]) -> None:
        self.tubes = tubes  # the registry's own dict: tubes created later are in it

    def task_status(self, key: Key) -> str | None:
        tube = self.tubes.get(key[0])
        task = None if tube is None else tube.driver.peek(key[1])
        return None if task is None else str(task[1])

    def kept_result(self, key: Key) -> tuple[str, str | None] | None:
        tube = self.tubes.get(key[0])
        row = None if tube is None else tube.results.get(key[1])
        return None if row is None else (row[F_STATUS], row[F_ERROR])

    def reason(self, key: Key) -> str | None:
        """Why a buried task was buried, if it was said."""
        tube = self.tubes.get(key[0])
        row = None if tube is None else tube.retries.row(key[1])
        return None if row is None else row[F_REASON]

    def ready(self, key: Key, now: int) -> None:
        tube = self.tubes.get(key[0])
        task = None if tube is None else tube.driver.peek(key[1])
        if tube is None or task is None or task[1] != BURIED:
            return
        tube.now = now
        tube.driver.note("kick")  # counted and heard as the module's kick
        tube.driver.kick_task(key[1], task)
        tube.sync_deadline()

    def fail(self, key: Key, reason: str, cancel: bool, now: int) -> None:
        tube = self.tubes.get(key[0])
        task = None if tube is None else tube.driver.peek(key[1])
        if tube is None or task is None:
            return
        tube.now = now
        if cancel:
            tube.results.failed(key[1], reason, now)
            tube.shared.deps.parent_finished(key, reason)  # its own children fail too
            tube.driver.note("delete")
            tube.driver.delete(key[1])
            tube.result_settled(key[1])
        else:
            tube.retries.buried(key[1], reason[:1000])  # tube.task_buried: failed
        tube.sync_deadline()
