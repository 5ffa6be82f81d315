"""`queuebox tasks|ack|release|bury|kick|delete|truncate`: an operator's
commands on the tasks of one tube.

Owns: each command's arguments and output (a table that fits the terminal, or JSON).
`tasks` lists a tube by state a page at a time (`queuebox.tasks`, QUEUE.md §14). `ack`
and `release` act for the consumer holding a task: they join its queue session (its
uuid is in the listing) first, since only the holder may settle a taken task. `truncate`
and `delete --all` ask before they delete (`output.confirm`), or want --yes.
Connections, errors and exit statuses are `commands.py`'s and `output.py`'s. Must not
import server/.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from typing import Any

from queuebox.clients import blocking
from queuebox.clients.blocking import Tube
from queuebox.clients.calls import modern
from queuebox.clients.cli.commands import _parser, _require_tube, _run, _task_count
from queuebox.clients.cli.output import NotFound, UsageError, print_task, to_json
from queuebox.clients.errors import NoSuchProcedure, TaskNotFound, TubeNotFound

from . import args as cliargs
from . import output as cliout

__all__ = ["ack", "bury", "delete", "kick", "release", "tasks", "truncate"]

STATES = ("ready", "taken", "delayed", "buried")


def _tube_and_id(prog: str, description: str) -> argparse.ArgumentParser:
    parser = _parser(prog, description)
    parser.add_argument("tube", help="tube name")
    parser.add_argument("id", type=int, help="task id")
    return parser


def _page(tube: Tube, **opts: Any) -> dict[str, Any]:
    """`queuebox.tasks` with these options (None ones left out)."""
    try:
        return tube.connection.run(modern.tasks(tube.name, opts))
    except NoSuchProcedure as exc:
        if isinstance(exc, TubeNotFound):
            raise
        raise UsageError(
            "this server lists no tasks (queuebox.tasks is queuebox's own call)"
        ) from None


def _joined_holder(conn: blocking.Connection, tube: Tube, task_id: int) -> None:
    """Join the queue session holding the task, if another holds it: only the holder
    may ack or release a taken task (a consumer that hangs, say)."""
    found = _page(tube, id=task_id)["tasks"]
    if not found:
        raise NotFound(f"Task {task_id} not found")
    task = found[0]
    if task["state"] != "taken":
        raise UsageError(
            f"task {task_id} is {task['state']}: only a taken task is acked or released "
            "(delete removes a task in any state, kick makes a buried one ready)"
        )
    if "session" in task:
        conn.identify(uuid.UUID(task["session"]).bytes)


# -- the listing -------------------------------------------------------------------------


def _when(task: dict[str, Any], now: float) -> str:
    """What is next for a task, in words."""
    if task.get("reason"):
        return str(task["reason"])
    if "ready_at" in task:
        return f"ready in {max(task['ready_at'] - now, 0):.1f} s"
    if "deadline" in task:
        return f"ttr ends in {max(task['deadline'] - now, 0):.1f} s"
    if "created" in task:
        return f"put {max(now - task['created'], 0):.1f} s ago"
    return ""


def tasks_table(found: list[dict[str, Any]], width: int | None, now: float) -> str:
    header = ["id", "state", "attempts", "next", "data"]
    rows = [
        [
            str(task["id"]),
            task["state"],
            str(task.get("attempts", "")),
            _when(task, now),
            to_json(task.get("data")),
        ]
        for task in found
    ]
    return cliout.table(header, rows, width, text=frozenset({3, 4}))


def tasks(argv: list[str], prog: str = "queuebox tasks") -> int:
    """List a tube's tasks by state, a page at a time."""
    parser = _parser(
        prog,
        "List the tasks of TUBE: every task by id, or those in one state in take order; "
        "with their attempts, what comes next for them and their data.",
    )
    parser.add_argument("tube", help="tube name")
    parser.add_argument("--state", choices=STATES, help="only tasks in this state (default: all)")
    parser.add_argument(
        "--limit", type=cliargs.positive_int, default=100, help="tasks per page (at most 1000)"
    )
    parser.add_argument(
        "--after",
        type=json.loads,
        metavar="CURSOR",
        help="start after this cursor: the `next` a page printed (default: from the start)",
    )
    parser.add_argument("--all", action="store_true", help="every page, not just the first")

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        tube = conn.tube(args.tube)
        after = args.after
        while True:
            page = _page(tube, state=args.state, limit=args.limit, after=after)
            if args.json:
                print(to_json(page))
            elif page["tasks"]:
                print(tasks_table(page["tasks"], cliout.terminal_width(), time.time()))
            after = page.get("next")
            if after is None or not args.all:
                break
        if after is not None and not args.json:
            print(f"{prog}: more: --after '{to_json(after)}' (or --all)", file=sys.stderr)
        if not args.json and not page["tasks"] and args.after is None:
            print(f"{prog}: no tasks", file=sys.stderr)

    return _run(prog, parser, argv, body, reads=True)


# -- one task ----------------------------------------------------------------------------


def ack(argv: list[str], prog: str = "queuebox ack") -> int:
    """Ack a taken task for whoever holds it."""
    parser = _tube_and_id(prog, "Ack (finish) task ID of TUBE, taken by any consumer.")

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        tube = conn.tube(args.tube)
        _joined_holder(conn, tube, args.id)
        print_task(tube.ack(args.id), args.json)

    return _run(prog, parser, argv, body)


def release(argv: list[str], prog: str = "queuebox release") -> int:
    """Give a taken task back to the queue, for whoever holds it."""
    parser = _tube_and_id(prog, "Give task ID of TUBE back (ready, or delayed), whoever took it.")
    parser.add_argument(
        "--delay",
        type=cliargs.seconds,
        help="seconds before it is ready again (default: at once, or the tube's backoff)",
    )

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        tube = conn.tube(args.tube)
        _joined_holder(conn, tube, args.id)
        print_task(tube.release(args.id, delay=args.delay), args.json)

    return _run(prog, parser, argv, body)


def bury(argv: list[str], prog: str = "queuebox bury") -> int:
    """Bury a task (set it aside), with a reason."""
    parser = _tube_and_id(
        prog, "Bury task ID of TUBE (any state): kept, never taken, until kicked."
    )
    parser.add_argument("--reason", help="why, kept with the task (default: none)")

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        print_task(conn.tube(args.tube).bury(args.id, reason=args.reason), args.json)

    return _run(prog, parser, argv, body)


def delete(argv: list[str], prog: str = "queuebox delete") -> int:
    """Delete a task in any state, or every task (in a state) after asking."""
    parser = _parser(
        prog,
        "Delete task ID of TUBE, in any state; or with --all every task of TUBE (in "
        "--state), one by one, after asking.",
    )
    parser.add_argument("tube", help="tube name")
    parser.add_argument("id", type=int, nargs="?", help="task id")
    parser.add_argument("--all", action="store_true", help="every task (asks first)")
    parser.add_argument(
        "--state", choices=STATES, help="with --all: only tasks in this state (default: all)"
    )
    cliargs.add_yes_argument(parser)

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        if args.all == (args.id is not None) or (args.state and not args.all):
            raise UsageError("give a task ID, or --all (with --state S to keep other states)")
        if not args.all:
            print_task(conn.tube(args.tube).delete(args.id), args.json)
            return
        _require_tube(conn, args.tube)
        if not args.yes:
            count = _task_count(conn, args.tube, args.state or "total")
            tasks = f"{'all' if count is None else count} {args.state or ''} task(s)"
            cliout.confirm(f"delete {' '.join(tasks.split())} of tube {args.tube!r}?", args.yes)
        deleted = _delete_every(conn.tube(args.tube), args.state)
        if args.json:
            print(to_json({"tube": args.tube, "state": args.state, "deleted": deleted}))
        else:
            print(f"deleted {deleted} task(s)")

    return _run(prog, parser, argv, body)


def _delete_every(tube: Tube, state: str | None) -> int:
    """Delete the tasks a listing of `tube` (in `state`) shows, a page at a time; the
    cursor moves on, so tasks put meanwhile behind it are deleted too, and it ends."""
    deleted, after = 0, None
    while True:
        page = _page(tube, state=state, limit=1000, after=after)
        for task in page["tasks"]:
            try:
                tube.delete(task["id"])
            except TaskNotFound:
                continue  # acked or deleted meanwhile
            deleted += 1
        after = page.get("next")
        if after is None:
            return deleted


# -- the whole tube ----------------------------------------------------------------------


def kick(argv: list[str], prog: str = "queuebox kick") -> int:
    """Make buried tasks ready again: the oldest COUNT, all, or one by id."""
    parser = _parser(
        prog,
        "Make up to COUNT buried tasks of TUBE ready again, oldest first; or every one "
        "(--all); or the one with --id N, its tries reset.",
    )
    parser.add_argument("tube", help="tube name")
    parser.add_argument(
        "count", nargs="?", type=cliargs.positive_int, help="how many at most (default 1)"
    )
    parser.add_argument("--all", action="store_true", help="every buried task")
    parser.add_argument(
        "--id",
        type=int,
        metavar="N",
        help="only task N, which must be buried (default: the oldest)",
    )

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        tube = conn.tube(args.tube)
        if args.id is not None:
            if args.all or args.count is not None:
                raise UsageError("give --id N, or a COUNT, or --all")
            print_task(_kick_one(tube, args.id), args.json)
            return
        count = args.count or 1
        _require_tube(conn, args.tube)
        if args.all:
            count = max(int(tube.statistics()["tasks"]["buried"]), 1)
        kicked = tube.kick(count)
        print(to_json({"kicked": kicked}) if args.json else f"kicked {kicked}")

    return _run(prog, parser, argv, body)


def _kick_one(tube: Tube, task_id: int) -> Any:
    """`queuebox.kick_task`, with the CLI's words for what can go wrong."""
    try:
        return tube.kick_task(task_id)
    except NoSuchProcedure as exc:
        if isinstance(exc, TubeNotFound):
            raise
        raise UsageError(
            "this server kicks no task by id (queuebox.kick_task is queuebox's own call)"
        ) from None


def truncate(argv: list[str], prog: str = "queuebox truncate") -> int:
    """Delete every task of a tube (after asking)."""
    parser = _parser(prog, "Delete every task of TUBE, whatever its state. Asks first.")
    parser.add_argument("tube", help="tube name")
    cliargs.add_yes_argument(parser)

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        tube = conn.tube(args.tube)
        _require_tube(conn, args.tube)
        total = _task_count(conn, args.tube)
        tasks = "every task" if total is None else f"all {total} task(s)"
        cliout.confirm(f"delete {tasks} of tube {args.tube!r}?", args.yes)
        tube.truncate()
        print(to_json({"truncated": args.tube, "tasks": total}) if args.json else "truncated")

    return _run(prog, parser, argv, body)
