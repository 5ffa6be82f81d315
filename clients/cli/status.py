"""`queuebox status`: the cluster as its instances see it, as a table or JSON.

Owns: asking each address given (`--address`, repeatable, or
$QUEUEBOX_ADDRESSES; else --host/--port) for `queuebox.status()`, and putting
the answers side by side: one row per instance with its role, queue state,
LSN, the primary it knows and the term, and, from the primary's own answer,
its lag (LSNs and seconds) and whether it is in the in-sync set; a note says
why an instance stands aside, that etcd does not answer it, that it could
not be reached, or that it refused the login or the call. A router (it answers
`queuebox.cluster()`), or the cluster under --etcd-endpoints, is shown shard
by shard instead (clusterview.py): name, number, state, primary, tasks by
state, and their sum. Talks to the servers through `clients.blocking` only.

Exit codes: 0 every address answered, 1 some did not (or some shard behind a
router did not), 3 none did (6 when every one
refused: a wrong login, or a user without the right to ask), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from queuebox.clients import blocking
from queuebox.clients.cli.commands import _connect, _parser
from queuebox.clients.errors import AccessDenied, AuthError, QueueboxError
from queuebox.clients.failover import parse_addresses

from . import clusterview, tables
from .output import EXIT_REFUSED, terminal_width
from .output import EXIT_UNREACHABLE as EXIT_NONE

EXIT_OK, EXIT_SOME = 0, 1

COLUMNS = ("address", "role", "state", "lsn", "primary", "term", "in_sync", "lag", "note")
WORDS = frozenset(n for n, c in enumerate(COLUMNS) if c not in ("lsn", "term"))  # the rest: numbers


def ask(host: str, port: int, args: argparse.Namespace) -> dict[str, Any]:
    """One instance's answer: {"address", "status"} or {"address", "error", "refused"}
    (refused: it answered, but not to this login or user)."""
    address = f"{host}:{port}"
    try:
        with blocking.connect(
            host,
            port,
            args.user,
            args.password,
            connect_timeout=args.connect_timeout,
            call_timeout=args.connect_timeout,
            reconnect=False,
            tls=args.tls,
        ) as conn:
            found = clusterview.view(conn)
            if found is not None:  # a router: the cluster behind it, shard by shard
                return {"address": address, "cluster": clusterview.with_total(found)}
            return {"address": address, "status": conn.call("queuebox.status")[0]}
    except (AuthError, AccessDenied) as exc:
        return {"address": address, "error": exc.message, "refused": True}
    except QueueboxError as exc:
        return {"address": address, "error": str(exc), "refused": False}


def ask_cluster(args: argparse.Namespace) -> dict[str, Any]:
    """The cluster under --etcd-endpoints, through the self-routing client."""
    address = f"etcd {args.etcd_endpoints} {args.etcd_prefix}"
    try:
        with _connect(args) as conn:  # --etcd-endpoints: the self-routing client
            found = clusterview.view(conn)
            assert found is not None  # a self-routing connection always has one
            return {"address": address, "cluster": clusterview.with_total(found)}
    except (AuthError, AccessDenied) as exc:
        return {"address": address, "error": exc.message, "refused": True}
    except QueueboxError as exc:
        return {"address": address, "error": str(exc), "refused": False}


def rows(answers: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The table: each instance's own word, with its lag and sync as the primary sees it."""
    seen_by_primary: dict[str, dict[str, Any]] = {}
    for answer in answers:
        status = answer.get("status")
        if status and status["role"] == "primary":
            seen_by_primary.update({r["name"]: r for r in status["replicas"]})
    table = []
    for answer in answers:
        if "cluster" in answer:
            continue  # a router's: its own table (clusterview.status_table)
        status = answer.get("status")
        if status is None:
            # What the primary last heard from it, if it is one of its replicas.
            replica = seen_by_primary.get(answer["address"])
            table.append(
                {
                    "address": answer["address"],
                    "in_sync": _in_sync({"role": "?"}, replica),
                    "lag": _lag(replica),
                    "note": f"{_why(answer)}: {answer['error']}",
                }
            )
            continue
        replica = seen_by_primary.get(status["name"])
        table.append(
            {
                "address": answer["address"],
                "role": status["role"],
                "state": status["state"],
                "lsn": str(status["lsn"]),
                "primary": status["primary"] or "-",
                "term": "-" if status["term"] is None else str(status["term"]),
                "in_sync": _in_sync(status, replica),
                "lag": _lag(replica),
                "note": _note(status, replica),
            }
        )
    return table


def _why(answer: dict[str, Any]) -> str:
    return "refused" if answer["refused"] else "unreachable"


def _in_sync(status: dict[str, Any], replica: dict[str, Any] | None) -> str:
    if status["role"] == "primary":
        return f"{len(status['in_sync'])} of {len(status['replicas'])}"
    return "-" if replica is None else ("yes" if replica["in_sync"] else "no")


def _lag(replica: dict[str, Any] | None) -> str:
    if replica is None:
        return "-"
    return f"{replica['lag_lsn']} / {replica['lag_seconds']:.1f}s"


def _note(status: dict[str, Any], replica: dict[str, Any] | None) -> str:
    notes = []
    broken = status.get("wal_broken")  # None, or absent from an older server's answer
    if broken:
        notes.append(f"WAL broken, restart it: {broken}")
    if status["waiting"]:
        notes.append(f"stands aside: {status['waiting']}")
    if status["etcd_error"]:
        notes.append(f"etcd: {status['etcd_error']}")
    following = status["following"]
    if following is not None and following["diverged"]:
        notes.append(f"diverged: {following['diverged']}")
    if replica is not None and not replica["connected"]:
        notes.append("not connected to the primary")
    return "; ".join(notes)


def _text(answers: list[dict[str, Any]]) -> str:
    """The instances' table (when any was asked directly), then each cluster's."""
    parts = [render(rows(answers))] if any("cluster" not in a for a in answers) else []
    width = terminal_width()
    parts += [clusterview.status_table(a["cluster"], width) for a in answers if "cluster" in a]
    return "\n\n".join(parts)


def render(table: list[dict[str, str]]) -> str:
    header = [c.upper() for c in COLUMNS]
    cells = [[row.get(c, "") for c in COLUMNS] for row in table]
    return tables.table(header, cells, None, text=WORDS)


def main(argv: list[str], prog: str = "queuebox status") -> int:
    parser = _parser(
        prog,
        "Ask each instance (every --address, or --host/--port) for its view of the "
        "cluster (queuebox.status()) and print them side by side: role, state, LSN, "
        "primary, term, in-sync, lag. A router, or the cluster under --etcd-endpoints, "
        "is shown shard by shard (state, primary, tasks) with their sum. "
        "--failover-timeout is not used.",
    )
    args = parser.parse_args(argv)
    if args.etcd_endpoints:
        answers = [ask_cluster(args)]
    else:
        targets = parse_addresses(args.addresses) if args.addresses else ((args.host, args.port),)
        answers = [ask(host, port, args) for host, port in targets]
    if args.json:
        print(json.dumps({"instances": answers}, ensure_ascii=False, default=str))
    else:
        print(_text(answers))
    failed = sum("error" in a for a in answers)
    shards_failed = 0  # shards a router (or etcd) named that did not answer
    for answer in answers:
        if "error" in answer:
            why = _why(answer)
            print(f"{prog}: {answer['address']}: {why}: {answer['error']}", file=sys.stderr)
        for shard in clusterview.failed_shards(answer["cluster"]) if "cluster" in answer else []:
            shards_failed += 1
            print(f"{prog}: {answer['address']}: {shard}", file=sys.stderr)
    if not failed:
        return EXIT_SOME if shards_failed else EXIT_OK
    if failed < len(answers):
        return EXIT_SOME
    return EXIT_REFUSED if all(a["refused"] for a in answers) else EXIT_NONE
