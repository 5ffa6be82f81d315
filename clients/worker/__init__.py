"""Workers: run a function for each task of a tube, as a library call, a decorator or
the `queuebox worker MODULE:FUNCTION --tube NAME` command (`cli`).

Owns the public names: `run` (connect, work until SIGTERM/Ctrl-C, return the
`Worker`), `serve` (the same on a connection you have, inside asyncio), `handler` (a
decorator that names the tube and options next to the function), `current_task`, and
`RetryDefaults`. The worker itself is `runner.Worker`, its failure rules
`retry.after_failure`. Built on `clients.aio`; must not import server/, drivers/ or
storage/.

    from queuebox.clients import worker

    @worker.handler("emails", concurrency=4)
    def send(data):              # plain functions run in threads, async ones on the loop
        deliver(data["to"])      # returns: acked; raises: tried again later, then buried

    if __name__ == "__main__":
        send.run()               # or: queuebox worker mymodule:send
"""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
from collections.abc import Callable, Iterable
from typing import Any

from queuebox.clients import aio
from queuebox.clients.worker.retry import RetryDefaults
from queuebox.clients.worker.runner import Worker, current_task

__all__ = ["Handler", "RetryDefaults", "Worker", "current_task", "handler", "run", "serve"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# The most requests one write of the worker's connection carries. A burst made in one
# turn of the loop (its acks and next takes, one pair for each reply it read) leaves in
# pieces: the server starts on the first piece while the rest are being made, instead
# of each side waiting for the other's whole batch in turn. Measured with a worker
# (docs/workers.md "Speed"): 16 doubles its rate over one write a turn; 32 split only
# bursts of more than 16 tasks (none with 16 threads); 8 cost more writes for no more
# speed. Other users of the client keep one write a turn (iproto.Options.write_every).
WRITE_EVERY = 16
log = logging.getLogger("queuebox.worker")


class _Signals:
    """SIGTERM and Ctrl-C over a worker's whole life: while it connects, they end the
    wait; once it works, they stop it (the second one aborts it). `seen` may hold
    signals that came before the loop ran (the command installs its handlers first)."""

    def __init__(self, seen: list[int] | None = None) -> None:
        self.seen = seen if seen is not None else []
        self.worker: Worker | None = None
        self.waiting: asyncio.Future[Any] | None = None

    def __call__(self, signum: int) -> None:
        log.info("%s: stopping", signal.Signals(signum).name)
        self.seen.append(signum)
        if self.worker is not None:
            self.worker.stop()
        elif self.waiting is not None:
            self.waiting.cancel()

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, self, signum)

    def remove(self, loop: asyncio.AbstractEventLoop) -> None:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)

    def working(self, worker: Worker) -> Worker:
        self.worker = worker
        if self.seen:  # asked to stop before it could start
            worker.stop()
        return worker


async def serve(
    function: Callable[[Any], Any], tube: str, connection: aio.Connection, **options: Any
) -> Worker:
    """Work on `tube` through `connection` until the worker is stopped (`Worker.stop()`;
    SIGTERM and Ctrl-C too unless ``signals=False``); returns the stopped `Worker`.
    `options` are `Worker`'s: concurrency, take_timeout, retry, grace, keep_alive,
    tracebacks."""
    signals: _Signals | None = _Signals() if options.pop("signals", True) else None
    loop = asyncio.get_running_loop()
    worker = Worker(connection.tube(tube), function, **options)
    if signals is not None:
        signals.install(loop)
        signals.working(worker)
    try:
        await worker.run()
    finally:
        if signals is not None:
            signals.remove(loop)
    return worker


def run(
    function: Callable[[Any], Any],
    tube: str,
    *,
    host: str = "127.0.0.1",
    port: int = 3301,
    user: str | None = None,
    password: str | None = None,
    addresses: str | Iterable[str | tuple[str, int]] | None = None,
    wait_for_server: float = 60.0,
    signals_seen: list[int] | None = None,
    tls: ssl.SSLContext | None = None,
    etcd_endpoints: str | None = None,
    etcd_prefix: str = "/queuebox",
    **options: Any,
) -> Worker | None:
    """Connect (waiting up to `wait_for_server` s for a server that is not up yet) and
    work on `tube` until SIGTERM or Ctrl-C; returns the stopped `Worker`, or None when
    a signal came before it connected. Blocks: it runs its own event loop. `options`
    as in `serve`; `signals_seen`: signals received before this was called; `tls` as
    in `aio.connect`; `etcd_endpoints`, `etcd_prefix`: work on a sharded cluster's
    tube, routing by itself (`aio.connect`)."""
    signals = _Signals(signals_seen)

    async def main() -> Worker | None:
        loop = asyncio.get_running_loop()
        signals.install(loop)
        try:
            if signals.seen:
                return None
            signals.waiting = asyncio.ensure_future(_connect())
            try:
                connection = await signals.waiting
            except asyncio.CancelledError:
                if signals.seen:
                    return None
                raise
            async with connection:
                worker = signals.working(Worker(connection.tube(tube), function, **options))
                await worker.run()
                return worker
        finally:
            signals.remove(loop)

    async def _connect() -> aio.Connection:
        return await aio.connect(
            host,
            port,
            user,
            password,
            addresses=addresses,
            wait_for_server=wait_for_server,
            tls=tls,
            etcd_endpoints=etcd_endpoints,
            etcd_prefix=etcd_prefix,
            write_every=WRITE_EVERY,
        )

    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(main())


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop when it is installed (it is a dependency): a worker spends much of
    its time in the loop; asyncio's otherwise."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


class Handler:
    """A function marked by `@handler(tube, ...)`: still callable as itself, and it
    knows where it works (`run()`, `serve(connection)`, `queuebox worker MOD:NAME`)."""

    def __init__(self, function: Callable[[Any], Any], tube: str, options: dict[str, Any]):
        self.function = function
        self.tube = tube
        self.options = options
        self.__name__ = getattr(function, "__name__", "handler")
        self.__doc__ = function.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def run(self, **connect: Any) -> Worker | None:
        """`worker.run` with this function, tube and options (connect's keywords here)."""
        return run(self.function, self.tube, **{**self.options, **connect})

    async def serve(self, connection: aio.Connection, **options: Any) -> Worker:
        return await serve(self.function, self.tube, connection, **{**self.options, **options})


def handler(tube: str, **options: Any) -> Callable[[Callable[[Any], Any]], Handler]:
    """Mark a function as the worker of `tube`, with `Worker`'s options."""

    def mark(function: Callable[[Any], Any]) -> Handler:
        return Handler(function, tube, options)

    return mark
