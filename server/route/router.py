"""`queuebox router`: the command line, the listener, /metrics.

Owns `Router` (what every client connection shares: the shard map, the users,
the service user's login, the put spread, the counts) and `main`. The router
keeps no task state: a client's calls live on the shards, under the client's
own user (queuebox.act_as), and its connections to them close with it.
Must not route calls (calls.py) nor read frames (client.py).

    queuebox router --listen 127.0.0.1:3311 --etcd-endpoints http://127.0.0.1:2379 \\
        --config users.toml --shard-user router    # QUEUEBOX_ROUTER_PASSWORD=...
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import os
import signal
import socket
import uuid
from collections.abc import Callable, Iterator
from typing import cast

from prometheus_client.core import CollectorRegistry, Metric

from queuebox.protocol.etcdflags import add_etcd_arguments

from ..access.users import Users
from ..runtime import logs
from ..runtime.families import counter, gauge
from ..runtime.loop import run
from ..settings.config import Config
from ..settings.config_load import load_config
from ..web.metrics import exposition
from .choice import SPREADS, Spread
from .client import RouterClient
from .link import ClientLink, close_all
from .shardmap import RouterMap
from .upstream import SILENCE_S, Login, SchemaIds, Traffic

log = logs.get_logger("queuebox.router")
PASSWORD_ENV = "QUEUEBOX_ROUTER_PASSWORD"


class Router:
    def __init__(self, args: argparse.Namespace, users: Users, password: str) -> None:
        self.map = RouterMap(args.etcd_endpoints, args.etcd_prefix)
        self.users = users
        self.name: str = args.name or default_name(args.listen)
        self.login = Login(args.shard_user, password, self.name)
        self.traffic = Traffic()
        self.schemas = SchemaIds()
        self.spread = Spread(args.spread, self.traffic)
        self.instance_uuid = uuid.uuid4()
        self.max_frame = 16 * 1024 * 1024
        self.clients: set[ClientLink] = set()
        self.turn = 0  # takes start one shard further each time (takes.py)
        self.silence_s: float = args.shard_silence


def default_name(listen: str) -> str:
    """The listen address, with this host's name where it names every interface
    (routers of one compose file all listen on 0.0.0.0:3301)."""
    host, _, port = listen.rpartition(":")
    return f"{socket.gethostname()}:{port}" if host in ("", "0.0.0.0", "::", "[::]") else listen


class RouterCollector:
    """The router's /metrics: calls per shard, upstream connections, etcd."""

    def __init__(self, router: Router) -> None:
        self.router = router

    def collect(self) -> Iterator[Metric]:
        r, t = self.router, self.router.traffic
        per_shard = (
            ("forwarded", "client calls sent on to a shard", t.forwarded),
            ("own_calls", "the router's own calls to a shard (takes, waits, sums)", t.own_calls),
            ("shard_pings", "pings sent to a shard silent while a call waited on it", t.pings),
            ("shard_silent", "connections to a shard dropped: no byte for --shard-silence "
             "with a call in flight", t.silenced),
        )  # fmt: skip
        for name, doc, counts in per_shard:
            samples = dict(sorted(counts.items()))
            yield counter(f"queuebox_router_{name}_total", doc, labels=["shard"], samples=samples)
        yield gauge("queuebox_router_upstreams", "connections to shards", t.open)
        yield gauge("queuebox_router_clients", "client connections", len(r.clients))
        yield gauge(
            "queuebox_router_etcd_ok",
            "1: the shard map is etcd's; 0: etcd unreachable, the last map read is served",
            int(r.map.etcd_ok),
        )
        yield gauge(
            "queuebox_router_shard_primary",
            "1 when the shard has a primary",
            labels=["shard", "number"],
            samples={(s.name, str(s.number)): int(s.leader is not None) for s in r.map.serving()},
        )
        yield _clients_by_shard(r.clients)


def _clients_by_shard(clients: set[ClientLink]) -> Metric:
    """How many of the router's clients, per user, have a connection open to each shard."""
    counts: dict[tuple[str, str], int] = {}
    for client in clients:
        for shard in client.shard_names():
            counts[(client.user, shard)] = counts.get((client.user, shard), 0) + 1
    return gauge(
        "queuebox_router_shard_clients",
        "client connections of a user that have a connection open to the shard",
        labels=["user", "shard"],
        samples=dict(sorted(counts.items())),
    )


async def _metrics(router: Router, host: str, port: int) -> asyncio.Server:
    registry = CollectorRegistry()
    registry.register(RouterCollector(router))  # type: ignore[arg-type]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0)
            ok = head.split(b" ", 2)[1:2] == [b"/metrics"]
            body, kind = exposition(registry, "") if ok else (b"not found\n", "text/plain")
            status = b"200 OK" if ok else b"404 Not Found"
            writer.write(
                b"HTTP/1.1 "
                + status
                + b"\r\nContent-Type: "
                + kind.encode()
                + b"\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n"
                + body
            )
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(serve, host, port)


async def serve(args: argparse.Namespace, users: Users, password: str) -> None:
    router = Router(args, users, password)
    # Every routed frame makes a few objects that die young (a node does the
    # same, server/start/serve.py): the youngest generation is collected every
    # 10,000 allocations, not 700 (docs/cluster.md "Measured").
    gc.set_threshold(10_000, 10, 10)
    await router.map.start()
    loop = asyncio.get_running_loop()
    host, _, port = args.listen.rpartition(":")
    # RouterClient is a protocol by its methods (the transports ask no base class of it).
    factory = cast(Callable[[], asyncio.Protocol], lambda: RouterClient(router))
    server = await loop.create_server(factory, host or "127.0.0.1", int(port))
    metrics = None
    if args.metrics_listen:
        m_host, _, m_port = args.metrics_listen.rpartition(":")
        metrics = await _metrics(router, m_host or "127.0.0.1", int(m_port))
    log.info(
        "router listening", listen=args.listen, shards=len(router.map.serving()), spread=args.spread
    )
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    if metrics is not None:
        metrics.close()
    await close_all(router.clients)
    await router.map.stop()
    log.info("router stopped")


def build_parser(prog: str) -> argparse.ArgumentParser:
    env = os.environ
    p = argparse.ArgumentParser(prog=prog, description="A router in front of a sharded cluster.")
    p.add_argument(
        "--listen",
        default=env.get("QUEUEBOX_ROUTER_LISTEN", "127.0.0.1:3311"),
        help="HOST:PORT to serve IPROTO on (default 127.0.0.1:3311)",
    )
    add_etcd_arguments(p, env, required=True)
    p.add_argument(
        "--config",
        default=env.get("QUEUEBOX_CONFIG"),
        help="TOML file with the shards' [users.*] (the same file; default: "
        "$QUEUEBOX_CONFIG, else no users but guest)",
    )
    p.add_argument(
        "--shard-user",
        default=env.get("QUEUEBOX_ROUTER_USER", "router"),
        help="the service user, holding the route right, the router logs in as "
        f"(its password: ${PASSWORD_ENV}; default: %(default)s)",
    )
    p.add_argument(
        "--name",
        default=env.get("QUEUEBOX_ROUTER_NAME"),
        help="this router's name, shown by the shards beside the connections it opened "
        "for its clients and by queuebox.cluster() (default: its --listen address, "
        "with the host's name for 0.0.0.0)",
    )
    p.add_argument(
        "--metrics-listen",
        default=env.get("QUEUEBOX_ROUTER_METRICS_LISTEN"),
        help="HOST:PORT to serve /metrics on (default: none)",
    )
    p.add_argument(
        "--spread",
        choices=SPREADS,
        default="round-robin",
        help="where a put without utube or key goes (default round-robin)",
    )
    p.add_argument(
        "--shard-silence",
        type=_seconds,
        default=env.get("QUEUEBOX_ROUTER_SHARD_SILENCE", str(SILENCE_S)),  # parsed by type
        help="seconds a shard may send nothing (pings unanswered) while a call waits "
        "on it before the router drops its connection and answers the call "
        "(default %(default)s)",
    )
    p.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="uvloop",
        help="the event loop (default uvloop)",
    )
    p.add_argument(
        "--log-format",
        choices=("console", "json"),
        default="console",
        help="log lines for people or as JSON (default console)",
    )
    return p


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def client_users(config: Config, service_user: str) -> Users:
    """Whom the router's clients may log in as: the users of its config, less its
    own service user (QUEUEBOX_ROUTER_USER + _PASSWORD define it there too):
    a client acting as that user would keep `route`, and could act as anyone."""
    return Users({name: u for name, u in config.users.items() if name != service_user})


def main(argv: list[str], prog: str = "queuebox router") -> int:
    args = build_parser(prog).parse_args(argv)
    logs.configure(args.log_format)
    config = load_config(env=dict(os.environ), config_file=args.config)
    password = os.environ.get(PASSWORD_ENV, "")
    if not password:
        log.error(f"no password for the service user: set {PASSWORD_ENV}")
        return 2
    users = client_users(config, args.shard_user)
    try:
        run(serve(args, users, password), args.loop)
    except Exception as e:
        log.error("router failed", error=str(e))
        return 1
    return 0
