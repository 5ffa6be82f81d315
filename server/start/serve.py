"""`queuebox serve`: flags, config, logging, signals, and the run of the server.

Owns: the serve command's argument parser (one flag per `Config` setting,
generated from the config table so flags, env and TOML never drift apart),
the startup lines with the bound addresses, starting the listener on the
main port, on the 1.5 port (`legacy_listen`) and the HTTP listener
(`http_listen`, server/web/), each with TLS when `tls_cert` is set, the port
file, turning SIGTERM/SIGINT into the listener's graceful shutdown and SIGHUP
into a reload of the TLS certificate. Must not know about requests or
functions.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import os
import signal
import ssl
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from queuebox import __version__
from queuebox.compiled import build_label
from queuebox.storage.errors import CorruptLog, EngineError, LsnGap, Unrecoverable

from ..core.app import App
from ..core.store import RecoveryStopped
from ..net import legacy15
from ..net.listener import Listener
from ..replication.applier import bootstrap
from ..replication.shard import ShardMismatch, ShardState, join
from ..runtime import logs
from ..runtime.limits import (
    SERVER_MMAP_THRESHOLD,
    pin_malloc_mmap_threshold,
    raise_open_files_limit,
)
from ..runtime.loop import cancel_and_wait, run
from ..runtime.tls import ServerTls, TlsError, TlsFiles
from ..settings.config import Config, ConfigError
from ..settings.config_load import ENV_PREFIX, NO_FLAG, SCALAR_FIELDS, load_config
from ..settings.settings_help import flag_help, flag_metavar
from .build import Server, build_server

log = logs.get_logger("queuebox.serve")
loop_error_log = logs.RateLimitedLog(log, burst=5, every_s=10.0)

BOOLEAN_FLAGS = {"allow_open_guest", "force_recovery", "test_hooks", "plugin_entry_points"}

# Exit codes of a start the data directory stops (docs/durability.md); any
# other failure to start exits with 1, a bad setting with 2.
EXIT_CODES: dict[type[EngineError], int] = {LsnGap: 3, CorruptLog: 4, Unrecoverable: 5}


def exit_code(exc: EngineError) -> int:
    return next((code for kind, code in EXIT_CODES.items() if isinstance(exc, kind)), 1)


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run the queuebox server. Settings: defaults < --config TOML < "
        "QUEUEBOX_* environment < these flags.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__} ({build_label()})"
    )
    parser.add_argument(
        "--config", metavar="FILE", help="TOML config file (default none; env QUEUEBOX_CONFIG)"
    )
    parser.add_argument("--listen", metavar="HOST:PORT", help=flag_help("listen"))
    for name in NO_FLAG:
        flag = "--" + name.replace("_", "-")
        parser.add_argument(
            flag,
            action=_NoSecretInArgv,
            metavar="REFUSED",
            help=f"not accepted (ps would show it to everyone): use {flag}-file FILE, "
            f"env {ENV_PREFIX}{name.upper()} or the config file (default none)",
        )
    for name in SCALAR_FIELDS:
        if name in NO_FLAG:
            continue
        flag = "--" + name.replace("_", "-")
        if name in BOOLEAN_FLAGS:
            parser.add_argument(
                flag, dest=name, action="store_const", const=True, default=None,
                help=flag_help(name),
            )  # fmt: skip
        else:
            parser.add_argument(flag, dest=name, metavar=flag_metavar(name), help=flag_help(name))
    parser.add_argument(
        "--plugin",
        action="append",
        metavar="MODULE",
        help="load this plugin, after those of --plugins; repeat it for more (default none)",
    )
    return parser


class _NoSecretInArgv(argparse.Action):
    """A password flag that is gone: `ps` would show the password to every user
    of the machine for as long as the server runs. Refused at once, saying what
    to use, rather than warned about in a log line nobody reads."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        name = self.dest
        parser.error(
            f"{option} is not accepted: every user of this machine could read the password "
            f"with ps; use --{name.replace('_', '-')}-file FILE, "
            f"{ENV_PREFIX}{name.upper()} or {name} in the config file"
        )


# A setting that needs an optional part of queuebox: (setting, module, extra).
EXTRAS = (("etcd_endpoints", "aetcd", "etcd"),)


def missing_extra(
    config: Config, find: Callable[[str], object | None] = importlib.util.find_spec
) -> str | None:
    """What to install for a setting whose optional dependency is missing, if any."""
    for setting, module, extra in EXTRAS:
        if getattr(config, setting) and find(module) is None:
            return (
                f"{setting} needs the {module} package, which is not installed: "
                f"pip install 'queuebox[{extra}]'"
            )
    return None


def main(argv: list[str], prog: str = "queuebox serve") -> int:
    args = build_parser(prog).parse_args(argv)
    flags = {key: value for key, value in vars(args).items() if key not in ("config", "plugin")}
    if args.plugin:
        flags["plugins"] = ",".join(filter(None, (args.plugins, *args.plugin)))
    try:
        config = load_config(flags, os.environ, args.config)
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    missing = missing_extra(config)
    if missing is not None:
        print(f"{prog}: {missing}", file=sys.stderr)
        return 2
    try:
        tls = server_tls(config)
    except TlsError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    logs.configure(config.log_format, config.log_level)
    return run(serve(config, tls), config.loop)


def server_tls(config: Config) -> ServerTls | None:
    """The listening ports' TLS, its files read now (a bad one stops the start)."""
    if not config.tls_cert:
        return None
    files = TlsFiles(config.tls_cert, config.tls_key, config.tls_ca, config.tls_client_auth)
    return ServerTls(files)


def reload_tls(tls: ServerTls | None) -> None:
    """SIGHUP: new handshakes present the files' certificate; open connections stay."""
    if tls is None:
        log.info("SIGHUP: no TLS certificate to reload")
        return
    try:
        tls.reload()
    except TlsError as exc:
        log.error("TLS reload failed; the previous certificate stays", error=str(exc))
        return
    log.info("TLS certificate reloaded", cert=tls.files.cert, reloads=tls.reloads)


SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def serve(config: Config, tls: ServerTls | None = None) -> int:
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_log_loop_error)
    # Handlers go in first: a SIGTERM during a bootstrap or a long recovery then
    # stops it in order (the recovery runs on a thread and asks), never an abrupt
    # death with a half-written data directory.
    stopping = asyncio.Event()
    received: list[str] = []
    for signum in SIGNALS:
        loop.add_signal_handler(signum, _on_signal, signum, stopping, received)
    loop.add_signal_handler(signal.SIGHUP, reload_tls, tls)
    try:
        return await _serve(config, tls, stopping, received)
    finally:
        for signum in (*SIGNALS, signal.SIGHUP):
            loop.remove_signal_handler(signum)


async def _serve(
    config: Config, tls: ServerTls | None, stopping: asyncio.Event, received: list[str]
) -> int:
    files, wanted = raise_open_files_limit(config.max_connections)
    # Every request makes a few container objects that die young; collecting
    # the youngest generation every 10,000 allocations instead of 700 took
    # about 2 µs off a put (bench), and a queue's tasks hold no cycles.
    gc.set_threshold(10_000, 10, 10)
    # The memory a big request used goes back to the OS once it is handled,
    # so the buffer budget (limits.py) holds for resident memory too.
    pin_malloc_mmap_threshold(SERVER_MMAP_THRESHOLD)
    if files < wanted:
        log.warning(
            "open-file limit is below max_connections",
            limit=files,
            max_connections=config.max_connections,
            hint="raise the hard limit (ulimit -Hn, LimitNOFILE=) or lower max_connections",
        )
    app = App(config)
    listener = Listener(app)
    # Filled once the server is built; the 1.5 port accepts only after that.
    built: list[Server] = []
    try:
        # Bound first: a busy port fails at once, not after a long recovery.
        context = tls.context if tls is not None else None
        host, port = await listener.bind_main(context)
        if config.legacy_listen is not None:
            await listener.bind(
                lambda: legacy15.Box15Connection(app, lambda: built[0].queue),
                *config.legacy_listen,
                context if config.legacy_tls else None,
            )
    except OSError as exc:
        log.error(
            "cannot listen",
            error=str(exc),
            listen=f"{config.listen_host}:{config.listen_port}",
            legacy_listen=config.legacy_listen,
        )
        listener.unbind()
        return 1
    code = await _start_up(app, built, stopping, context)
    if code is not None:
        listener.unbind()
        if built:
            await app.on_shutdown()  # built, then a signal: close what was opened
        return code
    await listener.start()
    log.info(
        "listening",
        address=f"{host}:{port}",
        port=port,
        legacy_listen=config.legacy_listen,
        tls=tls is not None,
        data_dir=config.data_dir,
        loop=config.loop,
        build=build_label(),
        users=sorted(config.users),
        guest_rights=app.rights.grant("guest").describe(),
    )
    if config.port_file:
        write_port_file(config.port_file, port)
    await stopping.wait()
    log.info("shutting down", signal=received[0], grace_s=config.shutdown_grace_s)
    await listener.shutdown(config.shutdown_grace_s)
    logs.flush_repeated_lines()  # the counts of lines held back, before the last line
    log.info("stopped")
    return 0


async def _start_up(
    app: App, built: list[Server], stopping: asyncio.Event, tls: ssl.SSLContext | None
) -> int | None:
    """Recovery and the rest of the server (build.py): None once started, else
    the exit code of a failed start (0: SIGTERM or SIGINT came first). A signal
    stops a bootstrap waiting for an unreachable primary, or a long recovery."""
    config = app.config
    try:
        os.makedirs(config.data_dir, exist_ok=True)
        shard = None
        if config.shard:
            joined: list[tuple[Config, ShardState]] = []
            if not await _unless_stopped(_join_shard(config, joined), stopping):
                log.info("stopped before the shard's number was known")
                return 0
            # Before the queue is built: its ids end in the shard's number from the first put.
            config, shard = joined[0]
            app.config = config
        if config.replication_source:
            # An empty data directory starts from the primary's newest snapshot.
            filled = bootstrap(config, str(app.instance_uuid), lambda: config.replication_source)
            if not await _unless_stopped(filled, stopping):
                log.info("stopped before the data directory was filled from the primary")
                return 0
        server = await build_server(app, stopping.is_set, shard)
        built.append(server)
        if config.http_listen is not None:
            # Imported only here: aiohttp takes a while to load.
            from ..web.listener import start_http  # noqa: PLC0415

            await start_http(server, tls)
        if stopping.is_set():
            log.info("stopped as soon as recovered")
            return 0
    except RecoveryStopped as exc:
        log.info("stopped", why=str(exc))
        return 0
    except ShardMismatch as exc:
        log.error("cannot start", error=str(exc), data_dir=config.data_dir)
        return 1
    except OSError as exc:
        log.error("cannot start", error=str(exc), data_dir=config.data_dir)
        return 1
    except EngineError as exc:
        code = exit_code(exc)
        log.error("cannot start", error=str(exc), exit_code=code)
        return code
    except Exception:
        log.exception("cannot start", data_dir=config.data_dir)
        return 1
    return None


async def _join_shard(config: Config, into: list[tuple[Config, ShardState]]) -> None:
    into.append(await join(config))


async def _unless_stopped(work: Coroutine[Any, Any, None], stopping: asyncio.Event) -> bool:
    """Run `work` to its end (True), unless `stopping` is set first (False: cancelled)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stopping.wait())
    await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if task.done():
        task.result()
        return True
    await cancel_and_wait(task)
    return False


def _on_signal(signum: int, stopping: asyncio.Event, received: list[str]) -> None:
    received.append(signal.Signals(signum).name)
    stopping.set()


def _log_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    # Errors asyncio catches in callbacks go to our log, not to stdlib logging.
    exc = context.get("exception")
    message = context.get("message")
    loop_error_log.error("event loop error", (message, type(exc)), message=message, exc_info=exc)


def write_port_file(path: str, port: int) -> None:
    # Written whole and renamed into place so a reader never sees a partial number.
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as stream:
        stream.write(f"{port}\n")
    os.replace(tmp, path)
