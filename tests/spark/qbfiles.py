"""Test helper: write WAL segments and snapshots byte by byte from storage/FORMAT.md.

Independent of storage/ on purpose, so reader tests can build exact files (and damage
them) without a server. Real server data directories are tested in test_e2e_*.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import msgpack

MAGIC = {"wal": b"QBOXWAL\n", "snap": b"QBOXSNP\n"}


def header(kind: str, lsn: int, version: int = 1) -> bytes:
    head = struct.pack(">8sHHQ", MAGIC[kind], version, 0, lsn)
    return head + struct.pack(">I", zlib.crc32(head))


def frame(body: dict[str, Any]) -> bytes:
    return frame_bytes(msgpack.packb(body, use_bin_type=True))


def frame_bytes(raw: bytes) -> bytes:
    """A record frame around a body already encoded."""
    length = struct.pack(">I", len(raw))
    return b"\xc1QBR" + struct.pack(">I", zlib.crc32(length + raw)) + length + raw


def name(lsn: int, kind: str) -> str:
    return f"{lsn:020d}.{kind}"


def space_def(sid: int, space: str, fmt: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": sid,
        "name": space,
        "indexes": [{"name": "task_id", "parts": [0], "unique": True}],
        "temporary": False,
        "format": fmt or [],
        "opts": {},
    }


class WalBuilder:
    """Accumulates WAL records with consecutive LSNs; `write` makes one segment.

    version 4: a delete record holds the key alone (FORMAT.md §5.2); before,
    the deleted tuple too."""

    def __init__(
        self, first_lsn: int = 1, start_ts: float = 1_700_000_000.0, version: int = 1
    ) -> None:
        self.version = version
        self.first_lsn = first_lsn
        self.lsn = first_lsn
        self.ts = start_ts
        self.bodies: list[dict[str, Any]] = []

    def add(self, op: str, sid: int, space: str, dt: float = 0.0, **fields: Any) -> int:
        self.ts += dt
        body = {"lsn": self.lsn, "ts": self.ts, "op": op, "sid": sid, "space": space, **fields}
        self.bodies.append(body)
        self.lsn += 1
        return body["lsn"]

    def create(self, sid: int, space: str, dt: float = 0.0) -> int:
        return self.add("create_space", sid, space, dt, **{"def": space_def(sid, space)})

    def insert(self, sid: int, space: str, tup: list[Any], dt: float = 0.0, **extra: Any) -> int:
        return self.add("insert", sid, space, dt, tuple=tup, **extra)

    def replace(self, sid: int, space: str, tup: list[Any], dt: float = 0.0, **extra: Any) -> int:
        return self.add("replace", sid, space, dt, tuple=tup, **extra)

    def delete(self, sid: int, space: str, tup: list[Any], dt: float = 0.0, **extra: Any) -> int:
        if self.version >= 4:
            return self.add("delete", sid, space, dt, key=[tup[0]], **extra)
        return self.add("delete", sid, space, dt, tuple=tup, key=[tup[0]], **extra)

    def write(self, directory: Path) -> Path:
        path = directory / name(self.first_lsn, "wal")
        head = header("wal", self.first_lsn, self.version)
        path.write_bytes(head + b"".join(frame(b) for b in self.bodies))
        return path


def write_snapshot(
    directory: Path,
    lsn: int,
    spaces: dict[tuple[int, str], list[list[Any]]],
    end: bool = True,
    part_size: int | None = None,
    version: int = 1,
) -> Path:
    """A snapshot of `spaces` ((sid, name) -> tuples) covering `lsn`; with
    `part_size` (version 3), a tuple whose msgpack is longer is written as `part`
    records of that many bytes (FORMAT.md §5.3.1)."""
    frames = [
        frame({"op": "create_space", "sid": sid, "space": sp, "def": space_def(sid, sp)})
        for sid, sp in spaces
    ]
    count = 0
    for (sid, sp), tuples in spaces.items():
        small = []
        for tup in tuples:
            raw = msgpack.packb(tup, use_bin_type=True)
            if part_size is None or len(raw) <= part_size:
                small.append(tup)
                continue
            for at in range(0, len(raw), part_size):
                piece = raw[at : at + part_size]
                part = {"sid": sid, "space": sp, "size": len(raw), "at": at, "bytes": piece}
                frames.append(frame({"op": "part", **part}))
            count += 1
        for start in range(0, len(small), 3):  # several `rows` records per space
            chunk = small[start : start + 3]
            frames.append(frame({"op": "rows", "sid": sid, "space": sp, "tuples": chunk}))
            count += len(chunk)
    if end:
        frames.append(frame({"op": "end", "spaces": len(spaces), "count": count}))
    path = directory / name(lsn, "snap")
    path.write_bytes(header("snap", lsn, version) + b"".join(frames))
    return path
