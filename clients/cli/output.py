"""What every client command prints and how it ends: text or JSON, tables that fit the
terminal, errors as one line (or one JSON object) and an exit status.

Owns: the exit statuses, `run` (parse, connect, run a command's body, turn every
client error into a message and a status), the task and JSON printing every command
shares, `confirm` (the one question a destructive command asks before it acts), and
`terminal_width` for tables (tables.py). Must not connect anywhere by itself (`run` is
given how) or import server/.

Exit statuses: 0 ok, 1 another server error, 2 bad usage (or a destructive command
not confirmed), 3 the server cannot be reached, 4 no such tube or task, 5 `take`
found no task in time, 6 refused: a wrong user or password, or a call the user has
no right to; 130 after a Ctrl-C, and 0 when the reader of stdout left
(queuebox/cli.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from queuebox.clients.errors import (
    AccessDenied,
    AuthError,
    NetworkError,
    OptionRefused,
    QueueboxError,
    QueueError,
    ScheduleNotFound,
    ServerError,
    TaskNotFound,
    TubeNotFound,
)
from queuebox.clients.model import Task

from .tables import table as table  # the one aligned-table helper, for the commands

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_NOT_FOUND, EXIT_EMPTY = 0, 1, 2, 3, 4, 5
EXIT_REFUSED = 6

C = TypeVar("C", bound=AbstractContextManager[Any])


class NotFound(QueueboxError):
    """A tube or task named on the command line does not exist."""


class UsageError(QueueboxError):
    """The command line asks for something no server would do (found before any call)."""


class Empty(QueueboxError):
    """take found no task before its timeout."""


def to_json(value: Any) -> str:
    def fallback(obj: Any) -> Any:
        if isinstance(obj, bytes):
            return obj.decode("utf-8", "backslashreplace")
        return str(obj)

    return json.dumps(value, ensure_ascii=False, default=fallback)


def task_json(task: Task) -> dict[str, Any]:
    return {"id": task.id, "status": task.status.name.lower(), "data": task.data}


def print_task(task: Task, as_json: bool) -> None:
    if as_json:
        print(to_json(task_json(task)))
    else:
        print(f"{task.id}\t{task.status.name.lower()}\t{to_json(task.data)}")


def fail(prog: str, message: str, code: int, as_json: bool = False) -> int:
    """An error: one line on stderr, or one JSON object with --json; returns `code`."""
    if as_json:
        print(to_json({"error": message, "exit": code}), file=sys.stderr)
    else:
        print(f"{prog}: {message}", file=sys.stderr)
    return code


# (error class, exit status, message) in the order they are tried: most specific first.
_ERRORS: tuple[tuple[type[QueueboxError], int, Callable[[Any], str]], ...] = (
    (AuthError, EXIT_REFUSED, lambda e: f"authentication failed: {e.message}"),
    (AccessDenied, EXIT_REFUSED, lambda e: f"refused: {e.message}"),
    (NetworkError, EXIT_UNREACHABLE, lambda e: f"server unreachable: {e}"),
    (TubeNotFound, EXIT_NOT_FOUND, lambda e: f"tube {e.tube!r} does not exist"),
    (TaskNotFound, EXIT_NOT_FOUND, lambda e: e.text),
    (ScheduleNotFound, EXIT_NOT_FOUND, lambda e: e.text),
    (NotFound, EXIT_NOT_FOUND, str),
    (Empty, EXIT_EMPTY, str),
    (UsageError, EXIT_USAGE, str),
    (OptionRefused, EXIT_USAGE, str),
    (QueueError, EXIT_ERROR, lambda e: e.text),
    (ServerError, EXIT_ERROR, lambda e: f"server error {e.code}: {e.message}"),
    (QueueboxError, EXIT_ERROR, str),
)


def run(
    prog: str,
    parser: argparse.ArgumentParser,
    argv: list[str],
    connect: Callable[[argparse.Namespace], C],
    body: Callable[[C, argparse.Namespace], None],
) -> int:
    """Parse, connect (a context manager), run `body`; every client error becomes a
    message and an exit status."""
    args = parser.parse_args(argv)
    as_json = bool(getattr(args, "json", False))
    try:
        with connect(args) as conn:
            body(conn, args)
    except QueueboxError as exc:
        for kind, code, message in _ERRORS:
            if isinstance(exc, kind):
                return fail(prog, message(exc), code, as_json)
        raise
    return EXIT_OK


def confirm(question: str, yes: bool) -> None:
    """Go on when `yes` (--yes) or a person at the terminal answers y; else raise
    UsageError and change nothing. Without a terminal on stdin (a script, a pipe,
    cron) nobody can answer: refused, saying to pass --yes."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{question} Nobody to ask here: add --yes")
    # The question on stderr: stdout stays the command's output (--json, a pipe).
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    if answer.strip().lower() not in ("y", "yes"):
        raise UsageError("not confirmed: nothing changed")


def terminal_width() -> int | None:
    """Columns to fit a table in: the terminal's (or $COLUMNS); None when stdout is not
    a terminal and COLUMNS is unset (a pipe gets every column)."""
    if not sys.stdout.isatty() and "COLUMNS" not in os.environ:
        return None
    return shutil.get_terminal_size().columns
