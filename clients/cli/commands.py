"""`queuebox ping|tubes|stats|put|take|peek|create-tube|drop-tube`: the client's commands.

Owns: each command's arguments, its output (text or ``--json``) and its exit code. The
`queuebox` entry point (queuebox/cli.py) imports this module only when one of these
commands runs; each function here is `(argv, prog) -> exit code`. Talks to the server
through `clients.blocking` only; must not import server/, drivers/ or storage/.

Where to connect: --host/--port/--user/--password-file (clients/cli/args.py, shared by every
client-side command), else QUEUEBOX_HOST, QUEUEBOX_PORT, QUEUEBOX_USER,
QUEUEBOX_PASSWORD, else the host:port of QUEUEBOX_LISTEN, else 127.0.0.1:3301. For a
primary + replicas set: --address HOST:PORT, repeatable (else QUEUEBOX_ADDRESSES,
comma-separated): a command that changes something runs on the writable one; one that
only reads (stats, tubes, peek, tasks) on the writable one if it answers, else on the
first instance that does (a replica answers reads from its copy); ping looks for the
writable one.

Destructive commands (drop-tube here; truncate and delete --all in tasks.py) ask
first (`cliout.confirm`), or want --yes.

Exit codes: 0 ok, 1 other server error, 2 bad usage (or not confirmed), 3 cannot reach
the server, 4 no such tube or task, 5 take found no task in time, 6 refused (a wrong
login, or a call the user has no right to).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping
from itertools import islice
from typing import Any

from queuebox.clients import blocking
from queuebox.clients.cli.output import Empty, NotFound, UsageError, print_task, to_json
from queuebox.clients.errors import AccessDenied, NetworkError
from queuebox.clients.failover import WRITABLE_STATE, parse_addresses

from . import args as cliargs
from . import clusterview
from . import output as cliout
from .connect import connect

__all__ = [
    "create_tube", "drop_tube", "peek", "ping", "promote", "put", "stats", "take", "tubes"
]  # fmt: skip


def _parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = cliargs.ArgumentParser(prog=prog, description=description)
    group = cliargs.add_connection_arguments(parser)
    cliargs.add_seconds(group, "--connect-timeout", 5.0, "give up connecting after this long")
    cliargs.add_failover_arguments(parser, group)
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    return parser


def _connect(args: argparse.Namespace) -> blocking.Connection:
    if args.addresses and not args.etcd_endpoints and getattr(args, "reads_only", False):
        return _connect_for_reads(args)
    return connect(
        args,
        failover_timeout=args.failover_timeout,
        connect_timeout=args.connect_timeout,
        call_timeout=30.0,
        # One address: fail fast. Several: a read-only refusal means finding the writable
        # one. A cluster: the self-routing client's default, as before.
        reconnect=bool(args.addresses or args.etcd_endpoints),
        tls=args.tls,
    )


def _connect_for_reads(args: argparse.Namespace) -> blocking.Connection:
    """For a command that only reads, of several addresses: the writable instance if
    one answers, else the first that answers. One pass, no waiting for a primary: a
    replica serves reads from its copy (which may lag the primary's)."""
    found: list[blocking.Connection] = []
    writable: blocking.Connection | None = None
    unreachable: list[str] = []
    try:
        for host, port in parse_addresses(args.addresses):
            try:
                conn = blocking.connect(
                    host,
                    port,
                    args.user,
                    args.password,
                    connect_timeout=args.connect_timeout,
                    call_timeout=30.0,
                    reconnect=False,
                )
            except NetworkError as exc:
                unreachable.append(f"{host}:{port}: {exc}")
                continue
            found.append(conn)
            if conn.state() == WRITABLE_STATE:
                writable = conn
                break
    except BaseException:
        for conn in found:
            conn.close()
        raise
    if not found:
        raise NetworkError("no instance answered: " + "; ".join(unreachable))
    chosen = writable or found[0]
    for conn in found:
        if conn is not chosen:
            conn.close()
    return chosen


def _value(text: str) -> Any:
    """JSON when it parses (numbers, true, {...}), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


Body = Callable[[blocking.Connection, argparse.Namespace], None]


def _run(
    prog: str, parser: argparse.ArgumentParser, argv: list[str], body: Body, reads: bool = False
) -> int:
    """Parse, connect, run `body`; every error a message and an exit code (cliout).
    `reads`: the command changes nothing, so a replica may answer it."""
    parser.set_defaults(reads_only=reads)
    return cliout.run(prog, parser, argv, _connect, body)


def _task_count(conn: blocking.Connection, tube: str, state: str = "total") -> int | None:
    """How many tasks `tube` has (in `state`), for a question; None when the user
    may not read its statistics (an admin without read may still drop it)."""
    try:
        return int(conn.tube(tube).statistics()["tasks"][state])
    except AccessDenied:
        return None


def _require_tube(conn: blocking.Connection, name: str) -> None:
    if not conn.tube_exists(name):
        raise NotFound(f"tube {name!r} does not exist")


# -- the commands ---------------------------------------------------------------------


def ping(argv: list[str], prog: str = "queuebox ping") -> int:
    """Check that the server answers; print its version and the round trip."""
    parser = _parser(prog, "Send an IPROTO PING and report the round-trip time.")
    # One instance: $QUEUEBOX_ETCD_ENDPOINTS is also a server's own setting, and a
    # server's healthcheck pings that server, not the cluster (--etcd-endpoints does).
    parser.set_defaults(etcd_endpoints=None)

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        started = time.perf_counter()
        conn.ping()
        millis = (time.perf_counter() - started) * 1000
        if args.etcd_endpoints:  # every shard's primary answered
            version, where = "?", f"the cluster {args.etcd_prefix} at {args.etcd_endpoints}"
        else:
            version = conn.greeting.version_text if conn.greeting else "?"
            where = f"{conn.host}:{conn.port}"
        if args.json:
            print(to_json({"ok": True, "address": where, "version": version, "ms": millis}))
        else:
            print(f"PONG from {where} (Tarantool {version} protocol) in {millis:.2f} ms")

    return _run(prog, parser, argv, body)


def promote(argv: list[str], prog: str = "queuebox promote") -> int:
    """Make a read-only replica the writable primary (admin rights; not under etcd)."""
    parser = _parser(
        prog,
        "Promote the replica at --host/--port: it stops following its primary and "
        "serves changes (queue.state() RUNNING). Refused where etcd decides failover.",
    )

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        answer = conn.call("queuebox.promote")[0]
        where = f"{conn.host}:{conn.port}"
        if args.json:
            print(to_json({"address": where, **answer}))
        elif answer["promoted"]:
            print(f"{where} promoted: {answer['state']} from LSN {answer['lsn']}")
        else:
            print(f"{where} was already {answer['state']} (LSN {answer['lsn']})")

    return _run(prog, parser, argv, body)


def tubes(argv: list[str], prog: str = "queuebox tubes") -> int:
    """List the tubes, one per line."""
    parser = _parser(prog, "List the tubes.")

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        names = conn.tubes()
        if args.json:
            print(to_json(names))
        elif names:
            print("\n".join(names))
        else:  # stdout stays empty, so `queuebox tubes | wc -l` still counts 0
            print(f"{prog}: no tubes", file=sys.stderr)

    return _run(prog, parser, argv, body, reads=True)


STDIN_BATCH = 1000  # lines of stdin put (pipelined) before their tasks are printed
TASK_COLUMNS = ("ready", "taken", "delayed", "buried", "done", "total")
CALL_COLUMNS = (
    "put", "take", "ack", "release", "bury", "kick", "delete", "touch", "ttr", "ttl", "delay"
)  # fmt: skip


def stats_table(
    stats: Mapping[str, Mapping[str, Any]],
    width: int | None = None,
    shards: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """Statistics of several tubes as an aligned text table, one row per tube; the call
    counters a `width` has no room for are left out (--json has them all). With
    `shards` (tube -> shard -> its statistics: a sharded cluster), each tube's row is
    its sum, followed by a row per shard."""
    header = ["tube", *(["shard"] if shards is not None else []), *TASK_COLUMNS, *CALL_COLUMNS]
    rows = []
    for name in sorted(stats):
        parts: list[tuple[str | None, Mapping[str, Any]]] = [
            (clusterview.SUM if shards is not None else None, stats[name])
        ]
        parts += sorted((shards or {}).get(name, {}).items())
        for shard, one in parts:
            tasks, calls = one.get("tasks", {}), one.get("calls", {})
            rows.append(
                [name, *([shard] if shard is not None else [])]
                + [str(tasks.get(key, 0)) for key in TASK_COLUMNS]
                + [str(calls.get(key, 0)) for key in CALL_COLUMNS]
            )
    return cliout.table(header, rows, width)


def stats(argv: list[str], prog: str = "queuebox stats") -> int:
    """Print task counts and call counters of every tube, or of one; of a sharded
    cluster (a router, or --etcd-endpoints), each shard's too."""
    parser = _parser(prog, "Show the statistics of every tube, or of TUBE.")
    parser.add_argument("tube", nargs="?", help="only this tube (default: every tube)")

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        if args.tube is not None:
            _require_tube(conn, args.tube)
            result = {args.tube: conn.statistics(args.tube)}
        else:
            result = conn.statistics()
        found = clusterview.view(conn, args.tube)
        shards = None if found is None else clusterview.per_shard(found, args.tube)
        for name, by_shard in (shards or {}).items():
            if name in result:
                result[name] = {**result[name], "shards": by_shard}
        if args.json:
            print(to_json(result[args.tube] if args.tube else result))
        elif result:
            print(stats_table(result, cliout.terminal_width(), shards))
        else:
            print("no tubes")
        for failed in [] if found is None else clusterview.failed_shards(found):
            print(f"{prog}: {failed}", file=sys.stderr)

    return _run(prog, parser, argv, body, reads=True)


def put(argv: list[str], prog: str = "queuebox put") -> int:
    """Put one task; DATA is JSON when it parses, else a string; `-`: a task per line
    of stdin."""
    parser = _parser(
        prog,
        "Put a task into TUBE. DATA is JSON when it parses, else a string; - reads stdin: "
        "one task per line (blank lines skipped), e.g. `jq -c .[] jobs.json | queuebox put "
        "jobs -`.",
    )
    parser.add_argument("tube", help="tube name")
    parser.add_argument(
        "data", help="the task's data: JSON when it parses, else the text; - for stdin"
    )
    cliargs.add_typed(
        parser,
        ("--pri", int, "priority, smaller first (ttl drivers; default: the tube's)"),
        ("--ttl", cliargs.seconds, "seconds the task lives (default: the tube's)"),
        ("--ttr", cliargs.seconds, "seconds a consumer has before the task is retaken "
         "(default: the tube's)"),
        ("--delay", cliargs.seconds, "seconds before the task becomes ready (default 0)"),
    )  # fmt: skip
    parser.add_argument("--utube", help="sub-queue (utube, utubettl; default: none)")
    parser.add_argument(
        "--key",
        help="exactly-once key: a second put of KEY within the tube's key_window prints "
        "the task the first one made instead of adding one (default: a fresh key, so a "
        "put retried after a failover is not doubled); not with - (stdin)",
    )

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        opts = {"pri": args.pri, "ttl": args.ttl, "ttr": args.ttr, "delay": args.delay}
        tube = conn.tube(args.tube)
        if args.data != "-":
            task = tube.put(_value(args.data), utube=args.utube, key=args.key, **opts)
            print_task(task, args.json)
            return
        if args.key is not None:
            raise UsageError("--key puts one task: give DATA, not - (stdin)")
        lines = (line.rstrip("\r\n") for line in sys.stdin)
        values = (_value(line) for line in lines if line.strip())
        while batch := list(islice(values, STDIN_BATCH)):
            for task in tube.put_many(batch, window=64, utube=args.utube, **opts):
                print_task(task, args.json)

    return _run(prog, parser, argv, body)


def take(argv: list[str], prog: str = "queuebox take") -> int:
    """Take one task, print it and ack it (or give it back with --release)."""
    parser = _parser(
        prog,
        "Take a task from TUBE, ack it (or release it) and print it in the state it ends in "
        "(done, or ready/delayed after --release).",
    )
    parser.add_argument("tube", help="tube name")
    cliargs.add_seconds(parser, "--timeout", 0.0, "how long to wait for a task; 0 answers at once")
    parser.add_argument(
        "--release", action="store_true", help="give the task back instead of acking it"
    )

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        tube = conn.tube(args.tube)
        task = tube.take(args.timeout)
        if task is None:
            raise Empty(f"no task in tube {args.tube!r} within {args.timeout:g} s")
        settled = tube.release(task) if args.release else tube.ack(task)
        print_task(settled, args.json)

    return _run(prog, parser, argv, body)


def peek(argv: list[str], prog: str = "queuebox peek") -> int:
    """Print one task without changing it."""
    parser = _parser(prog, "Show task ID of TUBE.")
    parser.add_argument("tube", help="tube name")
    parser.add_argument("id", type=int, help="task id")

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        print_task(conn.tube(args.tube).peek(args.id), args.json)

    return _run(prog, parser, argv, body, reads=True)


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, _value(value)


# Tube options each driver reads (QUEUE.md §2-§5, §14, §16, §17); the server, like upstream,
# ignores others.
_COMMON_OPTIONS = frozenset(
    {"temporary", "if_not_exists", "engine", "max_attempts", "backoff", "backoff_max"}
    | {"rate_limit", "buried_max", "buried_ttl", "result_ttl", "key_window"}
)
_TTL_OPTIONS = frozenset({"ttl", "ttr", "pri"})
TUBE_OPTIONS: dict[str, frozenset[str]] = {
    "fifo": _COMMON_OPTIONS,
    "fifottl": _COMMON_OPTIONS | _TTL_OPTIONS,
    "limfifottl": _COMMON_OPTIONS | _TTL_OPTIONS | {"capacity"},
    "utube": _COMMON_OPTIONS | {"storage_mode"},
    "utubettl": _COMMON_OPTIONS | _TTL_OPTIONS | {"storage_mode"},
}


def create_tube(argv: list[str], prog: str = "queuebox create-tube") -> int:
    """Create a tube of a driver type with options."""
    parser = _parser(prog, "Create tube NAME of driver TYPE.")
    parser.add_argument("name", help="tube name")
    parser.add_argument("type", choices=sorted(TUBE_OPTIONS), help="queue driver")
    parser.add_argument(
        "--opt",
        type=_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="tube option, repeatable, VALUE as JSON when it parses (e.g. ttl=60, "
        "temporary=true; default: none); "
        + "; ".join(f"{t}: {', '.join(sorted(o))}" for t, o in TUBE_OPTIONS.items()),
    )

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        known = TUBE_OPTIONS[args.type]
        unknown = sorted(key for key, _ in args.opt if key not in known)
        if unknown:
            raise UsageError(
                f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for "
                f"{args.type}; known: {', '.join(sorted(known))}"
            )
        conn.create_tube(args.name, args.type, **dict(args.opt))
        if args.json:
            print(to_json({"created": args.name, "type": args.type, "opts": dict(args.opt)}))
        else:
            print(f"created tube {args.name!r} ({args.type})")

    return _run(prog, parser, argv, body)


def drop_tube(argv: list[str], prog: str = "queuebox drop-tube") -> int:
    """Drop a tube and its tasks (after asking)."""
    parser = _parser(prog, "Drop tube NAME and all its tasks. Asks first.")
    parser.add_argument("name", help="tube name")
    cliargs.add_yes_argument(parser)

    def body(conn: blocking.Connection, args: argparse.Namespace) -> None:
        _require_tube(conn, args.name)
        if not args.yes:
            count = _task_count(conn, args.name)
            tasks = "all its tasks" if count is None else f"its {count} task(s)"
            cliout.confirm(f"drop tube {args.name!r} and {tasks}?", args.yes)
        conn.tube(args.name).drop()
        print(to_json({"dropped": args.name}) if args.json else f"dropped tube {args.name!r}")

    return _run(prog, parser, argv, body)
