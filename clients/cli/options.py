"""`queuebox tube-options`: show or change what queuebox adds to a tube: its retry
options, rate limit and buried retention (`queuebox.tube_options`, QUEUE.md §14).

Owns: the command's arguments (`--rate-limit MAX/SECONDS[/utube]`, `off` to remove
an option) and its output (one line of text, or JSON). Connections, errors and exit
statuses are `commands.py`'s and `output.py`'s. Must not import server/.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

from queuebox.clients import blocking
from queuebox.clients.cli.commands import _parser, _run
from queuebox.clients.cli.output import to_json
from queuebox.clients.cli.tasks import _page

from . import args as cliargs

__all__ = ["tube_options"]


def _rate_limit(text: str) -> dict[str, Any] | bool:
    """`--rate-limit MAX/SECONDS[/utube]` (e.g. 100/60), or `off`."""
    if text == "off":
        return False
    most, sep, interval = text.partition("/")
    interval, per, utube = interval.partition("/")
    limit: dict[str, Any] = {}
    with contextlib.suppress(argparse.ArgumentTypeError):
        limit = {"max": cliargs.positive_int(most), "interval": cliargs.seconds(interval)}
    if not sep or not limit or not limit["interval"] or (per and utube != "utube"):
        raise argparse.ArgumentTypeError(
            f"expected MAX/SECONDS (e.g. 100/60), MAX/SECONDS/utube or off, got {text!r}"
        )
    if per:
        limit["per_utube"] = True
    return limit


def _off_or(kind: Any) -> Any:
    """An option's value, or `off` (False: the option goes)."""

    def parse(text: str) -> Any:
        return False if text == "off" else kind(text)

    return parse


def _options_text(found: dict[str, Any]) -> str:
    words = []
    for key, value in found.items():
        if key == "rate_limit":
            each = " per utube" if value.get("per_utube") else ""
            words.append(f"rate_limit {value['max']} per {value['interval']:g} s{each}")
        else:
            words.append(f"{key} {value:g}")
    return ", ".join(words)


def tube_options(argv: list[str], prog: str = "queuebox tube-options") -> int:
    """Show or change a tube's retry options, rate limit and buried retention."""
    parser = _parser(
        prog,
        "Show the retry options, rate limit and buried retention of TUBE, or change them "
        "(admin). Retries: the server counts every take, waits backoff·2^(attempts-1) s (at "
        "most --backoff-max) before a task that came back is ready again, and buries it "
        "with a reason after --max-attempts. A rate limit holds takes (from every consumer) "
        "to MAX per SECONDS; buried tasks are kept at most --buried-max and --buried-ttl s.",
    )
    parser.add_argument("tube", help="tube name")
    cliargs.add_typed(
        parser,
        ("--max-attempts", int, "takes a task may have; 0: no limit (default: keep)"),
        ("--backoff", cliargs.seconds, "first wait in seconds; 0: none (default: keep)"),
        ("--backoff-max", cliargs.seconds, "the longest wait (default: keep)"),
    )
    parser.add_argument(
        "--rate-limit",
        type=_rate_limit,
        metavar="MAX/SECONDS",
        help="at most MAX takes in any SECONDS, e.g. 100/60; MAX/SECONDS/utube: each utube "
        "its own (utube drivers); off: none (default: keep)",
    )
    parser.add_argument(
        "--buried-max",
        type=_off_or(int),
        metavar="N",
        help="keep at most N buried tasks, the longest buried dropped first; off: no "
        "limit (default: keep)",
    )
    parser.add_argument(
        "--buried-ttl",
        type=_off_or(cliargs.seconds),
        metavar="SECONDS",
        help="drop a buried task after SECONDS; off: keep it (default: keep)",
    )
    cliargs.add_typed(
        parser,
        ("--result-ttl", cliargs.seconds, "seconds a task's result is kept (queuebox result); "
         "0: none (default: keep)"),
        ("--key-window", cliargs.seconds, "seconds a put key answers its first task "
         "(exactly-once puts); 0: keys off (default: keep; a new tube: a day)"),
    )  # fmt: skip

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        changes = {
            key: value
            for key, value in (
                ("max_attempts", args.max_attempts),
                ("backoff", args.backoff),
                ("backoff_max", args.backoff_max),
                ("rate_limit", args.rate_limit),
                ("buried_max", args.buried_max),
                ("buried_ttl", args.buried_ttl),
                ("result_ttl", args.result_ttl),
                ("key_window", args.key_window),
            )
            if value is not None
        }
        if changes:
            found = conn.tube_options(args.tube, **changes)
        else:
            page = _page(conn.tube(args.tube), limit=1)
            found = {**page["retries"], **page.get("limits", {})}
        if args.json:
            print(to_json(found))
        elif found:
            print(_options_text(found))
        else:
            print(
                "no retry options, rate limit or retention: a task that comes back is "
                "ready at once, and a buried one is kept, as in the module"
            )

    return _run(prog, parser, argv, body)
