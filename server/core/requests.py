"""The request-type table: what the server answers to each IPROTO request type.

Owns: PING, AUTH, ID, SELECT (the queue's spaces and the schema views
connectors read when they connect: spaces.py), the refusals of writes into
them and of SQL, and ER_UNKNOWN_REQUEST_TYPE for the rest; CALL, CALL_16
and EVAL are delegated to `dispatch.py`. Must not do I/O nor see the
connection: a handler gets the decoded request and the `Session` and returns
the reply bytes, a `Held` reply, or a coroutine that produces the reply (see
`dispatch.Reply`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queuebox import protocol
from queuebox.protocol import ErrorCode, RequestType
from queuebox.storage.packed import spliced

from ..runtime.errors import CallError
from ..runtime.logs import RateLimitedLog, get_logger
from .dispatch import Deferred, Reply, handle_call, handle_call16, handle_eval
from .session import Session

log = get_logger("queuebox.requests")
# The audit line of a failed AUTH. Guessing passwords on many connections must
# not flood the log as well: what is held back is counted in the next line.
auth_failed_log = RateLimitedLog(log, burst=10, every_s=0.1)
FAILURES = {int(ErrorCode.ER_PASSWORD_MISMATCH): "password", int(ErrorCode.ER_NO_SUCH_USER): "user"}

RequestHandler = Callable[[Any, Session], Reply]

# System spaces (views) connectors select from on connect; before the server
# is built (connection tests) they answer with no rows.
SYSTEM_SPACES = {277: "_vcollation", 281: "_vspace", 289: "_vindex", 341: "_vspace_sequence"}

# Tarantool's names of body keys, for "Missing mandatory field '<name>' in request".
SPACE_ID_FIELD = (protocol.KEY_SPACE_ID, "space id")
LIMIT_FIELD = (protocol.KEY_LIMIT, "limit")
KEY_FIELD = (protocol.KEY_KEY, "key")
TUPLE_FIELD = (protocol.KEY_TUPLE, "tuple")
USER_NAME_FIELD = (protocol.KEY_USER_NAME, "user name")


def require(req: Any, *fields: tuple[int, str]) -> None:
    for key, name in fields:
        if not req.has(key):
            raise CallError(
                ErrorCode.ER_MISSING_REQUEST_FIELD, f"Missing mandatory field '{name}' in request"
            )


def handle_ping(req: Any, s: Session) -> bytes:
    return protocol.encode_ok(req.sync, s.schema_version)


def handle_auth(req: Any, s: Session) -> bytes | Deferred:
    require(req, USER_NAME_FIELD, TUPLE_FIELD)
    user = req.user_name
    scramble = req.scramble()
    guard, address = s.app.auth_guard, s.address
    reserved, s.auth_reserved = s.auth_reserved, False
    if scramble and not reserved:  # going back to guest (no scramble) guesses nothing
        at = guard.admit(address, user)
        if at:
            s.auth_reserved = True  # the connection runs this AUTH again at `at`
            return Deferred(at)
    try:
        s.app.users.authenticate(user, s.salt, scramble)
    except CallError as exc:
        reason = FAILURES.get(exc.code)
        if reason is not None:
            _failed(s, user, reason, guard.failed(address, user, reason, reserved))
        raise
    if scramble:
        guard.succeeded(address, user, reserved)
    s.set_user(user)
    return protocol.encode_ok(req.sync, s.schema_version)


def _failed(s: Session, user: str, reason: str, next_delay: float) -> None:
    # A failed AUTH leaves the previous user logged in (Tarantool 2.6); a
    # connection that keeps guessing is closed once its answer is out.
    s.auth_failures += 1
    closing = s.auth_failures >= s.app.config.auth_attempts
    s.close_requested = s.close_requested or closing
    auth_failed_log.warning(
        "auth failed",
        user=user,
        address=s.address,
        peer=s.peer,
        reason="wrong password" if reason == "password" else "no such user",
        conn_id=s.conn_id,
        next_delay_s=round(next_delay, 3),
        closing=closing,
    )


def handle_id(req: Any, s: Session) -> bytes:
    # Answered even though the greeting says 2.6.0: harmless, and right for
    # a greeting_version >= 2.10 (asynctnt fails the connect on an error).
    return protocol.encode_id_reply(req.sync, s.schema_version)


def handle_select(req: Any, s: Session) -> bytes:
    require(req, SPACE_ID_FIELD, LIMIT_FIELD, KEY_FIELD)
    space_id = req.space_id
    spaces = s.app.spaces
    if spaces is None:  # before the server is built (unit tests of connections)
        if space_id not in SYSTEM_SPACES:
            raise CallError(ErrorCode.ER_NO_SUCH_SPACE, f"Space '{space_id}' does not exist")
        return protocol.encode_data(req.sync, s.schema_version, [])
    rows = spaces.select(
        s.grant, s.user, space_id, req.index_id, req.key, req.iterator, req.offset, req.limit
    )
    return protocol.encode_packed_data(req.sync, s.schema_version, len(rows), spliced(rows))


def _refuse_write(req: Any, s: Session) -> bytes:
    """Queue data changes only through queue calls: a write into one of the queue's
    spaces is refused as Tarantool refuses a user without the write right."""
    require(req, SPACE_ID_FIELD)
    spaces = s.app.spaces
    if spaces is None:
        raise CallError(ErrorCode.ER_NO_SUCH_SPACE, f"Space '{req.space_id}' does not exist")
    raise spaces.refuse_write(req.space_id, s.user)


def _refuse(what: str) -> RequestHandler:
    message = f"queuebox does not support {what}"

    def refuse(req: Any, s: Session) -> bytes:
        raise CallError(ErrorCode.ER_UNSUPPORTED, message)

    return refuse


def handle_unknown(req: Any, s: Session) -> bytes:
    raise CallError(ErrorCode.ER_UNKNOWN_REQUEST_TYPE, f"Unknown request type {req.type}")


_TABLE: dict[int, RequestHandler] = {
    RequestType.PING: handle_ping,
    RequestType.AUTH: handle_auth,
    RequestType.ID: handle_id,
    RequestType.SELECT: handle_select,
    RequestType.CALL: handle_call,
    RequestType.CALL_16: handle_call16,
    RequestType.EVAL: handle_eval,
    RequestType.INSERT: _refuse_write,
    RequestType.REPLACE: _refuse_write,
    RequestType.UPDATE: _refuse_write,
    RequestType.UPSERT: _refuse_write,
    RequestType.DELETE: _refuse_write,
    RequestType.EXECUTE: _refuse("SQL"),
}


# Plain int keys: the decoder gives ints, and an int finds an int key fastest.
REQUEST_TABLE: dict[int, RequestHandler] = {int(key): value for key, value in _TABLE.items()}
