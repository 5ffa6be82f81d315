"""`queuebox wal cat PATH...`: WAL and snapshot records as JSON lines.

Owns: the text form of records for humans and scripts. Must not touch: the
files (read-only, through reader.py), the server.

One line per record: {"file", "offset", "lsn", "ts", "op", "sid", "space",
then "tuple" / "key" / "def"}. A snapshot's `rows` record becomes one line
per tuple with op "row" and the header's LSN; its `create_space` records get
the header's LSN too. Values that JSON lacks are tagged objects:
bytes -> {"$bin": "<base64>"}, msgpack ext -> {"$ext": code, "$bin": "<base64>"},
a map with a non-string key -> {"$map": [[key, value], ...]}.

A directory argument means every data file in it, snapshots then segments,
in LSN order. Damage is reported on stderr, and reading goes on after it.
Exit status: 0 if everything decoded, 1 otherwise.
"""

from __future__ import annotations

import base64
import json
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import msgpack

from queuebox.protocol.rawmsgpack import unpackb
from queuebox.protocol.walformat import PACKED_EXT, FileHeader, HeaderError

from .fileio import FileIO
from .framing import Damage
from .layout import sort_listing
from .packed import Packed
from .reader import LogFile, Record


def _bin(v: bytes) -> dict[str, Any]:
    return {"$bin": base64.b64encode(v).decode("ascii")}


def _ext(v: msgpack.ExtType) -> dict[str, Any]:
    return {"$ext": v.code, **_bin(v.data)}


def _packed(v: Packed) -> Any:
    """A task's data as the value its bytes hold; {"$ext": 80, ...} if no
    JSON-ready value can (a map with an array key)."""
    try:
        value = unpackb(v, unicode_errors="strict")
    except (ValueError, TypeError, msgpack.UnpackException):
        return _ext(msgpack.ExtType(PACKED_EXT, bytes(v)))
    return to_json(value)


def _seq(v: tuple[Any, ...] | list[Any]) -> list[Any]:
    return [to_json(x) for x in v]


def _map(v: dict[Any, Any]) -> dict[str, Any]:
    if all(isinstance(k, str) for k in v):
        return {k: to_json(x) for k, x in v.items()}
    return {"$map": [[to_json(k), to_json(x)] for k, x in v.items()]}


def _float(v: float) -> Any:
    return v if math.isfinite(v) else str(v)  # keep the output strict JSON


_CONVERT: dict[type, Callable[[Any], Any]] = {
    bytes: _bin,
    msgpack.ExtType: _ext,
    Packed: _packed,
    tuple: _seq,
    list: _seq,
    dict: _map,
    float: _float,
}


def to_json(v: Any) -> Any:
    """A msgpack-decoded value as a JSON-ready one (see the module docstring)."""
    convert = _CONVERT.get(type(v))
    return v if convert is None else convert(v)


def _lines(path: Path, header: FileHeader, rec: Record) -> Iterator[dict[str, Any]]:
    body = rec.body
    head = {"file": path.name, "offset": rec.offset, "lsn": body.get("lsn", header.lsn)}
    if body["op"] == "rows":
        for t in body["tuples"]:
            yield {**head, "op": "row", "sid": body["sid"], "space": body["space"], "tuple": t}
        return
    yield {**head, **body}


def _paths(args: list[str], files: FileIO) -> list[Path]:
    out: list[Path] = []
    for arg in args:
        p = Path(arg)
        if files.is_dir(p):
            listing = sort_listing(p, files.listdir(p))
            out += [path for _, path in listing.snap] + [path for _, path in listing.wal]
        else:
            out.append(p)
    return out


def cat_file(path: Path, out: TextIO, err: TextIO, files: FileIO) -> bool:
    """Print one file; False if any part of it could not be decoded."""
    try:
        log = LogFile(path, files)
    except (OSError, HeaderError) as e:
        print(f"{path}: {e}", file=err)
        return False
    clean = True
    for ev in log.events():
        if isinstance(ev, Damage):
            clean = False
            where = "to the end" if ev.resume is None else f"until offset {ev.resume}"
            print(f"{path}: damaged at offset {ev.offset} {where}: {ev.reason}", file=err)
            continue
        for line in _lines(path, log.header, ev):
            out.write(json.dumps(to_json(line), ensure_ascii=False) + "\n")
    return clean


def main(
    paths: list[str],
    out: TextIO | None = None,
    err: TextIO | None = None,
    files: FileIO | None = None,
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    files = files or FileIO()
    if not paths:
        print("usage: queuebox wal cat PATH...", file=err)
        return 1
    clean = True
    try:
        for path in _paths(paths, files):
            clean = cat_file(path, out, err, files) and clean
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, like cat does.
        return 0
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
