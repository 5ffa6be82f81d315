"""`queuebox pipeline load|report`: the pipeline's command line.

Owns: argument parsing, checking the server and the tube of a load before Spark
starts (a missing tube is one line naming --create-tube, not a minute of start-up),
starting the SparkSession (`--master`, default local[*]), the progress line around
each job, and turning Spark's long Java/Python error chains into one readable line.
Plugged into the `queuebox` command through the table in queuebox/cli.py, which
imports `main` only when the command runs. Must not touch server/, drivers/,
storage/; imports pyspark only once a subcommand runs.

    queuebox pipeline load --input PATH --format parquet|csv|json --tube NAME
        [--host H --port P --user U --password W (or QUEUEBOX_HOST, ...)]
        [--create-tube TYPE] [--window N]
        [--partitions N] [--master URL] [--conf KEY=VALUE ...]
    queuebox pipeline report --data-dir DIR --out DIR [--bucket SECONDS]
        [--tube NAME] [--master URL] [--conf KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from queuebox.clients.cli import args as cliargs
from queuebox.clients.pipeline.target import Target

INPUT_FORMATS = ("parquet", "csv", "json")
TUBE_TYPES = ("fifo", "fifottl", "limfifottl", "utube", "utubettl")
OUR_ERROR = re.compile(r"(queuebox: [^\n]*)")
PYTHON_ERROR = re.compile(r"^\s*((?:\w+\.)*\w+(?:Error|Exception): [^\n]*)", re.MULTILINE)


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = cliargs.ArgumentParser(prog=prog, description="queuebox data pipeline on Spark")
    commands = parser.add_subparsers(dest="command", required=True)

    load = commands.add_parser("load", help="enqueue one task per row of a file")
    load.add_argument("--input", required=True, help="file or directory to read")
    load.add_argument("--format", choices=INPUT_FORMATS, default="parquet", help="input format")
    load.add_argument("--tube", required=True, help="tube to put the tasks into")
    connection = cliargs.add_connection_arguments(load, tls=False)  # the sink: plain TCP
    cliargs.add_failover_arguments(load, connection)
    load.add_argument(
        "--create-tube",
        choices=TUBE_TYPES,
        help="create the tube of this type if missing (default: the tube must exist)",
    )
    load.add_argument(
        "--window", type=cliargs.positive_int, default=256, help="puts in flight per partition"
    )
    load.add_argument(
        "--partitions",
        type=cliargs.positive_int,
        help="repartition the input (= connections; default: as read)",
    )
    load.add_argument(
        "--max-failures", type=int, default=0, help="rows that may fail before the load fails"
    )

    report = commands.add_parser("report", help="task lifecycle report of a data directory")
    report.add_argument(
        "--data-dir",
        dest="data_dirs",
        action="append",
        required=True,
        help="the server's data directory (on a Spark cluster: a path every executor can "
        "read); repeat it for a sharded cluster, one directory per shard",
    )
    report.add_argument("--out", required=True, help="output directory")
    report.add_argument(
        "--bucket", type=cliargs.seconds, default=60.0, help="bucket width in seconds"
    )
    report.add_argument("--tube", help="only this tube (default: every tube)")

    for sub in (load, report):
        sub.add_argument("--master", default="local[*]", help="Spark master URL")
        sub.add_argument(
            "--conf", type=_setting, action="append", default=[], metavar="KEY=VALUE",
            help="a Spark setting, e.g. spark.executor.memory=2g (repeatable; default: none)",
        )  # fmt: skip
    return parser


def _setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _read_input(spark: Any, args: argparse.Namespace) -> Any:
    reader = spark.read
    if args.format == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    return reader.format(args.format).load(args.input)


def load(spark: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Enqueue the rows of `--input`; returns the commit summary."""
    from queuebox.clients.pipeline.sparkenv import Progress

    frame = _read_input(spark, args)
    if args.partitions:
        frame = frame.repartition(args.partitions)
    with tempfile.TemporaryDirectory(prefix="queuebox-load-") as scratch:
        summary_path = Path(scratch) / "summary.json"
        options = {
            **Target.of_args(args).options(),
            "tube": args.tube,
            "window": str(args.window),
            "maxFailures": str(args.max_failures),
            "summaryPath": str(summary_path),
        }
        if args.create_tube:
            options["createTube"] = args.create_tube
        writer = frame.write.format("queuebox").mode("append").options(**options)
        with Progress(spark, f"load {args.tube}"):
            writer.save()
        summary: dict[str, Any] = json.loads(summary_path.read_text())
    return summary


def report(spark: Any, args: argparse.Namespace) -> dict[str, Any]:
    from queuebox.clients.pipeline.report import run_report
    from queuebox.clients.pipeline.sparkenv import Progress

    with Progress(spark, "report"):
        summary = run_report(spark, args.data_dirs, args.out, args.bucket, args.tube)
    return summary


def short_error(exc: BaseException) -> str:
    """Our own message when a Spark error chain carries one, else its first line."""
    text = str(exc)
    raised = PYTHON_ERROR.findall(text)  # the exception lines of Python tracebacks
    for line in reversed(raised):
        mine = OUR_ERROR.search(line)
        if mine:
            return mine.group(1).strip()
    mine = OUR_ERROR.search(text)
    if mine and not raised:
        return mine.group(1).strip()
    if raised:
        return str(raised[-1]).strip()
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(exc).__name__}: {first}"


def check_tube(args: argparse.Namespace, prog: str) -> int | None:
    """Before a minute of Spark start-up: is the server there, and the tube? An exit
    status and one line when not (the tube may be missing with --create-tube)."""
    from queuebox.clients.errors import AuthError, NetworkError

    target = Target.of_args(args)
    where = target.where()
    try:
        with target.connect() as conn:
            if args.create_tube or conn.tube_exists(args.tube):
                return None
    except AuthError as exc:
        print(f"{prog}: authentication failed: {exc.message}", file=sys.stderr)
        return 3
    except NetworkError as exc:
        print(f"{prog}: server unreachable: {exc}", file=sys.stderr)
        return 3
    print(
        f"{prog}: tube {args.tube!r} does not exist on {where}: create it "
        f"(queuebox create-tube {args.tube} fifo) or add --create-tube TYPE "
        f"(one of {', '.join(TUBE_TYPES)})",
        file=sys.stderr,
    )
    return 4


def main(argv: list[str], prog: str = "queuebox pipeline") -> int:
    args = _parser(prog).parse_args(argv)
    if args.command == "load":
        failed = check_tube(args, f"{prog} load")
        if failed is not None:
            return failed
    try:
        from queuebox.clients.pipeline.sparkenv import build_session
    except ImportError as exc:
        print(f"{prog}: needs the spark extra: pip install 'queuebox[spark]' ({exc})")
        return 2
    from pyspark.sql import SparkSession

    # Inside a program that already runs Spark (tests, notebooks) reuse it, never stop it.
    owned = SparkSession.getActiveSession() is None
    spark = build_session(args.master, f"queuebox-pipeline-{args.command}", dict(args.conf))
    try:
        if args.command == "load":
            result = load(spark, args)
            print(
                f"loaded {result['written']} of {result['rows']} rows into tube "
                f"{result['tube']!r} ({result['failed']} failed, "
                f"{result['partitions']} partitions)"
            )
        else:
            result = report(spark, args)
            out = Path(args.out)
            print(f"report written to {out}: summary.md, summary.json, *.parquet, *.png")
            for tube in result["totals"]:
                print(
                    f"  {tube['tube']}: put {tube['put']}, taken {tube['taken']}, "
                    f"acked {tube['acked']}, released {tube['released']}, "
                    f"buried {tube['buried']}, expired {tube['expired']}"
                )
    except Exception as exc:  # Spark wraps everything; show the reason, not the JVM stack
        print(f"{prog} {args.command}: {short_error(exc)}", file=sys.stderr)
        return 1
    finally:
        if owned:
            spark.stop()
    return 0
