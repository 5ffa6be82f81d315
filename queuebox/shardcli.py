"""`queuebox shard list|drain|resume|remove NAME`: the shards of a sharded cluster.

Owns: the command line and what it prints. It lives in the umbrella package,
as backupcli.py does, because it reaches both sides: the cluster map in etcd
(server/replication/cluster_map.py) and, for `remove`, the shard primary's
statistics over IPROTO (the bundled client, with the client commands' login
options). docs/cluster.md says what each step means for the cluster.

    list           every shard: number, state, primary (its leader key); and the
                   numbers of removed shards, kept so no other shard gets them
    drain NAME     state "draining": routers put no new task there
    resume NAME    state "active" again
    remove NAME    delete P/map/NAME (P/numbers/k stays); refused while the
                   shard's primary reports tasks, or cannot be asked, unless --force

Exit codes, as every client command's: 0 done, 1 refused (tasks left) or an
etcd error, 2 usage, 3 etcd or the shard's primary unreachable, 4 no such shard,
6 the primary refused the login.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from queuebox.clients.blocking import connect as client_connect
from queuebox.clients.cli.args import (
    ArgumentParser,
    add_password_arguments,
    add_pem_arguments,
    add_tls_arguments,
)
from queuebox.clients.cli.output import table, terminal_width
from queuebox.clients.errors import AccessDenied, AuthError, NetworkError, QueueboxError
from queuebox.protocol.etcdflags import add_etcd_arguments

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_NOT_FOUND, EXIT_REFUSED = 0, 1, 2, 3, 4, 6


class Failed(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def build_parser(prog: str) -> ArgumentParser:
    env = os.environ
    parser = ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument(
        "action",
        choices=("list", "drain", "resume", "remove"),
        help="list the shards; drain, resume or remove shard NAME",
    )
    parser.add_argument("name", nargs="?", metavar="NAME", help="the shard (not for list)")
    etcd = parser.add_argument_group("etcd", "defaults: the server's QUEUEBOX_ETCD_* settings")
    add_etcd_arguments(etcd, env)
    add_pem_arguments(
        etcd,
        env,
        "etcd",
        "QUEUEBOX_ETCD",
        (
            "https:// endpoints: PEM CA etcd's certificate is checked with",
            "https:// endpoints: PEM client certificate shown to etcd",
            "the PEM private key of --etcd-cert",
        ),
        default="",
    )
    login = parser.add_argument_group(
        "the shard's primary (remove asks its statistics)",
        "defaults: QUEUEBOX_USER, QUEUEBOX_PASSWORD",
    )
    login.add_argument(
        "--user",
        default=env.get("QUEUEBOX_USER") or None,
        help="log in as USER (default: $QUEUEBOX_USER, else guest)",
    )
    add_password_arguments(
        login,
        "--password",
        "password",
        env.get("QUEUEBOX_PASSWORD"),
        "password of USER (default: $QUEUEBOX_PASSWORD)",
    )
    add_tls_arguments(login, env)
    parser.add_argument("--force", action="store_true", help="remove even with tasks left")
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


def main(argv: list[str], prog: str = "queuebox shard") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if not args.etcd_endpoints:
        parser.error("--etcd-endpoints (or QUEUEBOX_ETCD_ENDPOINTS) is needed")
    if args.action != "list" and not args.name:
        parser.error(f"{args.action} needs the shard's NAME")
    try:
        result = asyncio.run(_run(args))
    except Failed as e:
        if args.json:
            print(json.dumps({"error": str(e), "exit": e.code}), file=sys.stderr)
        else:
            print(f"{prog}: {e}", file=sys.stderr)
        return e.code
    print(json.dumps(result) if args.json else _text(args.action, result))
    return EXIT_OK


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    # Imported here: the etcd client brings grpc, heavy to load.
    from queuebox.server.replication import cluster_map as cm  # noqa: PLC0415
    from queuebox.server.replication.etcd_tls import EtcdTls  # noqa: PLC0415
    from queuebox.server.replication.leader import LeaderError  # noqa: PLC0415

    tls = EtcdTls(args.etcd_ca, args.etcd_cert, args.etcd_key)
    try:
        client = await cm.connect(args.etcd_endpoints, tls)
    except LeaderError as e:
        raise Failed(EXIT_UNREACHABLE, str(e)) from None
    try:
        cluster = cm.ClusterMap(client, args.etcd_prefix)
        actions: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
            "list": lambda: _list(cluster),
            "drain": lambda: _state(cluster, args.name, cm.DRAINING),
            "resume": lambda: _state(cluster, args.name, cm.ACTIVE),
            "remove": lambda: _remove(cluster, args),
        }
        return await actions[args.action]()
    except cm.ClusterMapError as e:
        missing = "no shard named" in str(e)
        raise Failed(EXIT_NOT_FOUND if missing else EXIT_ERROR, str(e)) from None
    except LeaderError as e:
        raise Failed(EXIT_ERROR, str(e)) from None
    finally:
        await client.close()


async def _list(cluster: Any) -> dict[str, Any]:
    shards = await cluster.shards()
    numbers = await cluster.numbers()
    rows = []
    for name, entry in shards.items():
        rows.append({**entry.view(), "primary": await cluster.leader(name)})
    live = {entry.number for entry in shards.values()}
    removed = [{"number": k, "name": n} for k, n in sorted(numbers.items()) if k not in live]
    return {"shards": rows, "removed": removed}


async def _state(cluster: Any, name: str, state: str) -> dict[str, Any]:
    entry = await cluster.set_state(name, state)
    return {"shard": {**entry.view(), "primary": await cluster.leader(name)}}


async def _remove(cluster: Any, args: argparse.Namespace) -> dict[str, Any]:
    entry = await cluster.shard(args.name)
    if entry is None:
        raise Failed(EXIT_NOT_FOUND, f"no shard named {args.name} in the cluster map")
    primary = await cluster.leader(args.name)
    tasks = None
    if not args.force:
        if primary is None:
            raise Failed(
                EXIT_UNREACHABLE,
                f"shard {args.name} has no primary to ask how many tasks it holds; "
                "start it, or remove it with --force (its tasks, if any, are lost to the cluster)",
            )
        tasks = await asyncio.to_thread(_tasks_of, primary, args)
        if tasks:
            raise Failed(
                EXIT_ERROR,
                f"shard {args.name} still holds {tasks} tasks: drain it and let them be "
                "consumed (queuebox shard drain), or remove it with --force",
            )
    await cluster.remove(args.name)
    return {"removed": {**entry.view(), "primary": primary, "tasks": tasks}}


def _tasks_of(address: str, args: argparse.Namespace) -> int:
    """Every task the shard's primary holds, over all its tubes."""
    host, _, port = address.rpartition(":")
    try:
        with client_connect(
            host.strip("[]"), int(port), args.user, args.password,
            reconnect=False, tls=args.tls, call_timeout=10.0,
        ) as conn:  # fmt: skip
            stats = conn.call("queue.statistics")
    except AuthError as e:
        raise Failed(EXIT_REFUSED, f"the shard's primary {address}: {e}") from None
    except AccessDenied as e:
        raise Failed(EXIT_REFUSED, f"the shard's primary {address}: {e}") from None
    except NetworkError as e:
        raise Failed(EXIT_UNREACHABLE, f"the shard's primary {address}: {e}") from None
    except QueueboxError as e:
        raise Failed(EXIT_ERROR, f"the shard's primary {address}: {e}") from None
    by_tube = stats[0] if stats and isinstance(stats[0], dict) else {}
    return sum(int(tube["tasks"]["total"]) for tube in by_tube.values())


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ") if ts else "-"


def _text(action: str, result: dict[str, Any]) -> str:
    if action == "list":
        rows = [
            [s["name"], str(s["number"]), s["state"], s["primary"] or "none", _when(s["added"])]
            for s in result["shards"]
        ]
        header = ["SHARD", "NUMBER", "STATE", "PRIMARY", "ADDED"]
        out = table(header, rows, terminal_width(), text=frozenset({2, 3, 4}))
        if not rows:
            out = "no shards"
        removed = result["removed"]
        if removed:
            kept = ", ".join(f"{r['number']} ({r['name']})" for r in removed)
            out += f"\nnumbers of removed shards, never given again: {kept}"
        return out
    if action == "remove":
        gone = result["removed"]
        return f"shard {gone['name']} (number {gone['number']}) removed from the cluster map"
    shard = result["shard"]
    return f"shard {shard['name']} (number {shard['number']}) is {shard['state']}"
