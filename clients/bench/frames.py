"""Pre-encoded request frames whose few varying bytes are patched in place.

Owns: `Template` (a frame encoded once by `protocol`, with the offset of its
SYNC and optionally of one fixed-width slot: a task id, a send timestamp)
and the builders for the calls the benchmark makes. Encoding a request is
then a copy and one or two `pack_into`s, so the load generator spends its
CPU on sending, not on msgpack. Must not touch sockets or clocks.

How offsets are found: the frame is encoded with sentinel values that no
real argument produces (a SYNC and an id above 2**63, which msgpack writes
as 0xcf + 8 bytes; a 16-character hex marker inside a payload string) and
the sentinel's bytes are located in the result. Patching keeps the length,
so the frame's length prefix stays valid.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from queuebox import protocol

SYNC_SENTINEL = 0xF1E2D3C4B5A69788
ID_SENTINEL = 0xE8D7C6B5A4938271
LEGACY_ID_SENTINEL = "f0e1d2c3b4a5968778695a4b3c2d1e0f"  # 32 hex chars, like a legacy id
STAMP_SENTINEL = "fedcba9876543210"  # 16 hex chars: a nanosecond clock in hex
STAMP_WIDTH = len(STAMP_SENTINEL)

_U64 = struct.Struct(">Q")


def _find_once(frame: bytes, needle: bytes, what: str) -> int:
    at = frame.find(needle)
    if at < 0 or frame.find(needle, at + 1) >= 0:
        raise ValueError(f"cannot locate the {what} in the encoded frame")
    return at


@dataclass(frozen=True, slots=True)
class Template:
    """One request, encoded. `slot_at` is -1 when nothing but the SYNC varies."""

    frame: bytes
    sync_at: int
    slot_at: int = -1
    slot_len: int = 0


def call_template(name: str, args: list[Any], slot: Any = None) -> Template:
    """A CALL of `name` with `args`; `slot`, if given, is one of the sentinels and
    appears somewhere in `args`: its bytes become the patchable slot."""
    frame = protocol.encode_call(SYNC_SENTINEL, name, args)
    sync_at = _find_once(frame, b"\xcf" + _U64.pack(SYNC_SENTINEL), "sync") + 1
    if slot is None:
        return Template(frame, sync_at)
    if isinstance(slot, int):
        needle = _U64.pack(slot)
        slot_at = _find_once(frame, b"\xcf" + needle, "id slot") + 1
    else:
        needle = str(slot).encode()
        slot_at = _find_once(frame, needle, "string slot")
    return Template(frame, sync_at, slot_at, len(needle))


def payload(size: int, stamped: bool) -> str:
    """An ASCII payload of `size` characters; a stamped one starts with the marker
    that `stamp_bytes` values replace."""
    if stamped:
        return STAMP_SENTINEL + "x" * max(0, size - STAMP_WIDTH)
    return "x" * size


def stamp_bytes(nanoseconds: int) -> bytes:
    """A clock value as it is written into a stamped payload."""
    return b"%016x" % (nanoseconds & 0xFFFFFFFFFFFFFFFF)


def read_stamp(data: Any) -> int | None:
    """The clock value at the start of a stamped payload, or None if there is none."""
    if isinstance(data, bytes):
        data = data.decode("ascii", "replace")
    if not isinstance(data, str) or len(data) < STAMP_WIDTH:
        return None
    try:
        return int(data[:STAMP_WIDTH], 16)
    except ValueError:
        return None


def id_bytes(task_id: Any) -> bytes | None:
    """A task id as slot bytes: an unsigned int for the modern API, the 32-char
    string for the legacy one; None if it fits neither (then encode normally)."""
    if isinstance(task_id, int) and 0 <= task_id < 1 << 64:
        return _U64.pack(task_id)
    if isinstance(task_id, str) and len(task_id) == len(LEGACY_ID_SENTINEL):
        return task_id.encode()
    if isinstance(task_id, bytes) and len(task_id) == len(LEGACY_ID_SENTINEL):
        return task_id
    return None
