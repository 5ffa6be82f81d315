"""Where a call goes in a sharded cluster, and how the shards' answers combine.

Owns the routing table of docs/cluster.md "Router": a call on one task goes
to the shard its id names (`id % 1024`; no such shard: the module's "Task N
not found"); a put to the shard its utube or `key` hashes to, else spread
(spread.py); a take over every shard (takes.py); create_tube, drop, cfg,
truncate, release_all, on_task_change, queuebox.tube_options to every shard
(and P/tubes, P/cfg); a schedule to the shard its name hashes to, and
queuebox.schedules from every shard; statistics summed; kick(n) shard by shard; a page of
queuebox.tasks shard by shard; queuebox.cluster (view.py); anything else to the first shard. Frames
sent to one shard go as the client sent them. Must not touch sockets (the
client's connection and its upstreams do), nor judge a call's arguments:
the shard answers what a single node would.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from queuebox.drivers.callnames import MODULE_ACCESS, parse_name
from queuebox.protocol import Request, RequestType
from queuebox.protocol.client import decode_response
from queuebox.protocol.placement import (
    BY_ID_METHODS as BY_ID,
)
from queuebox.protocol.placement import (
    EVERY_SHARD_CALLS,
    EVERY_SHARD_METHODS,
    ONE_TASK_CALLS,
    SCHEDULE_CALLS,
    TUBE_WRITTEN,
    id_shard,
    tube_write,
)
from queuebox.protocol.placement import home as by_hash

from ..replication.cluster_map import ClusterMap
from ..runtime.logs import get_logger
from .frames import answer as _data
from .frames import failed, no_primary, resynced
from .shardmap import Shard
from .spread import forward, put_shard, to_first
from .takes import take
from .upstream import ShardLost
from .view import CLUSTER_CALL, cluster

if TYPE_CHECKING:
    from .client import RouterClient as Client

log = get_logger("queuebox.router")
NAMESPACES = ("queue",)
FUNCTIONS = frozenset(MODULE_ACCESS)
EVAL_CREATE = "local name, type, cfg = ... ; queue.create_tube(name, type, cfg)"
UUID_BYTES = 16
PARSED_CACHE_SIZE = 10_000  # names come from clients: bounded
_parsed: dict[str, Any] = {}  # a name read once, as the server's registry does


def route_call(client: Client, req: Request) -> None:
    """One CALL, CALL_16 or EVAL: answered through `client.send`, now or later."""
    name = req.function_name if req.type != RequestType.EVAL else req.expr
    args = req.args if isinstance(req.args, list) else []
    if not isinstance(name, str):
        return to_first(client, req)  # the shard answers what a single node answers
    if req.type == RequestType.EVAL and name == EVAL_CREATE:
        return every_shard(client, req, "queue.create_tube", args)
    parsed = _parsed.get(name, False)
    if parsed is False:
        parsed = parse_name(name, NAMESPACES, FUNCTIONS)
        if len(_parsed) >= PARSED_CACHE_SIZE:
            _parsed.clear()
        _parsed[name] = parsed
    if parsed is not None and parsed[1] is not None:
        tube, method = parsed[1], parsed[2]
        if method in BY_ID:
            return by_id(client, req, args[0] if args else None)
        if method == "put":
            return put(client, req, args)
        if method == "take":
            return take(client, req, str(tube), name, args[0] if args else None)
        if method == "kick":
            return client.spawn(kick(client, req, name, args))
        if method in EVERY_SHARD_METHODS:
            return every_shard(client, req, name, args)
    elif parsed is not None and parsed[0] in ("statistics", "stats"):
        return client.spawn(summed(client, req, name, args))
    elif parsed is not None and parsed[0] == "identify":
        return identify(client, req, args[0] if args else None)
    if name in EVERY_SHARD_CALLS:
        return every_shard(client, req, name, args)
    if name in ONE_TASK_CALLS:
        return by_id(client, req, args[1] if len(args) > 1 else None)
    if name in SCHEDULE_CALLS and args and client.map.active():
        return forward(client, req, by_hash(args[0], client.map.active()))
    if name == "queuebox.schedules":
        return client.spawn(listed(client, req, name, args))
    if name == "queuebox.tasks":
        return client.spawn(tasks_page(client, req, args))
    if name == CLUSTER_CALL:
        return cluster(client, req, args)
    to_first(client, req)


def by_id(client: Client, req: Request, task_id: Any) -> None:
    number = id_shard(task_id)  # a Lua number: the module reads 0.0 as 0
    if number is not None:
        shard = client.map.shard(number)
        if shard is None:
            # No shard has it: any shard answers what the module answers for a
            # missing task ("Task N not found", or "Task was not taken").
            return to_first(client, req)
        forward(client, req, shard)
    else:  # not an id: the shard says what a single node says
        to_first(client, req)


def put(client: Client, req: Request, args: list[Any]) -> None:
    forward(client, req, put_shard(client, args[1] if len(args) > 1 else {}))


# -- every shard --
def calls_to_all(
    client: Client, req: Request, name: str, args: list[Any], shaped: bool = True
) -> list[tuple[Shard, asyncio.Future[bytes]]]:
    """The router's own call of `name` on every shard, sent now (in the client's
    order); `shaped`: as the client asked (CALL_16 or CALL), else CALL."""
    call16 = shaped and req.type == RequestType.CALL_16
    return [
        (s, client.upstream(s).call(name, args, call16)) for s in client.map.serving() if s.leader
    ]


def every_shard(client: Client, req: Request, name: str, args: list[Any]) -> None:
    shards = client.map.serving()
    missing = [s.name for s in shards if s.leader is None]
    if missing or not shards:
        client.send(no_primary(req.sync, ", ".join(missing) or "(none)"))
        return
    client.spawn(_every_shard(client, req, name, args, calls_to_all(client, req, name, args)))


async def _every_shard(
    client: Client,
    req: Request,
    name: str,
    args: list[Any],
    sent: list[tuple[Shard, asyncio.Future[bytes]]],
) -> None:
    first: bytes | None = None
    for _shard, future in sent:
        try:
            payload = await future
        except ShardLost as e:
            client.send(no_primary(req.sync, e.shard, e.why))
            return
        if decode_response(payload).error_code:
            client.send(resynced(payload, req.sync))  # as the shard refused it
            return
        first = first or payload
    assert first is not None
    written = await _cluster_wide(client.map.cluster, name, args)
    if written is not None:  # a tube made or dropped: each shard learns the write's revision
        told = [client.upstream(s).call(TUBE_WRITTEN, list(written)) for s, _ in sent]
        for reply in await asyncio.gather(*told, return_exceptions=True):
            if not isinstance(reply, bytes) or decode_response(reply).error_code:
                log.warning("a shard was not told of the cluster's tube", call=name)
    client.send(resynced(first, req.sync))


async def _cluster_wide(
    cluster: ClusterMap | None, name: str, args: list[Any]
) -> tuple[str, int] | None:
    """What every shard now has, written where a shard that was down finds it;
    for a tube made or dropped, (tube, the revision of the write)."""
    if cluster is None:
        return None
    try:
        change = tube_write(name, args)
        if change is not None and change.tube_type is not None:
            return change.tube, await cluster.put_tube(change.tube, change.tube_type, change.opts)
        if change is not None:
            return change.tube, await cluster.drop_tube(change.tube)
        if name == "queue.cfg" and args and isinstance(args[0], dict):
            await cluster.put_cfg(args[0])
    except Exception as e:  # the shards have it: a shard down now misses it, said
        log.warning("could not write the cluster-wide change to etcd", call=name, error=str(e))
    return None


def identify(client: Client, req: Request, value: Any) -> None:
    """queue.identify: one session UUID for this client on every shard, made by
    the router (with no argument) or the client's, given to each shard with
    queuebox.identify_as; a shard opened later gets it at its login."""
    if value is None:
        session = client.session or uuid.uuid4().bytes
    elif isinstance(value, str | bytes):
        raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
        session = raw if len(raw) == UUID_BYTES else b""
    else:
        session = b""
    if not session:
        return to_first(client, req)  # a shard says what is wrong with it
    shards = client.map.serving()
    if any(s.leader is None for s in shards):
        client.send(no_primary(req.sync, ", ".join(s.name for s in shards if s.leader is None)))
        return
    # A session of the router's making is made on every shard; one the client
    # names must be known to some shard (a node refuses an unknown UUID).
    made = value is None or session == client.session
    name = "queuebox.identify_as" if made else "queue.identify"
    sent = [(s, client.upstream(s).call(name, [session])) for s in shards]
    client.spawn(_identified(client, req, session, sent))


async def _identified(
    client: Client,
    req: Request,
    session: bytes,
    sent: list[tuple[Shard, asyncio.Future[bytes]]],
) -> None:
    refused: list[tuple[Shard, Any]] = []
    for shard, future in sent:
        try:
            reply = decode_response(await future)
        except ShardLost as e:
            client.send(no_primary(req.sync, e.shard, e.why))
            return
        if reply.error_code:
            refused.append((shard, reply))
    if refused and len(refused) == len(sent):  # no shard knows it
        reply = refused[0][1]
        client.send(failed(req.sync, reply.error_code, reply.error_message))
        return
    for shard, _ in refused:  # known elsewhere: the same session here too
        await client.upstream(shard).call("queuebox.identify_as", [session])
    client.session = session
    client.send(_data(req, [session.decode("utf-8", "surrogateescape")]))


async def _every_answer(
    client: Client, req: Request, name: str, args: list[Any]
) -> list[list[Any]] | None:
    """Every shard's DATA for `name`, in shard order; None once a shard's error (or
    its loss) was sent to the client instead."""
    answers = []
    for _, future in calls_to_all(client, req, name, args, shaped=False):
        try:
            reply = decode_response(await future)
        except ShardLost as e:
            client.send(no_primary(req.sync, e.shard, e.why))
            return None
        if reply.error_code:
            client.send(failed(req.sync, reply.error_code, reply.error_message))
            return None
        answers.append(reply.data or [])
    return answers


async def summed(client: Client, req: Request, name: str, args: list[Any]) -> None:
    answers = await _every_answer(client, req, name, args)
    if answers is None:
        return
    total = _sum([a[0] if a else {} for a in answers])
    data = [total] if answers and any(answers) else []
    client.send(_data(req, data))


async def listed(client: Client, req: Request, name: str, args: list[Any]) -> None:
    """A list every shard answers (queuebox.schedules): the shards' lists one after another."""
    answers = await _every_answer(client, req, name, args)
    if answers is None:
        return
    found: list[Any] = []
    for data in answers:
        data = data or [[]]
        found.extend(data[0] if isinstance(data[0], list) else [data[0]])
    client.send(_data(req, [found]))


def _sum(values: list[Any]) -> Any:
    """Numbers added, maps merged key by key (statistics' shape)."""
    if all(isinstance(v, Mapping) for v in values):
        keys = dict.fromkeys(k for v in values for k in v)
        return {k: _sum([v[k] for v in values if k in v]) for k in keys}
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return sum(numbers) if len(numbers) == len(values) else values[0]


async def kick(client: Client, req: Request, name: str, args: list[Any]) -> None:
    """kick(n): up to n buried tasks, shard after shard."""
    left = args[0] if args and isinstance(args[0], int) else None
    if left is None:
        return to_first(client, req)
    kicked = 0
    for shard in client.map.serving():
        if left - kicked <= 0 or shard.leader is None:
            continue
        try:
            reply = decode_response(await client.upstream(shard).call(name, [left - kicked]))
        except ShardLost:
            continue
        if reply.error_code:
            client.send(failed(req.sync, reply.error_code, reply.error_message))
            return
        kicked += int((reply.data or [0])[0])
    client.send(_data(req, [kicked]))


async def tasks_page(client: Client, req: Request, args: list[Any]) -> None:
    """queuebox.tasks: a page of one shard at a time; `next` names the shard
    (["shard", k, the shard's own cursor]) until the last page of the last one."""
    tube, opts = ([*args, None, None])[:2]
    opts = dict(opts) if isinstance(opts, dict) else {}
    if isinstance(opts.get("id"), int):
        return by_id(client, req, opts["id"])
    after = opts.get("after")
    shards = [s for s in client.map.serving() if s.leader]
    start = 0
    if isinstance(after, list) and len(after) == 3 and after[0] == "shard":
        start = next((i for i, s in enumerate(shards) if s.number == after[1]), len(shards))
        opts["after"] = after[2]
        if opts["after"] is None:
            del opts["after"]
    for i in range(start, len(shards)):
        try:
            reply = decode_response(
                await client.upstream(shards[i]).call(req.function_name or "", [tube, opts])
            )
        except ShardLost as e:
            client.send(no_primary(req.sync, e.shard, e.why))
            return
        if reply.error_code:
            client.send(failed(req.sync, reply.error_code, reply.error_message))
            return
        page = dict(reply.data[0])
        inner = page.get("next")
        if inner is not None:
            page["next"] = ["shard", shards[i].number, inner]
        elif i + 1 < len(shards):
            page["next"] = ["shard", shards[i + 1].number, None]
        if page.get("tasks") or page.get("next") is None:
            client.send(_data(req, [page]))
            return
        opts.pop("after", None)
    client.send(_data(req, [{"tasks": []}]))
