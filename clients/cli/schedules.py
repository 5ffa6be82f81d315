"""`queuebox schedule add|list|pause|resume|delete`: periodic tasks kept by the server.

Owns the command's arguments and output (a table, or JSON with --json): `add NAME
TUBE --cron EXPR | --every SECONDS [--tz ZONE] [--data JSON] [--missed skip|catch_up]
[--pri/--ttl/--ttr/--delay/--utube]`, `list [NAME]` (a replica answers it too),
`pause NAME`, `resume NAME`, `delete NAME`. Calls through `clients.blocking`
(`schedule`, `schedules`, `schedule_pause`...); connections, errors and exit codes
are commands.py's and output.py's (4: no such schedule). Must not import server/.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from typing import Any

from queuebox.clients import blocking
from queuebox.clients.cli.commands import _parser, _run, _value
from queuebox.clients.cli.output import NotFound, UsageError, to_json

from . import args as cliargs
from . import output as cliout

__all__ = ["schedule"]

ACTIONS = ("add", "list", "pause", "resume", "delete")


def _when(seconds: float | None, now: float) -> str:
    if seconds is None:
        return "-"
    moment = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")
    delta = seconds - now
    return (
        f"{moment}Z ({'in ' if delta >= 0 else ''}{abs(delta):.0f} s{' ago' if delta < 0 else ''})"
    )


def schedules_table(found: list[dict[str, Any]], width: int | None, now: float) -> str:
    header = ["name", "tube", "when", "state", "next", "last", "fired", "missed"]
    rows = [
        [
            s["name"],
            s["tube"],
            f"cron {s['cron']} {s['tz']}" if "cron" in s else f"every {s['every']:g} s",
            s["state"],
            _when(s["next_tick"], now),
            _when(s["last_tick"], now),
            str(s["fired"]),
            f"{s['missed_ticks']} ({s['missed']})",
        ]
        for s in found
    ]
    return cliout.table(header, rows, width, text=frozenset({2, 4, 5}))


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=ACTIONS, help="what to do")
    parser.add_argument("name", nargs="?", help="the schedule's name (list: all without it)")
    parser.add_argument("tube", nargs="?", help="add: the tube its tasks go into")
    when = parser.add_argument_group("add: when (one of)")
    when.add_argument(
        "--cron", metavar="EXPR", help="5 fields: minute hour day month weekday (default: none)"
    )
    when.add_argument(
        "--every", type=cliargs.seconds, metavar="SECONDS", help="an interval (default: none)"
    )
    parser.add_argument("--tz", help="add: the cron expression's time zone (default: UTC)")
    parser.add_argument(
        "--data", type=_value, help="add: the task's data, JSON, else text (default: null)"
    )
    parser.add_argument(
        "--missed",
        choices=("skip", "catch_up"),
        help="add: ticks missed while no primary ran: dropped, or one task for all (default: skip)",
    )
    for flag, kind, text in (
        ("--pri", int, "priority of the tasks, ttl drivers (default: the tube's)"),
        ("--ttl", cliargs.seconds, "seconds each task lives (default: the tube's)"),
        ("--ttr", cliargs.seconds, "seconds a consumer has per task (default: the tube's)"),
        ("--delay", cliargs.seconds, "seconds before each task is ready (default: 0)"),
        ("--utube", str, "sub-queue, utube and utubettl (default: none)"),
    ):
        parser.add_argument(flag, type=kind, help=f"add: {text}")


def _added(conn: blocking.Connection, args: argparse.Namespace) -> dict[str, Any]:
    if args.name is None or args.tube is None:
        raise UsageError("add needs NAME and TUBE")
    if (args.cron is None) == (args.every is None):
        raise UsageError("add needs one of --cron and --every")
    put = {k: getattr(args, k) for k in ("pri", "ttl", "ttr", "delay", "utube")}
    opts = {k: v for k, v in put.items() if v is not None}
    return conn.schedule(
        args.name,
        args.tube,
        cron=args.cron,
        every=args.every,
        tz=args.tz,
        data=args.data,
        opts=opts or None,
        missed=args.missed,
    )


def schedule(argv: list[str], prog: str = "queuebox schedule") -> int:
    """Add, list, pause, resume or delete a schedule."""
    parser = _parser(
        prog,
        "Schedules kept by the server: a task into TUBE at every tick of a cron "
        "expression or an interval; they survive restarts and failovers and fire once "
        "per tick. Changing one needs write on its tube (or admin).",
    )
    _add_arguments(parser)

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        if args.action == "list":
            found = conn.schedules(args.name)
            if args.name is not None and not found:
                raise NotFound(f"Schedule '{args.name}' not found")
            if args.json:
                print(to_json(found))
            elif found:
                print(schedules_table(found, cliout.terminal_width(), time.time()))
            return
        if args.action == "add":
            shown = _added(conn, args)
        elif args.name is None:
            raise UsageError(f"{args.action} needs NAME")
        else:
            shown = getattr(conn, f"schedule_{args.action}")(args.name)
        if args.json:
            print(to_json(shown))
        else:
            print(schedules_table([shown], cliout.terminal_width(), time.time()))

    return _run(prog, parser, argv, body, reads=argv[:1] == ["list"])
