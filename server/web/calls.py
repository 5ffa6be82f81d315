"""A server function called in-process as a user, with the checks IPROTO makes.

Owns: `Caller`, the console's way to run a registry function by name: the
name resolved through the same `Registry`, the same access-class check
against the user's rights (ER_ACCESS_DENIED with Tarantool's text), the same
read-only refusal, a task's data handed over as msgpack bytes (`TakesData`),
and the reply held until the durability barrier, as `calls.handle_call`
does for a CALL. Errors come back as `CallFailed` with the IPROTO code and
text a connector would see. Must not know any particular function, nor
touch HTTP.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import Any

import msgpack

from queuebox.protocol import ErrorCode
from queuebox.storage.packed import Packed

from ..app import App
from ..config import READ
from ..dispatch import TakesData
from ..errors import error_code_and_message, read_only_error
from ..logs import get_logger

log = get_logger("queuebox.web")


class CallFailed(Exception):
    """What the call answered instead of a result: an IPROTO error code and text."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class CallerContext:
    """The CallContext of a console call: the console's queue session, the user."""

    conn_id: int
    user: str
    closed: asyncio.Future[None]


class Caller:
    def __init__(self, app: App) -> None:
        self.app = app
        # One queue session for the console, as if it were one more connection
        # (it never takes tasks); a session id no connection will ever get.
        self.conn_id = app.next_conn_id()
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def call(self, user: str, name: str, args: list[Any]) -> list[Any]:
        """Run function `name` as `user`; raises CallFailed with what IPROTO would answer."""
        try:
            result = self._start(user, name, args)
            if inspect.isawaitable(result):
                result = await result
            barrier = self.app.durability_barrier()
            if barrier is not None:
                await barrier  # never report a change that is not durable
        except Exception as exc:
            found = error_code_and_message(exc)
            if found is None:
                log.error("console call failed", function=name, user=user, exc_info=exc)
                found = (ErrorCode.ER_PROC_LUA, f"{type(exc).__name__}: {exc}")
            raise CallFailed(*found) from None
        return list(result)

    def _start(self, user: str, name: str, args: list[Any]) -> Any:
        app = self.app
        rights = app.users.rights(user)
        found = app.registry.resolve(name) if rights else None
        if found is None and rights:
            raise CallFailed(ErrorCode.ER_NO_SUCH_PROC, f"Procedure '{name}' is not defined")
        if found is None or found[1] not in rights:
            raise CallFailed(
                ErrorCode.ER_ACCESS_DENIED,
                f"Execute access to function '{name}' is denied for user '{user}'",
            )
        handler, access = found
        if access != READ and app.refuses_changes() and not app.registry.works_read_only(name):
            raise read_only_error()
        if type(handler) is TakesData:
            handler = handler.handler
            if args:  # the data as a client would send it: its msgpack bytes
                args = [Packed(msgpack.packb(args[0], use_bin_type=True)), *args[1:]]
        return handler(CallerContext(self.conn_id, user, self._closed), list(args))
