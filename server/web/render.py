"""A task as the console shows it: its data readable, its times in seconds.

Owns: turning a task's data (the client's msgpack bytes, or a value) into
text: JSON when it is JSON-like (bin inside as {"$bin": hex}, an ext type
as {"$ext": code, "hex": ...}, a str that is not UTF-8 as {"$str": hex}),
hex when it is binary or not decodable; and
a task tuple, given its driver's field names, into a JSON object (times as
epoch seconds, durations as seconds). Must not touch the queue or HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgpack

from queuebox.drivers.args import MAX_TIMEOUT_S
from queuebox.storage.packed import Packed

TEXT_LIMIT = 4096  # characters of data shown; the size says how much there is
US = 1_000_000
STATE_NAMES = {"r": "ready", "t": "taken", "!": "buried", "~": "delayed", "-": "done"}
STATE_CODES = {name: code for code, name in STATE_NAMES.items()}
# What next_event means in each state (drivers/ttl.py).
NEXT_EVENT = {"~": "delay ends", "t": "ttr ends", "r": "ttl ends", "!": "ttl ends"}
# ttl and ttr "forever" are stored as 100 years (or more): shown as None.
FOREVER_US = MAX_TIMEOUT_S * US


def data_view(value: Any) -> dict[str, Any]:
    """{"kind": "json" | "binary" | "msgpack", "text": ..., "size": bytes of msgpack}."""
    size = len(value) if isinstance(value, Packed) else _packed_size(value)
    if isinstance(value, Packed):
        try:
            value = msgpack.unpackb(value, raw=False, strict_map_key=False)
        except (ValueError, msgpack.UnpackException):
            return _view("msgpack", value.hex(), size)  # e.g. a str that is not UTF-8
    if isinstance(value, bytes):
        return _view("binary", value.hex(), size)
    return _view("json", json.dumps(_jsonable(value), ensure_ascii=False), size)


def _packed_size(value: Any) -> int | None:
    """Bytes of the value as msgpack (a decoded task's data: what it stores, about)."""
    try:
        return len(msgpack.packb(value, use_bin_type=True, unicode_errors="surrogateescape"))
    except (TypeError, ValueError, OverflowError):
        return None


def _view(kind: str, text: str, size: int | None) -> dict[str, Any]:
    view: dict[str, Any] = {"kind": kind, "text": text[:TEXT_LIMIT], "size": size}
    if len(text) > TEXT_LIMIT:
        view["truncated"] = True
    return view


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {_key(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, msgpack.ExtType):  # a named tuple: before tuples
        return {"$ext": value.code, "hex": value.data.hex()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return {"$bin": value.hex()}
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # not UTF-8 on the wire (kept with surrogateescape)
            return {"$str": value.encode("utf-8", "surrogateescape").hex()}
        return value
    if value is None or isinstance(value, bool | int | float):
        return value
    return str(value)  # msgpack.Timestamp and the like


def _key(key: Any) -> Any:
    return key if isinstance(key, str | int | float | bool) or key is None else str(key)


def task_view(fields: Sequence[str], task: Sequence[Any]) -> dict[str, Any]:
    """A task tuple of a driver whose FORMAT is `fields`, as the console shows it."""
    row = dict(zip(fields, task, strict=False))
    status = row.get("status", "")
    view: dict[str, Any] = {
        "id": row.get("task_id"),
        "state": STATE_NAMES.get(status, status),
        "data": data_view(row.get("data")),
    }
    if "created" in row:
        view["created"] = row["created"] / US
    if "next_event" in row and status in NEXT_EVENT:
        view["next_event"] = {"at": _time(row["next_event"]), "means": NEXT_EVENT[status]}
    for name in ("ttl", "ttr"):
        if name in row:
            view[name] = None if row[name] >= FOREVER_US else row[name] / US
    for name in ("pri", "utube"):
        if name in row:
            view[name] = row[name]
    return view


def _time(us: int) -> float | None:
    return None if us >= FOREVER_US else us / US  # past year 2070: "never"
