"""`queuebox backup`'s work: a running server's newest snapshot and the WAL after
it, fetched over the replication stream and written into a backup set.

Owns: acting as a replica that writes files. It logs in (a user with the
`replication` right), calls `queuebox.backup.join` (the snapshot file, in
chunks: replication/feed.py) and `queuebox.backup.subscribe` after its LSN
(the WAL frames as the feed sends them, from disk, then live), and stops at
the feed's first beat: the point where it caught up with what the server had
written, the backup's LSN. Writes go on meanwhile; nothing on the server
waits for the backup. The files are then read whole by storage's readers
(storage/backupset.py) and a manifest is written last, so a set without
`backup.json` is one that did not finish.

    join ─▶ NNN.snap ─▶ subscribe(NNN) ─▶ "wal" frames ─▶ MMM.wal ─┐
                                          "beat": caught up ◀──────┘ ─▶ verify ─▶ backup.json

Must not touch: the server's own parts (this runs in the `queuebox backup`
process, not in a server), the file format (storage's).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass
from pathlib import Path

from queuebox.protocol import ErrorCode, Response
from queuebox.protocol.walformat import encode_header
from queuebox.storage.backupset import SetFacts, read_set, write_manifest
from queuebox.storage.fileio import FileIO
from queuebox.storage.layout import file_name

from ..replication.link import Link

SEGMENT_SIZE = 64 << 20  # as a server's WAL segments, by default


class BackupError(Exception):
    """The server refused, or what it sent does not make a backup."""


class Refused(BackupError):
    """The user may not take a backup (no `replication` right)."""


@dataclass
class Target:
    host: str
    port: int
    user: str
    password: str
    timeout_s: float = 30.0
    tls: ssl.SSLContext | None = None  # the client's (clients/cli/args.py), or plain TCP


class _Appender:
    """One file written from the start, in order; fsynced when closed."""

    def __init__(self, files: FileIO, path: Path, head: bytes = b"") -> None:
        self.files, self.path = files, path
        self.fd = files.create(path)
        self.size = 0
        if head:
            self.add(head)

    def add(self, data: bytes) -> None:
        self.files.write_all(self.fd, data, self.size)
        self.size += len(data)

    def close(self) -> None:
        try:
            self.files.fsync(self.fd)
        finally:
            self.files.close(self.fd)


def _answer(got: Response, what: str, address: str) -> list[object]:
    if not got.ok:
        denied = got.error_code == ErrorCode.ER_ACCESS_DENIED
        raise (Refused if denied else BackupError)(
            f"{address}: {what} refused: {got.error_message}"
        )
    return list(got.data)


async def _fetch_snapshot(link: Link, dest: Path, files: FileIO) -> int:
    """The newest snapshot file into `dest`; its LSN (0: the server has none, the
    WAL from LSN 1 holds everything)."""
    tmp = dest / "snapshot.tmp"
    out = _Appender(files, tmp)
    try:
        sync = link.call("queuebox.backup.join", link.next_sync)
        got = await link.streamed(sync, lambda data: out.add(data[2]))
    finally:
        out.close()
    lsn, total = _answer(got, "join", link.address)
    assert isinstance(lsn, int)
    if out.size != total:
        raise BackupError(f"{link.address}: snapshot cut short ({out.size} of {total} bytes)")
    if lsn:
        files.rename(tmp, dest / file_name("snap", lsn))
    else:
        files.unlink(tmp)
    return lsn


async def _fetch_wal(link: Link, dest: Path, after: int, files: FileIO) -> int:
    """The WAL after `after`, until the feed caught up (its first beat); the last
    LSN written. Each chunk holds whole frames, so segments begin between two
    chunks, once one passes SEGMENT_SIZE: each is read back whole later."""
    sync = link.call("queuebox.backup.subscribe", after, link.next_sync)
    last = after
    out: _Appender | None = None
    try:
        while True:
            got = await link.next()
            if got.sync != sync:
                continue
            if not got.is_chunk:
                _answer(got, "subscribe", link.address)
                raise BackupError(f"{link.address}: the feed ended before it caught up")
            kind, lsn, payload = got.data
            if kind == "beat":
                return last
            if out is not None and out.size >= SEGMENT_SIZE:
                out.close()
                out = None
            if out is None:
                path = dest / file_name("wal", last + 1)
                out = _Appender(files, path, encode_header("wal", last + 1))
            out.add(payload)
            last = lsn
    finally:
        if out is not None:
            out.close()


async def fetch(target: Target, dest: Path, files: FileIO | None = None) -> SetFacts:
    """Take a backup of the server at `target` into `dest` (new or empty)."""
    files = files or FileIO()
    if dest.exists() and files.listdir(dest):
        raise BackupError(f"{dest} is not empty: back up into a new directory")
    files.makedirs(dest)
    started = time.time()
    link = Link(target.host, target.port, target.timeout_s, target.tls)
    try:
        await link.open(target.user, target.password)
        base = await _fetch_snapshot(link, dest, files)
        last = await _fetch_wal(link, dest, base, files)
    except BaseException:
        for name in files.listdir(dest):  # it was empty: no half backup is left to trust
            files.unlink(dest / name)
        raise
    finally:
        link.close()
    files.fsync_dir(dest)
    # Read back whole, as a restore will read it: a fault is named before anyone relies on it.
    facts = await asyncio.get_running_loop().run_in_executor(None, read_set, dest, files)
    if facts.last_lsn != last:
        raise BackupError(f"the files reach LSN {facts.last_lsn}; the server sent up to {last}")
    extra = {"server": link.address, "started": started, "finished": time.time()}
    write_manifest(dest, facts, extra)
    files.fsync_dir(dest)
    return facts


def take_backup(target: Target, dest: Path) -> SetFacts:
    """fetch() in an event loop of its own (the command is not a server); LinkError
    when the server cannot be reached or refuses the login."""
    return asyncio.run(fetch(target, dest))
