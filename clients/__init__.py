"""The bundled Python client of queuebox (works with Tarantool + queue as well).

Owns the public names of the client: `clients.aio.connect` (asyncio, pipelined) and
`clients.blocking.connect` (plain sockets) share one API and one layout (`connection`,
`tube`, `legacy` in each); tasks are `Task`/`LegacyTask` with a `Status`; every error is a
`QueueboxError`. Built on `protocol/` only: nothing here imports server/, drivers/ or
storage/. `clients.bench` and `clients.pipeline` are separate tools that live alongside.

    import asyncio
    from queuebox.clients import aio

    async def main() -> None:
        async with aio.connect("127.0.0.1", 3301) as conn:
            jobs = await conn.create_tube("jobs", "fifottl", if_not_exists=True)
            await jobs.put({"n": 1}, ttr=30)
            async with jobs.taking(timeout=5) as task:
                if task is not None:
                    print(task.data)   # acked when the block ends without an error
"""

from queuebox.clients.errors import (
    AccessDenied,
    AuthError,
    CallTimeout,
    ConnectionLost,
    EventsLost,
    NetworkError,
    NoSuchProcedure,
    NoWritableInstance,
    OptionRefused,
    OutcomeUnknown,
    QueueboxError,
    QueueError,
    QueueFull,
    ScheduleNotFound,
    ServerError,
    TaskNotFound,
    TaskNotTaken,
    TubeBusy,
    TubeExists,
    TubeNotFound,
    UnknownSession,
)
from queuebox.clients.model import Event, LegacyTask, Status, Task, TaskResult

__all__ = [
    "AccessDenied",
    "AuthError",
    "CallTimeout",
    "ConnectionLost",
    "Event",
    "EventsLost",
    "LegacyTask",
    "NetworkError",
    "NoSuchProcedure",
    "NoWritableInstance",
    "OptionRefused",
    "OutcomeUnknown",
    "QueueError",
    "QueueFull",
    "QueueboxError",
    "ServerError",
    "Status",
    "Task",
    "ScheduleNotFound",
    "TaskNotFound",
    "TaskNotTaken",
    "TaskResult",
    "TubeBusy",
    "TubeExists",
    "TubeNotFound",
    "UnknownSession",
]
