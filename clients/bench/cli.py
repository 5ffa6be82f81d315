"""`queuebox bench`: the command line of the load generator.

Owns: the argument parser (where to connect: --host/--port/--user/--password
and the QUEUEBOX_* variables, as every client command), and where the results go (table on
stdout, progress on stderr, --json-out, --plot). Exit status: 0 when every
phase completed without an error, 1 when the run finished with errors or
timed out, 2 when it could not run. Must not contain benchmark logic.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any

from queuebox.clients.cli import args as cliargs
from queuebox.protocol.etcdflags import add_etcd_arguments

from .conn import BenchError
from .scenarios import SCENARIOS, Options, Target
from .suite import PARTS, QUICK, SuiteOptions


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


_positive_int = cliargs.positive_int


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = cliargs.ArgumentParser(
        prog=prog,
        description="Load generator for queuebox or any Tarantool + queue server. "
        "Prints a table; --json-out keeps every number, --plot draws them.",
    )
    p.add_argument(
        "scenario",
        nargs="?",
        choices=sorted([*SCENARIOS, WORKER]),
        help="what load to generate (none with a bare --compare: the comparison suite); "
        "worker: --tasks no-op tasks through one `queuebox worker` process, async "
        "functions then threads",
    )
    where = cliargs.add_connection_arguments(p, tls=False)  # its raw connections are plain TCP
    where.add_argument(
        "--server-pid",
        type=int,
        help="server process id (Linux, same machine), to report its CPU per request and "
        "its memory per task: the growth of its resident memory (RSS, allocator slack "
        "included) over a phase that leaves its tasks queued, divided by those tasks. "
        "Memory a server freed is reused without growing RSS: measure memory on a freshly "
        "started server with an empty queue (--compare takes it from the first round) "
        "(default: not reported)",
    )
    load = p.add_argument_group("load")
    load.add_argument(
        "--tasks",
        type=_positive_int,
        default=100_000,
        help="tasks to put (put, take-ack, mixed, legacy-put-take, sequential)",
    )
    load.add_argument(
        "--duration",
        type=float,
        help="put / mixed: produce for this many seconds instead of --tasks (default: use --tasks)",
    )
    load.add_argument(
        "--payload-size",
        type=int,
        default=64,
        help="task data: a msgpack string of this many ASCII bytes (plus its 1-5 byte "
        "msgpack head)",
    )
    load.add_argument("--producers", type=_positive_int, default=4, help="put connections")
    load.add_argument("--consumers", type=_positive_int, default=4, help="take connections")
    load.add_argument(
        "--window", type=_positive_int, default=64, help="requests in flight per connection"
    )
    load.add_argument(
        "--processes", type=_positive_int, default=1, help="worker processes sharing the load"
    )
    load.add_argument(
        "--rate", type=float, help="put, mixed: total puts per second (default: as fast as it goes)"
    )
    load.add_argument(
        "--take-timeout",
        type=float,
        default=1.0,
        help="seconds a take waits; an empty take ends a consumer",
    )
    load.add_argument(
        "--pipeline-ack",
        action="store_true",
        help="consumers send each ack together with their next take, "
        "instead of waiting for the ack's reply",
    )
    load.add_argument(
        "--utubes",
        type=_positive_int,
        help="utubes (default: 10 for busy-utubes, 30000 for many-utubes)",
    )
    load.add_argument(
        "--tasks-per-utube",
        type=_positive_int,
        help="busy-utubes: tasks per utube (default 1000; the suite's --quick 50)",
    )
    load.add_argument(
        "--storage-mode",
        choices=("default", "ready_buffer"),
        help="utube storage mode of the tube the run creates (default: the server's)",
    )
    load.add_argument(
        "--async-concurrency",
        type=_positive_int,
        default=64,
        help="worker: the async functions' --concurrency",
    )
    load.add_argument(
        "--thread-concurrency",
        type=_positive_int,
        default=16,
        help="worker: the threads' --concurrency",
    )
    load.add_argument("--tube", help="tube name (default bench_<scenario>)")
    load.add_argument("--tube-type", help="tube type for put/take-ack/mixed (default: fifo)")
    load.add_argument("--namespace", default="queue", help="queue module namespace")
    load.add_argument("--legacy-space", type=int, default=0, help="legacy-put-take: space number")
    load.add_argument(
        "--max-time", type=float, default=600.0, help="abort a phase after this many seconds"
    )
    load.add_argument("--keep", action="store_true", help="keep the tube after the run")
    out = p.add_argument_group("output")
    out.add_argument(
        "--json-out", metavar="PATH", help="write the full result as JSON (default: not written)"
    )
    out.add_argument(
        "--plot",
        metavar="PATH",
        help="draw throughput and latency to a PNG "
        "(needs matplotlib: pip install 'queuebox[plot]'; default: no plot)",
    )
    out.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (needs tqdm: pip install 'queuebox[bench]'; default: "
        "when stderr is a terminal and tqdm is installed)",
    )
    out.add_argument(
        "--label", help="free text stored in the JSON, e.g. the server's wal_mode (default: none)"
    )
    cmp = p.add_argument_group("comparison")
    cmp.add_argument(
        "--compare",
        nargs="?",
        const=SUITE,
        type=_address,
        metavar="HOST:PORT",
        help="run the scenario against this second server too, alternately, "
        "and print B/A per metric; with no address and no scenario: the comparison "
        "suite, which starts queuebox and Tarantool + queue itself (see below) "
        "(default: one server only)",
    )
    cmp.add_argument("--compare-user", help="user for the second server (default: --user)")
    cliargs.add_password_arguments(
        cmp, "--compare-password", "compare_password", None, "its password (default: --password's)"
    )
    cmp.add_argument(
        "--compare-server-pid",
        type=int,
        help="its process id, for CPU and memory as --server-pid (default: not reported)",
    )
    cmp.add_argument(
        "--rounds",
        type=_positive_int,
        help="--compare: runs against each server (default 2: A B A B; --quick 1)",
    )
    _add_suite_arguments(p)
    return p


def _add_suite_arguments(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group(
        "comparison suite (a bare --compare)",
        "issue 26's scenarios on freshly started servers, queuebox (python -m queuebox "
        "serve, wal_mode write) and Tarantool + queue, alternately: put, take-ack, "
        "busy-utubes (ready_buffer), sequential put latency (one in flight, both WAL "
        "modes, beside the disk's bare sync), memory per task (fifo, fifottl), restart of a full "
        "queue (from the WAL, from a snapshot). One table; --json for JSON",
    )
    s.add_argument(
        "--reference-script",
        default=os.environ.get("QUEUEBOX_BENCH_REFERENCE_SCRIPT"),
        help="starts Tarantool + queue: `PORT=N SCRIPT QUEUE_SRC` prints its pid, "
        "`SCRIPT stop PID` stops it (default: env QUEUEBOX_BENCH_REFERENCE_SCRIPT)",
    )
    s.add_argument(
        "--queue-src",
        default=os.environ.get("QUEUEBOX_BENCH_QUEUE_SRC", "/tmp/queue-src"),
        help="the queue module's checkout, the script's argument (env QUEUEBOX_BENCH_QUEUE_SRC)",
    )
    s.add_argument(
        "--parts",
        type=_parts,
        default=",".join(DEFAULT_SUITE.parts),
        help="comma-separated parts to run",
    )
    s.add_argument(
        "--quick",
        action="store_true",
        help="shorten every phase (a smoke run: the numbers mean nothing)",
    )
    for name, kind, what in SUITE_KNOBS:
        s.add_argument(
            f"--{name.replace('_', '-')}",
            type=kind,
            help=f"{what} (default {getattr(DEFAULT_SUITE, name):,}, --quick {QUICK[name]:,})",
        )
    s.add_argument("--json", action="store_true", help="print JSON instead of the table")


SUITE = ("", 0)  # a bare --compare
WORKER = "worker"  # not a scenario of raw connections: clients/bench/workers.py
DEFAULT_SUITE = SuiteOptions("", "")
SUITE_KNOBS: list[tuple[str, Any, str]] = [
    ("put_seconds", float, "seconds of put measured"),
    ("warmup_seconds", float, "seconds of put before them"),
    ("drain_tasks", _positive_int, "take-ack: tasks drained"),
    ("memory_tasks", _positive_int, "memory: tasks put per tube type"),
    ("recovery_tasks", _positive_int, "recovery: tasks in the restarted queue"),
    ("latency_puts", _positive_int, "sequential: puts timed per WAL mode"),
    ("memtx_mb", _positive_int, "Tarantool's memtx_memory, MiB"),
]


def _parts(text: str) -> tuple[str, ...]:
    parts = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [part for part in parts if part not in PARTS]
    if unknown or not parts:
        raise argparse.ArgumentTypeError(f"parts are {', '.join(PARTS)}; got {text!r}")
    return parts


def suite_options_from(args: argparse.Namespace) -> SuiteOptions:
    chosen: dict[str, Any] = dict(QUICK) if args.quick else {}
    chosen |= {name: getattr(args, name) for name, _, _ in SUITE_KNOBS if getattr(args, name)}
    for name in ("rounds", "tasks_per_utube"):  # shared with the scenarios' options
        if getattr(args, name):
            chosen[name] = getattr(args, name)
    return dataclasses.replace(
        DEFAULT_SUITE,
        reference_script=args.reference_script,
        queue_src=args.queue_src,
        parts=args.parts,
        max_time=args.max_time,
        **chosen,
    )


def options_from(args: argparse.Namespace) -> Options:
    return Options(
        tasks=args.tasks,
        duration=args.duration,
        payload_size=args.payload_size,
        producers=args.producers,
        consumers=args.consumers,
        window=args.window,
        processes=args.processes,
        rate=args.rate,
        take_timeout=args.take_timeout,
        pipeline_ack=args.pipeline_ack,
        utubes=args.utubes,
        tasks_per_utube=args.tasks_per_utube or Options.tasks_per_utube,
        storage_mode=args.storage_mode,
        tube=args.tube,
        tube_type=args.tube_type,
        namespace=args.namespace,
        legacy_space=args.legacy_space,
        max_time=args.max_time,
    )


def _pid(text: str) -> tuple[str, int]:
    name, sep, pid = text.partition("=")
    if not sep or not pid.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=PID, got {text!r}")
    return name, int(pid)


def cluster_parser(prog: str) -> argparse.ArgumentParser:
    from .cluster import SHAPES  # the asyncio client, only for this command

    p = cliargs.ArgumentParser(
        prog=f"{prog} cluster",
        description="Put rate through the self-routing client (--etcd-endpoints) against "
        "one node's (--host/--port) in the same run, with the CPU each process used, then "
        "how fairly takes come from the shards. Prints; judges nothing.",
    )
    group = cliargs.add_connection_arguments(p, tls=False)
    add_etcd_arguments(
        group,
        os.environ,
        required=True,
        endpoints_help="the cluster's etcd (required unless $QUEUEBOX_ETCD_ENDPOINTS)",
        prefix_help="its prefix",
    )
    p.add_argument("--seconds", type=float, default=5.0, help="of put in each phase")
    p.add_argument("--processes", type=_positive_int, default=2, help="client processes")
    p.add_argument(
        "--window", type=_positive_int, default=None,
        help="put: coroutines per process (default 64); bulk: put_many's window, in flight "
        "on each connection (default 256, put_many's own)",
    )  # fmt: skip
    p.add_argument("--tube", default="bench_cluster")
    p.add_argument(
        "--shape",
        choices=SHAPES,
        action="append",
        default=None,
        help="put: one put at a time in --window coroutines; bulk: put_many of --chunk "
        "tasks, --window in flight; repeatable (default: both, side by side)",
    )
    p.add_argument("--chunk", type=_positive_int, default=1000, help="tasks per put_many")
    p.add_argument(
        "--no-keys", dest="put_keys", action="store_false",
        help="puts without a key (the client's put_keys=False; by default each has one)",
    )  # fmt: skip
    p.add_argument(
        "--cpu-pid", type=_pid, action="append", default=[], metavar="NAME=PID",
        help="a server process whose CPU seconds to report, repeatable",
    )  # fmt: skip
    return p


def _cluster(argv: list[str], prog: str) -> int:
    from .cluster import SHAPES, Where, run

    args = cluster_parser(prog).parse_args(argv)
    node = Where(args.host, args.port, args.user, args.password, put_keys=args.put_keys)
    every = Where(args.host, args.port, args.user, args.password, args.etcd_endpoints,
                  args.etcd_prefix, args.put_keys)  # fmt: skip
    pids = dict(args.cpu_pid)
    try:
        shapes = tuple(args.shape or SHAPES)
        print(run(every, node, args.tube, args.seconds, args.processes, args.window, pids,
                  shapes, args.chunk))  # fmt: skip
    except Exception as exc:  # noqa: BLE001 -- any failure of the run is said, as exit 1
        print(f"{prog} cluster: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str], prog: str = "queuebox bench") -> int:
    if argv[:1] == ["cluster"]:
        return _cluster(argv[1:], prog)
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.compare == SUITE or args.scenario is None:
        if args.scenario is not None or args.compare != SUITE:
            parser.error("give a SCENARIO, or a bare --compare for the comparison suite")
        return _suite(args, prog)
    if args.scenario == "mixed" and args.payload_size < 16:
        print(f"{prog}: mixed needs --payload-size >= 16 (the send time)", file=sys.stderr)
        return 2
    if args.scenario == WORKER:
        return _workers(args, prog)
    # Imported here so `--help` stays fast and a missing optional part fails late.
    from . import bench, report

    opts = options_from(args)
    target = Target(args.host, args.port, args.user, args.password, args.server_pid)
    show_progress = sys.stderr.isatty() if args.progress is None else args.progress
    if show_progress and not report.progress_available():
        if args.progress:
            print(f"{prog}: --progress needs tqdm: pip install 'queuebox[bench]'", file=sys.stderr)
            return 2
        show_progress = False  # a terminal, but no tqdm: the table at the end says it all
    progress = report.Progress() if show_progress else None
    try:
        if args.compare:
            other_host, other_port = args.compare
            other = Target(
                other_host,
                other_port,
                args.compare_user or args.user,
                args.compare_password or args.password,
                args.compare_server_pid,
            )
            doc = bench.compare(
                args.scenario,
                opts,
                target,
                other,
                args.rounds or 2,
                progress=progress,
                label=args.label,
            )
            for run in doc["runs"]["a"] + doc["runs"]["b"]:
                print(report.render(run), end="\n\n")
            print(report.render_ratios(target.address, other.address, doc["ratios"]))
        else:
            doc = bench.run_scenario(
                args.scenario, opts, target, progress=progress, keep=args.keep, label=args.label
            )
            print(report.render(doc))
    except BenchError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except bench.Interrupted as stop:
        done = f"tube {stop.tube!r} dropped" if stop.dropped else f"tube {stop.tube!r} kept"
        print(f"\n{prog}: interrupted; {done}", file=sys.stderr)
        return 130
    return _write_outputs(doc, args, prog)


def _workers(args: argparse.Namespace, prog: str) -> int:
    from .workers import WorkerPart, render_workers, run_workers

    part = WorkerPart(
        args.tasks,
        args.async_concurrency,
        args.thread_concurrency,
        args.max_time,
        args.tube or "bench_worker",
    )
    target = Target(args.host, args.port, args.user, args.password, args.server_pid)
    try:
        doc = run_workers(target, part)
    except BenchError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    print(render_workers(doc))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as stream:
            json.dump(doc, stream, indent=1)
            stream.write("\n")
    return 0


def _suite(args: argparse.Namespace, prog: str) -> int:
    from . import report
    from .suite import run_suite

    if not args.reference_script:
        print(f"{prog}: the suite needs --reference-script (Tarantool + queue)", file=sys.stderr)
        return 2
    try:
        doc = run_suite(
            suite_options_from(args), note=lambda text: print(text, file=sys.stderr, flush=True)
        )
    except BenchError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(doc, indent=1) if args.json else report.render_suite(doc))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as stream:
            json.dump(doc, stream, indent=1)
            stream.write("\n")
    return 0


def _write_outputs(doc: dict[str, Any], args: argparse.Namespace, prog: str) -> int:
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as stream:
            json.dump(doc, stream, indent=1)
            stream.write("\n")
    if args.plot:
        from .plot import PlotUnavailable, plot

        try:
            plot(doc, args.plot)
        except PlotUnavailable as exc:
            print(f"{prog}: {exc}", file=sys.stderr)
            return 2
    return 0 if doc["complete"] else 1
