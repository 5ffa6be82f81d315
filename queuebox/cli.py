"""The `queuebox` command: a table of subcommands, each imported only when run.

Owns: `COMMANDS` and the top-level usage text. It lives in the umbrella
package because it reaches both `queuebox.server` and `queuebox.clients`,
which never import each other. A command is one line, name -> (loader,
one-line help); the loader imports its module only when the command runs, so
`queuebox serve` never imports client code and `queuebox ping` never imports
the server. A command's function is `main(argv: list[str], prog: str) -> int`
and parses its own arguments. Must not hold any command's logic.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable

from queuebox import __version__
from queuebox.compiled import build_label

Command = Callable[..., int | None]


def _serve() -> Command:
    from queuebox.server.start.serve import main

    return main


def _router() -> Command:
    from queuebox.server.route.router import main

    return main


def _wal() -> Command:
    from queuebox.server.start.walcli import main

    return main


def _shard() -> Command:
    from queuebox.shardcli import main

    return main


def _backup(name: str) -> Callable[[], Command]:
    def load() -> Command:
        from queuebox import backupcli

        command: Command = getattr(backupcli, name)
        return command

    return load


def _bench() -> Command:
    from queuebox.clients.bench.cli import main

    return main


def _pipeline() -> Command:
    from queuebox.clients.pipeline.cli import main

    return main


def _status() -> Command:
    from queuebox.clients.cli.status import main

    return main


def _worker() -> Command:
    from queuebox.clients.worker.cli import main

    return main


def _client(name: str) -> Callable[[], Command]:
    def load() -> Command:
        from queuebox.clients.cli import commands as cli

        command: Command = getattr(cli, name)
        return command

    return load


def _options() -> Command:
    from queuebox.clients.cli.options import tube_options

    return tube_options


def _result() -> Command:
    from queuebox.clients.cli.results import result

    return result


def _tasks(name: str) -> Callable[[], Command]:
    def load() -> Command:
        from queuebox.clients.cli import tasks as clitasks

        command: Command = getattr(clitasks, name)
        return command

    return load


def _schedules() -> Command:
    from queuebox.clients.cli.schedules import schedule

    return schedule


COMMANDS: dict[str, tuple[Callable[[], Command], str]] = {
    "serve": (_serve, "run the queue server"),
    "router": (_router, "route a sharded cluster's clients to its shards (docs/cluster.md)"),
    "wal": (_wal, "wal cat PATH...: print WAL/snapshot records as JSON lines"),
    "backup": (_backup("backup_main"), "copy a running server's snapshot and WAL, verified"),
    "restore": (_backup("restore_main"), "rebuild a data directory from a backup, to a point"),
    "bench": (_bench, "load generator: put, take-ack, mixed, utube scenarios"),
    "pipeline": (_pipeline, "Spark: load files into a tube, lifecycle reports"),
    "worker": (_worker, "run MODULE:FUNCTION for each task of a tube"),
    "ping": (_client("ping"), "check that a server answers"),
    "tubes": (_client("tubes"), "list the tubes"),
    "stats": (_client("stats"), "statistics of every tube, or of one"),
    "put": (_client("put"), "put a task into a tube"),
    "take": (_client("take"), "take a task from a tube, print it and ack it"),
    "peek": (_client("peek"), "show a task"),
    "tasks": (_tasks("tasks"), "list a tube's tasks by state"),
    "result": (_result, "show (or wait for) a task's result"),
    "ack": (_tasks("ack"), "ack a taken task, for whoever holds it"),
    "release": (_tasks("release"), "give a taken task back, for whoever holds it"),
    "bury": (_tasks("bury"), "bury a task, with a reason"),
    "kick": (_tasks("kick"), "make buried tasks ready again"),
    "delete": (_tasks("delete"), "delete a task"),
    "truncate": (_tasks("truncate"), "delete every task of a tube"),
    "create-tube": (_client("create_tube"), "create a tube"),
    "tube-options": (_options, "show or change a tube's retries, rate limit, retention"),
    "drop-tube": (_client("drop_tube"), "drop a tube and its tasks"),
    "schedule": (_schedules, "add, list, pause, resume or delete a periodic task"),
    "promote": (_client("promote"), "make a read-only replica the writable primary"),
    "status": (_status, "the cluster as each instance sees it: roles, lag, in-sync set"),
    "shard": (_shard, "shard list|drain|resume|remove NAME: the shards of a sharded cluster"),
}


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: queuebox <command> [options] | --version", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_text}" for name, (_, help_text) in COMMANDS.items()]
    lines += ["", "Run 'queuebox <command> --help' for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    as_json = argv[:1] == ["--json"]
    if as_json:  # `queuebox --json stats` is `queuebox stats --json`
        argv = [*argv[1:2], "--json", *argv[2:]]
    if argv[:1] in (["--version"], ["-V"]):
        print(f"queuebox {__version__} ({build_label()})")
        return 0
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        if as_json:
            print(json.dumps({"error": f"unknown command {name!r}", "exit": 2}), file=sys.stderr)
        else:
            print(f"queuebox: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    return quietly(lambda: int(COMMANDS[name][0]()(rest, prog=f"queuebox {name}") or 0))


def quietly(command: Callable[[], int]) -> int:
    """Run a command so that a reader who left (`queuebox stats | head -1`) or a Ctrl-C
    ends it quietly: no traceback, exit status 0 or 130."""
    try:
        return command()
    except BrokenPipeError:
        # What is still buffered for stdout would fail again at exit: send it nowhere.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(file=sys.stderr)  # the shell's ^C stays on a line of its own
        return 130
