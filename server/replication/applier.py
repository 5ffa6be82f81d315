"""The replica's side: bootstrap, subscribe, apply, acknowledge, reconnect.

Owns: `bootstrap` (an empty data directory gets the primary's newest
snapshot file before the engine opens it) and `Applier`, which follows the
first writable source: subscribes after the engine's last LSN, applies each
pushed run of WAL frames through `engine.apply_replicated` (the primary's
LSNs and frames, written by this instance's own group commit), and calls
`queuebox.replication.ack` with the LSN written once each run is on disk.

    connect ─▶ subscribe(last LSN) ─▶ apply frames / beats ─┐
       ▲            │ refused (read-only: not the primary)  │ silence, a
       └─ backoff ◀─┴───────────────────────────────────────┘ closed link
    refused otherwise (diverged, its LSN gone from the primary's WAL), or a
    record that does not follow or apply: it stops, says so, and tells
    `on_stopped` (the role re-bootstraps: build.py); a write that failed on
    a broken WAL (wal.py: none is kept until a restart): it stops, says so
    (`diverged`), and nothing re-bootstraps

Must not touch: the queue (a replica runs none; role.py builds it on
promotion), the WAL format beyond frames and bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from queuebox.protocol import ErrorCode, Response
from queuebox.protocol.walformat import FRAME_OVERHEAD
from queuebox.storage.engine import Engine
from queuebox.storage.errors import EngineError
from queuebox.storage.fileio import FileIO
from queuebox.storage.framing import Damage, FrameDecoder
from queuebox.storage.layout import file_name, sort_listing
from queuebox.storage.records import BadBody, BodyDecoder

from ..runtime.logs import get_logger
from ..runtime.loop import cancel_and_wait
from ..settings.config import Config
from .link import Link, LinkError, dial

log = get_logger("queuebox.replication")

Address = tuple[str, int]


class Diverged(Exception):
    """This replica cannot follow its primary any more."""


class Refused(Diverged):
    """The primary refused the subscription (for another reason than being read-only)."""


# on_stopped(host, port, why, applying): the applier stopped for good; `applying`
# when a record did not follow or apply here, else the primary refused it.
OnStopped = Callable[[str, int, str, bool], None]


async def bootstrap(
    config: Config, replica: str, sources: Callable[[], tuple[Address, ...]]
) -> None:
    """Fill an empty data directory from the first source that answers: its newest
    snapshot file, written whole and renamed into place. Retries until one does
    (`sources()` is asked again each round: a leader may change meanwhile)."""
    directory = Path(config.data_dir)
    listing = sort_listing(directory, FileIO().listdir(directory))
    if listing.snap or listing.wal:
        return
    delay = 0.1
    while True:
        for host, port in sources():
            try:
                await _fetch_snapshot(config, replica, directory, host, port)
                return
            except LinkError as e:
                log.warning("bootstrap from the primary failed", error=str(e))
        await asyncio.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, 2.0)


async def _fetch_snapshot(
    config: Config, replica: str, directory: Path, host: str, port: int
) -> None:
    link = dial(config, host, port, 4 * config.replication_timeout + 5)
    await link.open(config.replication_user, config.replication_password)
    files = FileIO()
    tmp = directory / f"join-{os.getpid()}.tmp"
    fd = files.create(tmp)
    try:
        sync = link.call("queuebox.replication.join", replica, link.next_sync)
        size = 0

        def write(data: list[Any]) -> None:
            nonlocal size
            files.write_all(fd, data[2], size)
            size += len(data[2])

        got = await link.streamed(sync, write)
        if not got.ok:
            raise LinkError(f"{link.address}: join refused: {got.error_message}")
        lsn, total = got.data
        if size != total:
            raise LinkError(f"{link.address}: snapshot cut short ({size} of {total} bytes)")
        files.fsync(fd)
        if lsn:
            files.rename(tmp, directory / file_name("snap", lsn))
            files.fsync_dir(directory)
            log.info("bootstrapped from the primary", primary=link.address, snapshot_lsn=lsn)
    finally:
        files.close(fd)
        link.close()
        if tmp.exists():
            files.unlink(tmp)


class Applier:
    def __init__(
        self,
        config: Config,
        engine: Engine,
        barrier: Callable[[], Awaitable[Any] | None],
        replica: str,
        sources: tuple[Address, ...],
        on_stopped: OnStopped | None = None,
    ) -> None:
        self.config = config
        self.on_stopped = on_stopped
        self.engine = engine
        self._barrier = barrier  # the app's durability barrier: our WAL write
        self.replica = replica
        self.sources = sources
        self.primary: str | None = None  # the address followed now
        self.primary_lsn = 0  # the newest LSN the primary said it has
        self.connected = False
        self.ever_connected = False  # has followed a primary at least once
        self.diverged: str | None = None
        self._acked = 0
        self._link: Link | None = None
        self._task: asyncio.Task[None] | None = None
        self._bodies = BodyDecoder("wal")

    def start(self) -> None:
        """Follow; again after stop() or giving up (what it knew of its primary kept)."""
        if self._task is None or self._task.done():
            self.diverged = None
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        if self._link is not None:
            self._link.close()
        self.connected = False

    def follow(self, sources: tuple[Address, ...]) -> None:
        """Follow other sources (a new leader): drop the link, reconnect there."""
        if sources == self.sources:
            return
        self.sources = sources
        if self._link is not None:
            self._link.close()

    @property
    def stopped(self) -> bool:
        """Following no more: stopped, or given up (on_stopped was told)."""
        return self._task is None or self._task.done()

    @property
    def caught_up(self) -> bool:
        return self.engine.last_lsn >= self.primary_lsn

    async def _run(self) -> None:
        delay = 0.05
        while self.diverged is None:
            for host, port in self.sources:
                try:
                    await self._follow(host, port)
                except LinkError as e:
                    if self.connected:
                        log.warning("replication link lost", primary=f"{host}:{port}", error=str(e))
                    delay = delay if self.connected else min(delay * 2, 1.0)
                except (Diverged, EngineError) as e:
                    self.diverged = str(e)
                    log.error("replica stopped following its primary", error=str(e))
                    if self.on_stopped is not None:
                        self.on_stopped(host, port, str(e), not isinstance(e, Refused))
                    return
                except Exception:  # a bug must not end replication silently
                    log.exception("replication failed; reconnecting", primary=f"{host}:{port}")
                finally:
                    self.connected = False
                    if self._link is not None:
                        self._link.close()
                        self._link = None
                if self.diverged is not None:
                    return  # the WAL broke (_ack): no other source either
            await asyncio.sleep(delay * random.uniform(0.5, 1.5))

    async def _follow(self, host: str, port: int) -> None:
        timeout = 4 * self.config.replication_timeout
        link = self._link = dial(self.config, host, port, timeout)
        await link.open(self.config.replication_user, self.config.replication_password)
        after = self.engine.last_lsn
        sync = link.call(
            "queuebox.replication.subscribe",
            self.replica,
            after,
            link.next_sync,
            self.engine.last_ts,
        )
        self.primary = link.address
        self._acked = 0  # a new primary knows nothing of what we wrote
        while True:
            got = await link.next()
            if got.sync != sync:
                continue  # the answer to an ack
            if not got.is_chunk:
                self._refused(got, link.address)
            if not self.connected:
                self.connected = self.ever_connected = True
                log.info("following the primary", primary=link.address, after_lsn=after)
            kind, lsn, payload = got.data
            self.primary_lsn = max(self.primary_lsn, lsn)
            if kind == "wal":
                self._apply(payload)
            # After a beat too: a caught-up replica tells a new primary what it has.
            self._ack_when_written(link)

    def _refused(self, got: Response, address: str) -> None:
        if got.error_code == ErrorCode.ER_READONLY:
            raise LinkError(f"{address} is read-only: not the primary")
        if got.ok:
            raise LinkError(f"{address}: the feed ended")
        raise Refused(f"{address}: {got.error_message}")

    def _apply(self, payload: bytes) -> None:
        decoder = FrameDecoder(0)
        decoder.feed(payload)
        decoder.feed_eof()
        frames = decoder.take()
        if any(isinstance(f, Damage) for f in frames):
            raise LinkError("a damaged frame arrived")
        bodies = self._bodies.decode_many([raw for _, raw in frames])  # type: ignore[misc]
        apply = self.engine.apply_replicated
        for (offset, raw), body in zip(frames, bodies, strict=True):  # type: ignore[misc]
            if isinstance(body, BadBody):
                raise Diverged(f"a record that does not decode: {body}")
            apply(payload[offset : offset + FRAME_OVERHEAD + len(raw)], body)

    def _ack_when_written(self, link: Link) -> None:
        written = self._barrier()
        if written is None:
            self._ack(link)
        else:
            asyncio.ensure_future(written).add_done_callback(lambda f: self._ack(link, f))

    def _ack(self, link: Link, written: asyncio.Future[Any] | None = None) -> None:
        if written is not None and (written.cancelled() or written.exception() is not None):
            broken = self.engine.broken
            if broken is not None and self.diverged is None:
                # No write is kept here until a restart: every feed would fail
                # the same way. Following ends (_run), with no re-bootstrap.
                self.diverged = f"the WAL is broken: {broken}"
                log.error("the WAL is broken: restart this instance; not following", why=broken)
            link.close()  # our write failed: the engine rolled back; resubscribe
            return
        lsn = self.engine.durable_lsn
        if lsn > self._acked and link is self._link:
            self._acked = lsn
            # A link already gone: the next subscribe starts from our WAL anyway.
            with contextlib.suppress(LinkError):
                link.call("queuebox.replication.ack", self.replica, lsn)
