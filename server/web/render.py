"""A task as the console shows it: its data readable.

Owns: turning a task's data (the client's msgpack bytes, or a value) into
text: JSON when it is JSON-like (bin inside as {"$bin": hex}, an ext type
as {"$ext": code, "hex": ...}, a str that is not UTF-8 as {"$str": hex}),
hex when it is binary or not decodable. Must not touch the queue or HTTP.
"""

from __future__ import annotations

import json
from typing import Any

import msgpack

from queuebox.storage.packed import Packed

TEXT_LIMIT = 4096  # characters of data shown; the size says how much there is


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


def task_view(task: dict[str, Any]) -> dict[str, Any]:
    """A task of `queuebox.tasks` (its id, state, times in seconds, attempts...)
    with its data made readable."""
    return {**task, "data": data_view(task.get("data"))}
