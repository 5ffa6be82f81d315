"""The `queuebox` command: a table of subcommands, each imported only when run.

Owns: `COMMANDS` and the top-level usage text. A command is plugged in by
adding one line, name -> ("module:function", one-line help); the function is
`main(argv: list[str], prog: str) -> int` and parses its own arguments, so
`queuebox serve` never imports client code and `queuebox ping` never
imports the server. Must not hold any command's logic.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("server.serve:main", "run the queue server"),
    "wal": ("server.walcli:main", "wal cat PATH...: print WAL/snapshot records as JSON lines"),
    "bench": ("clients.bench.cli:main", "load generator: put, take-ack, mixed, utube scenarios"),
    "pipeline": ("clients.pipeline.cli:main", "Spark: load files into a tube, lifecycle reports"),
    "ping": ("clients.cli:ping", "check that a server answers"),
    "tubes": ("clients.cli:tubes", "list the tubes"),
    "stats": ("clients.cli:stats", "statistics of every tube, or of one"),
    "put": ("clients.cli:put", "put a task into a tube"),
    "take": ("clients.cli:take", "take a task from a tube, print it and ack it"),
    "peek": ("clients.cli:peek", "show a task"),
    "create-tube": ("clients.cli:create_tube", "create a tube"),
    "drop-tube": ("clients.cli:drop_tube", "drop a tube and its tasks"),
}


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: queuebox <command> [options]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_text}" for name, (_, help_text) in COMMANDS.items()]
    lines += ["", "Run 'queuebox <command> --help' for a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"queuebox: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module_name, _, func_name = COMMANDS[name][0].partition(":")
    command = getattr(importlib.import_module(module_name), func_name)
    return int(command(rest, prog=f"queuebox {name}") or 0)


if __name__ == "__main__":
    sys.exit(main())
