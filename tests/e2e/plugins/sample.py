"""A plugin with one of everything: a driver, functions, callbacks (docs/plugins.md).

- driver `lifo`: fifo's rules, but take gives the newest ready task;
- `sample.put_many(tube, items[, opts])`: every item put in one step (no other
  request runs between them, one WAL write); items are checked first;
- `sample.try_put(tube, data)` (read access) puts as its caller, who needs
  the write right for that;
- every task change of every tube is heard and kept; `sample.heard()` answers
  them as [tube, event, id, status, data];
- the named callback `mirror` (bound over the wire with on_task_change) keeps
  what it hears apart: `sample.mirrored()`.
"""

from __future__ import annotations

from typing import Any

from queuebox.drivers.driver import READY, Tuple
from queuebox.drivers.untimed import UntimedStore
from queuebox.server.plugins import Caller, PluginAPI, Task


class Lifo(UntimedStore):
    """The newest ready task first."""

    TYPE = "lifo"

    def put(self, data: Any, opts: dict[Any, Any], now: int) -> Tuple | None:
        return self._insert((self.next_id(), READY, data))  # counted by the framework

    def next_ready(self) -> Tuple | None:
        return self.by_status.last((READY,))


def queuebox_plugin(api: PluginAPI) -> None:
    heard: list[list[Any]] = []
    mirrored: list[list[Any]] = []

    api.register_driver("lifo", Lifo)

    @api.function("sample.put_many", access="write")
    def put_many(caller: Caller, tube: str, items: Any, opts: Any = None) -> Any:
        if not isinstance(items, list) or not items:
            raise api.Error(32, "put_many: items must be a non-empty array")
        calls = caller.tube(tube)
        return [[calls.put(item, **(opts or {})) for item in items]]

    @api.function("sample.heard", access="read")
    def heard_call(caller: Caller) -> Any:
        return [heard]

    @api.function("sample.mirrored", access="read")
    def mirrored_call(caller: Caller) -> Any:
        return [mirrored]

    @api.function("sample.try_put", access="read")
    def try_put(caller: Caller, tube: str, data: Any) -> Any:
        return caller.call(f"queue.tube.{tube}:put", data)  # as the caller: their rights

    @api.function("sample.whoami", access="read")
    def whoami(caller: Caller) -> Any:
        return [caller.user, caller.conn_id, api.state]

    @api.on_task_change()
    def hear(task: Task, event: str) -> None:
        heard.append([task.tube, event, task.id, task.status, task.data])

    @api.callback("mirror")
    def mirror(task: Task, event: str) -> None:
        mirrored.append([task.tube, event, task.id, task.status])
