"""The errors the queue core answers with, and their exact texts.

Owns: `QueueError` (an IPROTO error code plus message, duck-typed by the
server through `.code` and `.message`), the error codes the spec uses and
one constructor per text of QUEUE.md §9, so that every text lives in one place.
Must not touch: the wire (the server turns a QueueError into an error reply)
and the Lua `file:line: ` prefix, which upstream adds and we deliberately
leave out.
"""

from __future__ import annotations

# Tarantool error codes used by the queue API (box.error).
ER_KEY_PART_TYPE = 18
ER_FIELD_TYPE = 23
ER_TRANSACTION_ACTIVE = 30
ER_PROC_LUA = 32
ER_NO_SUCH_PROC = 33
ER_FIELD_MISSING = 39
ER_NO_SUCH_ENGINE = 57
ER_UPDATE_INTEGER_OVERFLOW = 95


class QueueError(Exception):
    """An error reply: `code` is the IPROTO error code, `message` its text."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"QueueError({self.code}, {self.message!r})"


def module_error(text: str) -> QueueError:
    """An error the Lua module raises with error(): code 32."""
    return QueueError(ER_PROC_LUA, text)


def not_taken() -> QueueError:
    return module_error("Task was not taken")


def task_not_found(task_id: object) -> QueueError:
    return module_error(f"Task {task_id} not found")


def no_such_proc(name: str) -> QueueError:
    return QueueError(ER_NO_SUCH_PROC, f"Procedure '{name}' is not defined")


def key_part_type(expected: str) -> QueueError:
    return QueueError(
        ER_KEY_PART_TYPE,
        f"Supplied key type of part 0 does not match index part type: expected {expected}",
    )


def field_type(field_no: int, expected: str) -> QueueError:
    return QueueError(
        ER_FIELD_TYPE,
        f"Tuple field {field_no} type does not match one required by operation: "
        f"expected {expected}",
    )


def field_missing(field_no: int) -> QueueError:
    return QueueError(
        ER_FIELD_MISSING, f"Tuple field {field_no} required by space format is missing"
    )


def integer_overflow(field_no: int) -> QueueError:
    return QueueError(
        ER_UPDATE_INTEGER_OVERFLOW,
        f"Integer overflow when performing '+' operation on field {field_no}",
    )


def no_such_engine(engine: str) -> QueueError:
    return QueueError(ER_NO_SUCH_ENGINE, f"Space engine '{engine}' does not exist")
