"""`queuebox worker MODULE:FUNCTION --tube NAME`: run a function for each task.

Owns: the command's arguments (where to connect, as every client command; the worker's
options), importing the function (from the current directory too, as `python -m`
would; a `@worker.handler` brings its tube and options, which flags override), the log
lines (text, or one JSON object per line with --json) and the exit status: 0 after a
stop by SIGTERM or Ctrl-C, 2 bad usage or a function that cannot be imported, 3 no
server within --wait-for-server, 4 no such tube, 1 anything else. Must not import
server/.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import signal
import sys
from typing import Any

from queuebox.clients.cli import args as cliargs
from queuebox.clients.errors import AuthError, NetworkError, QueueboxError, TubeNotFound
from queuebox.clients.worker import STOP_SIGNALS, Handler, RetryDefaults, Worker, run

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_NOT_FOUND = 0, 1, 2, 3, 4
log = logging.getLogger("queuebox.worker")


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = cliargs.ArgumentParser(
        prog=prog,
        description="Run FUNCTION (plain: in threads; async: on an event loop) with the data "
        "of each task of the tube. It returns: the task is acked. It raises: one log line, "
        "and the task is tried again later (waits doubling from --backoff), then buried "
        "with the error as its reason after --max-attempts tries (or as the tube's own "
        "max_attempts says: queuebox counts those on the server, crashes included). "
        "SIGTERM or Ctrl-C: no new tasks, the running ones finish (up to --grace s); a "
        "second one gives the tasks in hand back at once. What it returns (not None) goes "
        "with the ack as the task's result.",
    )
    parser.add_argument("target", metavar="MODULE:FUNCTION", help="e.g. myapp.tasks:resize")
    parser.add_argument("--tube", help="tube to work on (default: the @worker.handler's)")
    group = cliargs.add_connection_arguments(parser)
    cliargs.add_failover_arguments(parser, group)
    cliargs.add_seconds(
        group,
        "--wait-for-server",
        60.0,
        "keep trying to connect this long when no server answers yet",
    )
    work = parser.add_argument_group("work")
    cliargs.add_typed(
        work,
        ("--concurrency", cliargs.positive_int, "tasks handled at once (default 1)"),
        ("--take-timeout", cliargs.seconds, "seconds one take waits (default 5)"),
        ("--max-attempts", cliargs.positive_int, "tries per task before it is buried, where "
         "the tube sets none (default 5)"),
        ("--backoff", cliargs.seconds, "seconds before the second try, doubling after each "
         "(default 1)"),
        ("--backoff-max", cliargs.seconds, "the longest wait between tries (default 60)"),
        ("--grace", cliargs.seconds, "seconds running tasks may take to finish after a stop "
         "(default 30)"),
        ("--time-limit", cliargs.seconds, "seconds one call may run: past it the call counts "
         "a failed try and its task is released (an async function is cancelled; a thread "
         "cannot be: its result is ignored) (default: no limit)"),
    )  # fmt: skip
    work.add_argument(
        "--traceback", action="store_true", help="log each failure with its traceback"
    )
    parser.add_argument("--json", action="store_true", help="log one JSON object per line")
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="the least important log lines shown",
    )
    return parser


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(as_json: bool, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if as_json else logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def load(target: str) -> Any:
    """The object MODULE:NAME names (NAME may be dotted); ImportError says why not."""
    module_name, sep, name = target.partition(":")
    if not sep or not module_name or not name:
        raise ImportError(f"expected MODULE:FUNCTION, got {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m`: the project beside you
    module = importlib.import_module(module_name)
    found: Any = module
    for part in name.split("."):
        if not hasattr(found, part):
            raise ImportError(f"{module_name} has no {name!r}")
        found = getattr(found, part)
    if not callable(found):
        raise ImportError(f"{target} is not callable")
    return found


def worker_options(args: argparse.Namespace, marked: dict[str, Any]) -> dict[str, Any]:
    """The decorator's options, with the flags given on top."""
    options = dict(marked)
    retry = options.get("retry") or RetryDefaults()
    options["retry"] = RetryDefaults(
        args.max_attempts or retry.max_attempts,
        retry.backoff if args.backoff is None else args.backoff,
        retry.backoff_max if args.backoff_max is None else args.backoff_max,
    )
    flags = {"concurrency": args.concurrency, "take_timeout": args.take_timeout}
    flags["grace"] = args.grace
    if args.time_limit is not None and args.time_limit <= 0:
        raise ValueError("--time-limit must be more than 0 seconds")
    flags["time_limit"] = args.time_limit
    options.update({key: value for key, value in flags.items() if value is not None})
    if args.traceback:
        options["tracebacks"] = True
    return options


def main(argv: list[str], prog: str = "queuebox worker") -> int:
    # A stop asked while Python still starts (imports take a while) is kept, not fatal.
    early: list[int] = []
    for signum in STOP_SIGNALS:
        signal.signal(signum, lambda number, frame: early.append(number))
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    configure_logging(args.json, args.log_level)
    try:
        found = load(args.target)
    except Exception as exc:  # anything the user's module raises while importing
        log.error("cannot import %s: %s: %s", args.target, type(exc).__name__, exc)
        return EXIT_USAGE
    function, tube, marked = found, args.tube, {}
    if isinstance(found, Handler):
        function, tube, marked = found.function, args.tube or found.tube, dict(found.options)
    if not tube:
        log.error("no tube: give --tube NAME (or mark the function with @worker.handler)")
        return EXIT_USAGE
    try:
        options = worker_options(args, marked)
    except ValueError as exc:
        log.error("%s", exc)
        return EXIT_USAGE
    log.info("working on tube %s with %s (%s)", tube, args.target, _where(args))
    try:
        worker = run(
            function,
            tube,
            host=args.host,
            port=args.port,
            user=args.user,
            password=args.password,
            addresses=args.addresses or None,
            wait_for_server=args.wait_for_server,
            tls=args.tls,
            etcd_endpoints=args.etcd_endpoints,
            etcd_prefix=args.etcd_prefix,
            signals_seen=early,
            **options,
        )
    except AuthError as exc:
        log.error("authentication failed: %s", exc.message)
        return EXIT_UNREACHABLE
    except NetworkError as exc:
        log.error("server unreachable: %s", exc)
        return EXIT_UNREACHABLE
    except TubeNotFound as exc:
        log.error("tube %r does not exist", exc.tube)
        return EXIT_NOT_FOUND
    except QueueboxError as exc:
        log.error("%s", exc)
        return EXIT_ERROR
    if worker is None:
        log.info("stopped before it connected")
        return EXIT_OK
    return _stopped(worker)


def _where(args: argparse.Namespace) -> str:
    if args.etcd_endpoints:
        return f"the cluster {args.etcd_prefix} at {args.etcd_endpoints}"
    return ", ".join(args.addresses) if args.addresses else f"{args.host}:{args.port}"


def _stopped(worker: Worker) -> int:
    log.info(
        "stopped: %d done, %d failed (%d buried, %d past the time limit), %d given back",
        worker.handled,
        worker.failed,
        worker.buried,
        worker.timed_out,
        worker.given_back,
    )
    if worker.running_alone:
        # Their threads cannot be stopped; their tasks are back in the queue already.
        log.warning(
            "%d function(s) still running in threads: exiting without them",
            worker.running_alone,
        )
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_OK)
    return EXIT_OK
