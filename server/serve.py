"""`queuebox serve`: flags, config, logging, signals, and the run of the server.

Owns: the serve command's argument parser (one flag per `Config` setting,
generated from the config table so flags, env and TOML never drift apart),
the startup lines with the bound addresses, starting the listener on the
main port and on the 1.5 port (`legacy_listen`), the port file, and turning
SIGTERM/SIGINT into the listener's graceful shutdown. Must not know about
requests or functions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import Any

from . import legacy15, logs
from .build import Server, build_server
from .config import SCALAR_FIELDS, Config, ConfigError, load_config
from .listener import Listener
from .loop import run

log = logs.get_logger("queuebox.serve")

BOOLEAN_FLAGS = {"allow_open_guest", "force_recovery", "test_hooks"}


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run the queuebox server. Settings: defaults < --config TOML < "
        "QUEUEBOX_* environment < these flags.",
    )
    parser.add_argument("--config", metavar="FILE", help="TOML config file ($QUEUEBOX_CONFIG)")
    parser.add_argument("--listen", metavar="HOST:PORT", help="address (default 127.0.0.1:3301)")
    for name in SCALAR_FIELDS:
        flag = "--" + name.replace("_", "-")
        if name in BOOLEAN_FLAGS:
            parser.add_argument(flag, dest=name, action="store_const", const=True, default=None)
        else:
            parser.add_argument(flag, dest=name, metavar=name.upper().split("_")[-1])
    return parser


def main(argv: list[str], prog: str = "queuebox serve") -> int:
    args = build_parser(prog).parse_args(argv)
    flags = {key: value for key, value in vars(args).items() if key != "config"}
    try:
        config = load_config(flags, os.environ, args.config)
    except ConfigError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    logs.configure(config.log_format, config.log_level)
    return run(serve(config), config.loop)


SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def serve(config: Config) -> int:
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_log_loop_error)
    # Handlers go in first: a SIGTERM during a long recovery then means "stop
    # once started", not an abrupt death with a half-written data directory.
    stopping = asyncio.Event()
    received: list[str] = []
    for signum in SIGNALS:
        loop.add_signal_handler(signum, _on_signal, signum, stopping, received)
    try:
        return await _serve(config, stopping, received)
    finally:
        for signum in SIGNALS:
            loop.remove_signal_handler(signum)


async def _serve(config: Config, stopping: asyncio.Event, received: list[str]) -> int:
    try:
        os.makedirs(config.data_dir, exist_ok=True)
        server = build_server(config)
    except OSError as exc:
        log.error("cannot start", error=str(exc), data_dir=config.data_dir)
        return 1
    except Exception:
        log.exception("cannot start", data_dir=config.data_dir)
        return 1
    app = server.app
    listener = Listener(app)
    try:
        host, port = await listener.start()
        await listen_legacy15(listener, server)
    except OSError as exc:
        log.error(
            "cannot listen",
            error=str(exc),
            listen=f"{config.listen_host}:{config.listen_port}",
            legacy_listen=config.legacy_listen,
        )
        await listener.shutdown(0)  # what was opened is closed properly
        return 1
    log.info(
        "listening",
        address=f"{host}:{port}",
        port=port,
        data_dir=config.data_dir,
        loop=config.loop,
        users=sorted(config.users),
        guest_rights=sorted(app.users.rights("guest")),
    )
    if config.port_file:
        write_port_file(config.port_file, port)
    await stopping.wait()
    log.info("shutting down", signal=received[0], grace_s=config.shutdown_grace_s)
    await listener.shutdown(config.shutdown_grace_s)
    log.info("stopped")
    return 0


async def listen_legacy15(listener: Listener, server: Server) -> None:
    """The Tarantool 1.5 port, when `legacy_listen` is set (server/legacy15.py)."""
    address = server.app.config.legacy_listen
    if address is None:
        return
    host, port = await listener.listen(legacy15.factory(server.app, server.queue), *address)
    log.info("legacy port listening", protocol="tarantool 1.5", address=f"{host}:{port}", port=port)


def _on_signal(signum: int, stopping: asyncio.Event, received: list[str]) -> None:
    received.append(signal.Signals(signum).name)
    stopping.set()


def _log_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    # Errors asyncio catches in callbacks go to our log, not to stdlib logging.
    exc = context.get("exception")
    log.error("event loop error", message=context.get("message"), exc_info=exc)


def write_port_file(path: str, port: int) -> None:
    # Written whole and renamed into place so a reader never sees a partial number.
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as stream:
        stream.write(f"{port}\n")
    os.replace(tmp, path)
