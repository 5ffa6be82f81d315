"""The client's exception hierarchy and the mapping from server error replies to it.

Owns: every exception the bundled client raises, and `error_from_reply`, which turns an
IPROTO error (code + message) into the most specific class. Must not touch sockets or
the event loop; it knows nothing about how a reply arrived.

    QueueboxError
    ├── NetworkError (also a builtin ConnectionError)   -- nothing reached the server
    │   ├── ConnectionLost                              -- the call may or may not have run
    │   └── NoWritableInstance                          -- no address answered RUNNING in time
    ├── CallTimeout (also a builtin TimeoutError)
    ├── QueueFull                                       -- limfifottl put found no room
    └── ServerError(code, message)                      -- the server answered an error
        ├── OutcomeUnknown                  216 / 222: applied, maybe not kept; never retried
        ├── AuthError                       45 / 47
        ├── AccessDenied                    42: the user may not make this call
        ├── NoSuchProcedure                 33
        │   └── TubeNotFound                33 for `queue.tube.<name>:<method>`;
        │                                   32 `Tube '<name>' not found` (queuebox.tasks...)
        └── QueueError                      32 (module errors; `.text` without file:line)
            ├── TaskNotTaken
            ├── TaskNotFound
            ├── ScheduleNotFound             `Schedule '<name>' not found` (queuebox.schedule_*)
            ├── TubeExists
            ├── TubeBusy
            ├── EventsLost
            └── UnknownSession
"""

from __future__ import annotations

import re

__all__ = [
    "AccessDenied",
    "AuthError",
    "CallTimeout",
    "ConnectionLost",
    "EventsLost",
    "NetworkError",
    "NoSuchProcedure",
    "NoWritableInstance",
    "OptionRefused",
    "OutcomeUnknown",
    "QueueError",
    "QueueFull",
    "QueueboxError",
    "ServerError",
    "ScheduleNotFound",
    "TaskNotFound",
    "TaskNotTaken",
    "TubeBusy",
    "TubeExists",
    "TubeNotFound",
    "UnknownSession",
    "describe_error",
    "error_from_reply",
]

ER_PROC_LUA = 32
ER_NO_SUCH_PROC = 33
ER_ACCESS_DENIED = 42
ER_NO_SUCH_USER = 45
ER_PASSWORD_MISMATCH = 47
ER_SYNC_QUORUM_TIMEOUT = 216
ER_QUORUM_WAIT = 222


class QueueboxError(Exception):
    """Base class of every error the queuebox client raises."""


class NetworkError(QueueboxError, ConnectionError):
    """The server could not be reached, or the connection is closed."""


class ConnectionLost(NetworkError):
    """The connection broke while a call was in flight: it may or may not have run."""


class NoWritableInstance(NetworkError):
    """None of the addresses given to connect() was the writable instance (its
    `queue.state()` RUNNING) within the failover timeout; the message says what each
    one answered."""


class CallTimeout(QueueboxError, TimeoutError):
    """No reply came within the call timeout (the call may still run on the server)."""


class QueueFull(QueueboxError):
    """A limfifottl tube stayed full for the whole put timeout (the server answered nil)."""


class OptionRefused(QueueboxError, ValueError):
    """A put carried an option its tube's driver ignores (delay or pri on a fifo tube,
    ...): refused by the client before anything was sent (clients/put_options.py)."""


class ServerError(QueueboxError):
    """The server answered with an IPROTO error reply.

    Attributes:
        code: the server's error code (the reply code without the 0x8000 bit).
        message: the server's message, unchanged.
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message


class OutcomeUnknown(ServerError):
    """The change was applied on the primary, but whether it survives is unknown:
    its replicas did not confirm it in time (216, the synchronous quorum timed out),
    or the primary stopped being the primary while it waited for them (222). It
    may be there after a failover, or not. The client never sends it again on its
    own: a repeated put could be there twice; look before you repeat it (a refusal
    before anything was applied is ER_READONLY, which the client does retry)."""


class AuthError(ServerError):
    """Authentication failed: unknown user (45) or wrong password (47)."""


class AccessDenied(ServerError):
    """The user may not make this call, or not on this tube (42): a refusal of the
    credentials' rights, not of the call's arguments."""


class NoSuchProcedure(ServerError):
    """The called function does not exist (33)."""


class TubeNotFound(NoSuchProcedure):
    """A tube method was called on a tube that does not exist (33).

    Attributes:
        tube: the tube's name as it appeared in the server's message.
    """

    def __init__(self, code: int, message: str, tube: str) -> None:
        super().__init__(code, message)
        self.tube = tube


class QueueError(ServerError):
    """An error raised by the queue module itself (32).

    Attributes:
        text: the message without the module's `file:line: ` prefix,
            e.g. ``Task was not taken``.
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)
        self.text = _strip_position(message)


class TaskNotTaken(QueueError):
    """ack/release/touch/bury of a task that this session has not taken."""


class TaskNotFound(QueueError):
    """The task id does not exist."""


class ScheduleNotFound(QueueError):
    """No schedule has that name (queuebox.schedule_pause/resume/delete)."""


class TubeExists(QueueError):
    """create_tube of a name that already exists."""


class TubeBusy(QueueError):
    """drop of a tube that has waiting consumers or taken tasks."""


class EventsLost(QueueError):
    """An event stream cannot go on without a gap: its position is no longer in the
    server's WAL, or the tube's changes are never written (a temporary tube) and the
    connection broke. Read the tube's state again and subscribe anew."""


class UnknownSession(QueueError):
    """identify(uuid) of a session the server has forgotten (or a malformed uuid)."""


_POSITION = re.compile(r"^\S+?\.lua:\d+: ")
_TUBE_PROC = re.compile(r"^Procedure '[^']*\.tube\.([^':]+):[^']*' is not defined$")
# queuebox's own calls on a tube (queuebox.tasks, ...) name a missing tube so.
_TUBE_TEXT = re.compile(r"^Tube '(.*)' not found$")

# Queue module texts (modern and legacy API) -> the class to raise. First match wins.
_QUEUE_TEXTS: tuple[tuple[re.Pattern[str], type[QueueError]], ...] = (
    (re.compile(r"^Task was not taken$"), TaskNotTaken),
    (re.compile(r"^Task is not taken$"), TaskNotTaken),
    (re.compile(r"^Only consumer that took the task can it "), TaskNotTaken),
    (re.compile(r"^Task (\S+ )?not found$"), TaskNotFound),
    (re.compile(r"^Schedule '.*' not found$"), ScheduleNotFound),
    (re.compile(r"^Space '.*' already exists$"), TubeExists),
    (re.compile(r"^There are (consumers connected the tube|taken tasks in the tube)$"), TubeBusy),
    (re.compile(r"^The UUID \S+ is unknown\.$"), UnknownSession),
    (re.compile(r"^Invalid UUID format\.$"), UnknownSession),
    (re.compile(r"^events lost: "), EventsLost),
)


MAX_ERROR_TEXT = 300  # characters of an error message kept in a log line or a reason


def describe_error(error: BaseException) -> str:
    """Any exception as `ValueError: bad input`, on one line and not too long: what a
    worker logs per failure instead of a traceback."""
    text = " ".join(str(error).split())
    if len(text) > MAX_ERROR_TEXT:
        text = text[: MAX_ERROR_TEXT - 3] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _strip_position(message: str) -> str:
    return _POSITION.sub("", message, count=1)


def _proc_error(code: int, message: str) -> ServerError:
    match = _TUBE_PROC.match(message)
    if match:
        return TubeNotFound(code, message, match.group(1))
    return NoSuchProcedure(code, message)


def _queue_error(code: int, message: str) -> ServerError:
    text = _strip_position(message)
    missing = _TUBE_TEXT.match(text)
    if missing:
        return TubeNotFound(code, message, missing.group(1))
    for pattern, cls in _QUEUE_TEXTS:
        if pattern.match(text):
            return cls(code, message)
    return QueueError(code, message)


def _auth_error(code: int, message: str) -> ServerError:
    return AuthError(code, message)


def _access_denied(code: int, message: str) -> ServerError:
    return AccessDenied(code, message)


def _outcome_unknown(code: int, message: str) -> ServerError:
    return OutcomeUnknown(code, message)


_BY_CODE = {
    ER_SYNC_QUORUM_TIMEOUT: _outcome_unknown,
    ER_QUORUM_WAIT: _outcome_unknown,
    ER_PROC_LUA: _queue_error,
    ER_NO_SUCH_PROC: _proc_error,
    ER_ACCESS_DENIED: _access_denied,
    ER_NO_SUCH_USER: _auth_error,
    ER_PASSWORD_MISMATCH: _auth_error,
}


def error_from_reply(code: int, message: str) -> ServerError:
    """Build the most specific `ServerError` for an error reply's code and message."""
    make = _BY_CODE.get(code)
    return make(code, message) if make else ServerError(code, message)
