"""`queuebox result TUBE ID [--wait S] [--json]`: a task's result, read or awaited.

Owns: the command's arguments, output and exit code. It prints the result
(`done`: the value the ack carried, as JSON; `failed`: the burial reason),
or with --json one object `{"tube", "id", "status", "result", "error"}` on
stdout whatever the status. Exit codes are the CLI's (commands.py): 0 done,
1 failed, 4 unknown (no such task, or its result expired or was never kept),
5 still pending after --wait. Connections and errors are `commands.py`'s;
must not import server/.
"""

from __future__ import annotations

import argparse

from queuebox.clients import blocking
from queuebox.clients.cli.commands import _parser, _run
from queuebox.clients.cli.output import Empty, NotFound, to_json
from queuebox.clients.errors import QueueboxError

from . import args as cliargs

__all__ = ["result"]


class Failed(QueueboxError):
    """The task failed: exit 1, the reason on stderr."""


def result(argv: list[str], prog: str = "queuebox result") -> int:
    """Print a task's result, waiting --wait seconds while it is pending."""
    parser = _parser(
        prog,
        "Show the result of task ID of TUBE (a tube created with result_ttl keeps them): "
        "exit 0 done, 1 failed, 4 unknown, 5 still pending after --wait.",
    )
    parser.add_argument("tube", help="tube name")
    parser.add_argument("id", type=int, help="task id")
    cliargs.add_seconds(
        parser, "--wait", 0.0, "how long to wait for a pending task to finish; 0 answers at once"
    )

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        found = conn.tube(args.tube).result(args.id, timeout=args.wait or None)
        if args.json:
            shown = {"tube": args.tube, "id": args.id, "status": found.status}
            print(to_json({**shown, "result": found.value, "error": found.error}))
        elif found.status == "done":
            print(to_json(found.value))
        if found.status == "failed":
            raise Failed(f"task {args.id} failed: {found.error or 'buried'}")
        if found.status == "pending":
            raise Empty(f"task {args.id} of {args.tube!r} still pending after {args.wait:g} s")
        if found.status == "unknown":
            raise NotFound(
                f"no result for task {args.id} of {args.tube!r} (no such task, or its "
                "result expired or was not kept: the tube's result_ttl)"
            )

    return _run(prog, parser, argv, body, reads=not args_wait(argv))


def args_wait(argv: list[str]) -> bool:
    """A --wait is the primary's to answer (a replica cannot be woken by the ack)."""
    return any(arg == "--wait" or arg.startswith("--wait=") for arg in argv)
