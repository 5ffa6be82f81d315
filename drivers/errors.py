"""The errors the queue core answers with, and their exact texts.

Owns: `QueueError` (the NAME of an IPROTO error code plus a message; the
numbers live in protocol's `ErrorCode` alone, which drivers may not import,
so the server maps the name, `ErrorCode[error.code]`) and one constructor
per text of QUEUE.md §9, so that every text lives in one place.
Must not touch: the wire (the server turns a QueueError into an error reply)
and the Lua `file:line: ` prefix, which upstream adds and we deliberately
leave out.
"""

from __future__ import annotations

from typing import Literal, get_args

# The Tarantool error codes (box.error) the queue API answers with, by name.
CodeName = Literal[
    "ER_KEY_PART_TYPE",
    "ER_FIELD_TYPE",
    "ER_PROC_LUA",
    "ER_NO_SUCH_PROC",
    "ER_FIELD_MISSING",
    "ER_NO_SUCH_ENGINE",
    "ER_INTEGER_OVERFLOW",
]
CODE_NAMES: tuple[CodeName, ...] = get_args(CodeName)


class QueueError(Exception):
    """An error reply: `code` names the IPROTO error code, `message` is its text."""

    def __init__(self, code: CodeName, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"QueueError({self.code!r}, {self.message!r})"


def module_error(text: str) -> QueueError:
    """An error the Lua module raises with error(): code 32."""
    return QueueError("ER_PROC_LUA", text)


def not_taken() -> QueueError:
    return module_error("Task was not taken")


def not_buried() -> QueueError:
    """queuebox.kick_task of a task that is not buried (QUEUE.md §14)."""
    return module_error("Task was not buried")


def task_not_found(task_id: object) -> QueueError:
    return module_error(f"Task {task_id} not found")


def tube_not_found(name: object) -> QueueError:
    """queuebox's own calls on a tube (QUEUE.md §14) name a tube that does not exist."""
    return module_error(f"Tube '{name}' not found")


def no_such_proc(name: str) -> QueueError:
    return QueueError("ER_NO_SUCH_PROC", f"Procedure '{name}' is not defined")


def key_part_type(expected: str) -> QueueError:
    return QueueError(
        "ER_KEY_PART_TYPE",
        f"Supplied key type of part 0 does not match index part type: expected {expected}",
    )


def field_type(field_no: int, expected: str) -> QueueError:
    return QueueError(
        "ER_FIELD_TYPE",
        f"Tuple field {field_no} type does not match one required by operation: "
        f"expected {expected}",
    )


def field_missing(field_no: int) -> QueueError:
    return QueueError(
        "ER_FIELD_MISSING", f"Tuple field {field_no} required by space format is missing"
    )


def integer_overflow(field_no: int) -> QueueError:
    return QueueError(
        "ER_INTEGER_OVERFLOW",
        f"Integer overflow when performing '+' operation on field {field_no}",
    )


def no_such_engine(engine: str) -> QueueError:
    return QueueError("ER_NO_SUCH_ENGINE", f"Space engine '{engine}' does not exist")
