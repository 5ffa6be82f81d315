"""Leadership through etcd: one key, held under a lease, fenced by a local deadline.

Owns: the etcd client (aetcd, over gRPC; over TLS for https:// endpoints:
etcd_tls.py), the leadership key and its lease,
the keepalive task, the watch on the held key, and the fencing deadline that
`holds()` compares with the clock. Must not touch: the queue, storage,
replication or config; what losing leadership means is the caller's
`on_lost` callback (and its own `holds()` check before every write).

A tenure (one won `try_acquire`) moves like this:

    try_acquire: grant lease, create the key iff absent ──won──▶ HOLDING
                                                                │  │
            refresh ok (every ttl/3): deadline moves on ◀───────┘  │
                                                                   │
    refresh failed, lease gone (TTL <= 0), deadline passed,        │
    the key changed or was deleted, the watch broke ───────────────▼
                                                        LOST: on_lost() once, keepalive
                                                        stopped, lease revoked (best effort)
    resign() / close(): ENDED, no on_lost

Fencing: the deadline is the clock read just BEFORE the last successful
grant/refresh was sent, plus the TTL, minus a safety margin. etcd starts the
lease's TTL when it receives that request, so our deadline always falls
before etcd's expiry and before anyone else can win the key. `holds()` reads
the clock when called, so a process resumed after a SIGSTOP past its deadline
answers False before any timer or task of ours has run.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aetcd

from ..runtime.logs import get_logger
from .etcd_tls import EtcdTls, TlsClient

log = get_logger("queuebox.leader")

DEFAULT_PORT = 2379
# What aetcd lets escape: its own errors, and gRPC's where it does not wrap them
# (TimeoutError is an OSError).
ETCD_ERRORS = (aetcd.ClientError, aetcd.rpc.RpcError, OSError)


class LeaderError(Exception):
    """An etcd failure, as one line of text (no traceback belongs in the log)."""


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


@contextmanager
def etcd_errors(doing: str) -> Iterator[None]:
    try:
        yield
    except ETCD_ERRORS as e:
        raise LeaderError(f"etcd {doing}: {one_line(e)}") from None


def parse_endpoints(text: str) -> list[tuple[str, int]]:
    """ "http://host:port[,...]" or "https://..." -> [(host, port)]; all of one scheme."""
    endpoints = []
    schemes = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        url = urlsplit(item if "://" in item else f"http://{item}")
        try:
            port = url.port or DEFAULT_PORT
        except ValueError:
            port = 0
        if url.scheme not in ("http", "https") or not url.hostname or not port:
            raise LeaderError(f"etcd endpoint {item!r}: expected http(s)://host:port")
        schemes.add(url.scheme)
        endpoints.append((url.hostname, port))
    if not endpoints:
        raise LeaderError("etcd endpoints: none given")
    if len(schemes) > 1:
        raise LeaderError("etcd endpoints: all http:// or all https://, not both")
    return endpoints


def uses_tls(text: str) -> bool:
    return "https://" in text


def new_client(host: str, port: int, tls: EtcdTls | None, timeout_s: float) -> Any:
    """An aetcd client (not yet connected); over TLS with `tls`. OSError: a TLS
    file cannot be read."""
    if tls is None:
        return aetcd.Client(host, port, timeout=timeout_s)
    return TlsClient(host, port, tls, timeout=timeout_s)


@dataclass(eq=False)
class Tenure:
    """One won acquisition: its lease, its deadline, and what keeps it alive."""

    lease_id: int
    deadline: float
    revision: int = 0  # the etcd revision that created our key: it is ours while that holds
    over: bool = False
    timer: asyncio.TimerHandle | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def stop(self) -> None:
        """Ends the tenure: no more refreshes, watch events or deadline timer."""
        self.over = True
        if self.timer is not None:
            self.timer.cancel()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()


class Leadership:
    """One candidate for `key`: its value (the address it advertises) is the leader's."""

    def __init__(
        self,
        endpoints: str,
        key: str,
        value: bytes,
        ttl_s: float,
        *,
        on_lost: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
        tls: EtcdTls | None = None,
    ) -> None:
        self._endpoints = parse_endpoints(endpoints)
        # https:// endpoints: TLS, with the system's CAs unless `tls` names one.
        self._tls = (tls or EtcdTls()) if uses_tls(endpoints) else None
        self._key = key.encode()
        self._value = value
        self._ttl = ttl_s
        self._grant_ttl = max(1, math.ceil(ttl_s))  # etcd counts whole seconds
        self._margin = min(1.0, ttl_s / 4)
        self._refresh_every = ttl_s / 3
        # One RPC may not outlive a refresh period by much; the deadline timer
        # covers a hung call anyway.
        self._rpc_timeout = max(ttl_s / 3, 0.5)
        self._on_lost = on_lost
        self._clock = clock
        self._client: Any = None
        self._tenure: Tenure | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # ours, finished or not: close() awaits them

    async def start(self) -> None:
        """Connects to the first endpoint that answers a read of the key."""
        failures = []
        for host, port in self._endpoints:
            try:
                client = self._new_client(host, port)
            except OSError as e:
                raise LeaderError(f"etcd TLS files: {one_line(e)}") from None
            try:
                with etcd_errors(f"{host}:{port}"):
                    await client.get(self._key)
            except LeaderError as e:
                failures.append(str(e))
                await client.close()
                continue
            self._client = client
            return
        raise LeaderError(f"no etcd endpoint reachable: {'; '.join(failures)}")

    def _new_client(self, host: str, port: int) -> Any:
        return new_client(host, port, self._tls, self._rpc_timeout)

    async def leader(self) -> bytes | None:
        with etcd_errors("read"):
            got = await self._connected().get(self._key)
        return None if got is None else bytes(got.value)

    @property
    def client(self) -> Any:
        """The connected aetcd client (None before start() or after close())."""
        return self._client

    @property
    def transactions(self) -> Any:
        """aetcd's builders of compares and operations, for `try_acquire` and
        `while_holding` callers."""
        return self._connected().transactions

    async def try_acquire(self, compare: Sequence[Any] = (), also: Sequence[Any] = ()) -> bool:
        """Create the key iff it is absent and every one of `compare` holds; `also`
        (operations) happen in the same etcd transaction."""
        if self.holds():
            return True
        client = self._connected()
        sent = self._clock()
        with etcd_errors("lease grant"):
            lease = await client.lease(self._grant_ttl)
        try:
            with etcd_errors("create key"):
                txn = client.transactions
                won, replies = await client.transaction(
                    compare=[txn.create(self._key) == 0, *compare],
                    success=[txn.put(self._key, self._value, lease=lease.id), *also],
                    failure=[],
                )
            if not won:
                await self._revoke_quietly(lease.id)
                return False
            # Every change after our own put means the key is no longer ours.
            revision = replies[0].response_put.header.revision
            with etcd_errors("watch"):
                watch = await client.watch(self._key, start_revision=revision + 1)
        except LeaderError:
            await self._revoke_quietly(lease.id)
            raise
        tenure = Tenure(lease.id, sent + min(self._ttl, lease.ttl) - self._margin, revision)
        self._tenure = tenure
        tenure.tasks = [
            self._spawn(self._keep_alive(tenure)),
            self._spawn(self._watch(tenure, watch)),
        ]
        self._arm_timer(tenure)
        log.info("etcd leadership acquired", key=self._key.decode(), lease=lease.id)
        return True

    async def while_holding(self, operations: Sequence[Any], doing: str) -> None:
        """Run `operations` in one etcd transaction that succeeds only while the key
        is still the one our tenure created; LeaderError when it is not (or etcd
        fails): then nothing was done."""
        tenure = self._tenure
        if tenure is None or not self.holds():
            raise LeaderError(f"etcd {doing}: this instance does not hold the leader key")
        client = self._connected()
        with etcd_errors(doing):
            txn = client.transactions
            done, _ = await client.transaction(
                compare=[txn.create(self._key) == tenure.revision],
                success=list(operations),
                failure=[],
            )
        if not done:
            raise LeaderError(f"etcd {doing}: the leader key is no longer ours")

    async def wait_vacant(self) -> None:
        await self._wait_for(lambda value: value is None)

    async def wait_changed(self, seen: bytes | None) -> bytes | None:
        return await self._wait_for(lambda value: value != seen)

    def holds(self) -> bool:
        tenure = self._tenure
        return tenure is not None and not tenure.over and self._clock() < tenure.deadline

    async def resign(self) -> None:
        """Gives the key up at once: revoking the lease deletes the key attached to it,
        and only if it is still ours (a key another node created has its own lease)."""
        tenure, self._tenure = self._tenure, None
        if tenure is None:
            return
        was_holding = not tenure.over
        tenure.stop()
        if not was_holding:
            await self._revoke_quietly(tenure.lease_id)
            return
        with etcd_errors("lease revoke"):
            await self._connected().revoke_lease(tenure.lease_id)
        log.info("etcd leadership resigned", key=self._key.decode())

    async def close(self) -> None:
        """Stops everything without giving the key up: the lease lapses after its TTL."""
        if self._tenure is not None:
            self._tenure.stop()
            self._tenure = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    # --- keeping a tenure ----------------------------------------------------

    async def _keep_alive(self, tenure: Tenure) -> None:
        client = self._connected()
        while not tenure.over:
            await asyncio.sleep(self._refresh_every)
            sent = self._clock()
            try:
                with etcd_errors("lease refresh"):
                    reply = await client.refresh_lease(tenure.lease_id)
            except LeaderError as e:
                return self._lose(tenure, str(e))
            if reply is None or reply.TTL <= 0:
                return self._lose(tenure, "etcd lease expired")
            # A refresh that answers after the deadline cannot undo it: holds()
            # may already have said False to a writer.
            if self._clock() >= tenure.deadline:
                return self._lose(tenure, "lease deadline passed during a refresh")
            tenure.deadline = sent + min(self._ttl, reply.TTL) - self._margin
            self._arm_timer(tenure)

    async def _watch(self, tenure: Tenure, watch: Any) -> None:
        """Any event on the key is its loss. A watch that breaks is not: after an
        etcd outage gRPC drops the watch streams it had (including one made just
        after it came back), so the key is read and watched again; whether the
        lease lives is the keepalive's and the deadline's to say."""
        while not tenure.over:
            try:
                with etcd_errors("watch"):
                    async for event in watch:
                        return self._lose(tenure, f"leader key changed ({event.kind})")
                broken = "etcd watch ended"
            except LeaderError as e:
                broken = str(e)
            finally:
                await self._cancel_watch(watch)
            found = await self._watch_again(tenure, broken)
            if found is None:
                return
            watch = found

    async def _watch_again(self, tenure: Tenure, broken: str) -> Any:
        """A new watch from the revision at which the key was seen still ours; None
        once the tenure is over (the key is another's: lost)."""
        while not tenure.over:
            client = self._client
            if client is None:
                return None
            try:
                with etcd_errors("read"):
                    got = await client.get(self._key)
                if got is None or got.create_revision != tenure.revision:
                    self._lose(tenure, f"leader key changed while the watch was down ({broken})")
                    return None
                with etcd_errors("watch"):
                    return await client.watch(self._key, start_revision=got.header.revision + 1)
            except LeaderError:
                await asyncio.sleep(self._refresh_every)  # etcd away: the keepalive decides
        return None

    def _arm_timer(self, tenure: Tenure) -> None:
        if tenure.timer is not None:
            tenure.timer.cancel()
        delay = max(0.0, tenure.deadline - self._clock())
        tenure.timer = asyncio.get_running_loop().call_later(delay, self._on_deadline, tenure)

    def _on_deadline(self, tenure: Tenure) -> None:
        if self._clock() >= tenure.deadline:
            self._lose(tenure, "lease deadline passed without a refresh")
        else:
            self._arm_timer(tenure)

    def _lose(self, tenure: Tenure, reason: str) -> None:
        if tenure.over:
            return
        tenure.stop()
        log.warning("etcd leadership lost", key=self._key.decode(), reason=reason)
        # The key may still be ours in etcd (a stall, a broken watch): nobody
        # should wait out the TTL of a lease we no longer keep alive.
        self._spawn(self._revoke_quietly(tenure.lease_id))
        self._on_lost()

    # --- helpers -------------------------------------------------------------

    async def _wait_for(self, done: Callable[[bytes | None], bool]) -> bytes | None:
        client = self._connected()
        # Watch first, then read: a change between the two is both in the read
        # and in the events, so none is missed.
        with etcd_errors("watch"):
            watch = await client.watch(self._key)
        try:
            value = await self.leader()
            if done(value):
                return value
            with etcd_errors("watch"):
                async for event in watch:
                    value = None if event.kind == aetcd.EventKind.DELETE else bytes(event.kv.value)
                    if done(value):
                        return value
            raise LeaderError("etcd watch ended")
        finally:
            await self._cancel_watch(watch)

    async def _cancel_watch(self, watch: Any) -> None:
        # After close() the client has no watcher left to cancel it with.
        if self._client is not None:
            await watch.cancel()

    async def _revoke_quietly(self, lease_id: int) -> None:
        """A lease we do not need: if the revoke fails, it lapses after its TTL anyway."""
        try:
            with etcd_errors("lease revoke"):
                await self._connected().revoke_lease(lease_id)
        except LeaderError as e:
            log.info("etcd lease left to lapse", reason=str(e))

    def _spawn(self, work: Any) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _connected(self) -> Any:
        if self._client is None:
            raise LeaderError("etcd: not connected (start() first)")
        return self._client
