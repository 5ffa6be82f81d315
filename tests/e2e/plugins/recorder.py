"""What the module's task-change callbacks hear, kept per tube (tests/e2e/events_script.py).

- the named callback `record` (bound over the wire with on_task_change)
  keeps [event, task as stored] per tube: `recorder.heard(tube)` answers them;
- the seed's own on_task_change example, ported: every change of every tube
  is looked at, and `if event == "delete"` logs "task done" (with the task's
  id and the cause queuebox names, `ack` or `delete`...).
"""

from __future__ import annotations

from typing import Any

from queuebox.server.plugins import PluginAPI, Task


def queuebox_plugin(api: PluginAPI) -> None:
    heard: dict[str, list[list[Any]]] = {}

    @api.callback("record")
    def record(task: Task, event: str | None) -> None:
        heard.setdefault(task.tube, []).append([event, list(task.fields)])

    @api.function("recorder.heard", access="read")
    def heard_call(caller: Any, tube: str) -> Any:
        return [heard.get(tube, [])]

    @api.on_task_change()
    def task_done(task: Task, event: str | None) -> None:
        if event == "delete":
            api.log.info("task done", tube=task.tube, id=task.id, cause=task.cause)
