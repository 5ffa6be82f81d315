"""The row shapes the pipeline produces, and turning task data into JSON text.

Owns: `RECORD_COLUMNS` / `RECORD_DDL` (one row per WAL or snapshot record, the schema
of `spark.read.format("queuebox")`) and `to_json`, the one place that decides how a
msgpack value becomes JSON. Must not touch Spark at import time, files or sockets.

JSON mapping of task data (msgpack -> JSON):
    nil/bool/int/float/str/array/map -> the same JSON value (map keys become strings)
    bin (bytes)  -> the text when it is valid UTF-8, else {"$base64": "..."}
    ext          -> {"$ext": code, "$base64": "..."}
    timestamp    -> ISO-8601 text (msgpack's ext -1)
    NaN/inf      -> null (JSON has no spelling for them)
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

# (name, Spark SQL type, meaning)
RECORD_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("kind", "string", "wal or snap: the kind of file the record came from"),
    ("file", "string", "file name inside the data directory"),
    ("offset", "bigint", "byte offset of the record in its file"),
    ("lsn", "bigint", "log sequence number (for snapshot rows: the snapshot's LSN)"),
    ("time", "timestamp", "wall-clock time the record was written"),
    ("op", "string", "insert, replace, delete, create_space, drop_space (snap rows: insert)"),
    ("space_id", "int", "space id"),
    ("space", "string", "space name"),
    ("tube", "string", "tube name when the space holds a tube's tasks, else null"),
    ("task_id", "bigint", "task id (field 0) for task spaces"),
    ("status", "string", "task status after the change; '-' for a delete"),
    ("old_status", "string", "task status before the change when the record carries it"),
    ("data", "string", "task data as JSON (see to_json); for other spaces the tuple"),
    ("call", "string", "the queue call that caused the change, when recorded"),
    ("tuple", "string", "the whole new tuple as JSON (a delete: null, or the old one before v4)"),
)

RECORD_DDL = ", ".join(f"`{name}` {kind}" for name, kind, _ in RECORD_COLUMNS)
RECORD_NAMES = tuple(name for name, _, _ in RECORD_COLUMNS)


def _special(value: Any) -> Any:
    """The JSON stand-in of what the fast encoder cannot write itself (bytes, ext)."""
    if isinstance(value, bytes | bytearray | memoryview) or hasattr(value, "code"):
        return _jsonable(value)
    if hasattr(value, "to_datetime"):  # msgpack Timestamp (ext -1)
        return value.to_datetime().isoformat()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


# The C encoder handles the common case; bytes and ext values go through `default`.
_FAST = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_special
)


def to_json(value: Any) -> str:
    """The JSON text of a msgpack-decoded value, following the module's mapping."""
    try:
        return _FAST.encode(value)
    except (TypeError, ValueError):  # NaN/inf, odd map keys, a tuple-shaped ExtType
        return json.dumps(_jsonable(value), ensure_ascii=False, separators=(",", ":"))


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return {"$base64": base64.b64encode(raw).decode("ascii")}
    code = getattr(value, "code", None)
    payload = getattr(value, "data", None)
    if isinstance(code, int) and isinstance(payload, bytes):  # msgpack ExtType
        return {"$ext": code, "$base64": base64.b64encode(payload).decode("ascii")}
    if isinstance(value, dict):
        return {_key(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "to_datetime"):  # msgpack Timestamp (ext -1)
        return value.to_datetime().isoformat()
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bytes):
        return key.decode("utf-8", errors="replace")
    return json.dumps(_jsonable(key))
