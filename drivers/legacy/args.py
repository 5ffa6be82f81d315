"""Arguments of the legacy (1.5-era) queue API: numbers, numeric strings, names.

Owns: turning the raw CALL arguments of `queue.put(space, tube, ...)` and
friends into checked Python values, and the texts of the errors a bad
argument gets. Must not touch tasks, spaces or the clock.

Tarantool 1.5 clients sent every argument as a byte string and the module
ran each numeric one through Lua's `tonumber`, so a modern client may send
`5`, `5.0` or `"5"` for the same thing. Everything else -- words, booleans,
NaN, infinities -- gets `Invalid value of <arg>: <value>` (code 32), the
same shape as the modern core's `Invalid value of ttr: <v>`.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

from .base import QueueError, module_error

# What Lua's tonumber accepts from a string: decimal with optional fraction
# and exponent, or hex, surrounded by blanks. Python's own float() would also
# take "1_000", "inf" and "nan", which an old client never meant as numbers.
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_HEX = re.compile(r"[+-]?0[xX][0-9a-fA-F]+")

US_PER_SECOND = 1_000_000
# 100 years, the modern core's "infinity": larger times are cut to it so that
# now + ttl always fits the uint64 fields of a stored tuple.
MAX_SECONDS = 3_153_600_000
MAX_US = MAX_SECONDS * US_PER_SECOND
# Tarantool space ids are u32; a legacy space number names one storage space.
MAX_SPACE_NO = 2**32 - 1
# No client writes a number this long; longer texts are refused before any
# arithmetic, so "1e999999999" or a megabyte of digits costs nothing.
MAX_NUMBER_TEXT = 64
MAX_SHOWN = 80


def show(value: Any) -> str:
    """A value as an error text shows it: strings quoted, None as Lua's nil."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = repr(value) if isinstance(value, str) else str(value)
    # An error echoes what was sent, but never a megabyte of it.
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."


def invalid(name: str, value: Any) -> QueueError:
    return module_error(f"Invalid value of {name}: {show(value)}")


def number(name: str, value: Any) -> Decimal:
    """A number or a numeric string as an exact Decimal (no float rounding)."""
    if isinstance(value, bool) or value is None:
        raise invalid(name, value)
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise invalid(name, value)
        # str() is the shortest text that reads back as this float, so 4.35
        # becomes 4350000 µs rather than 4349999.
        return Decimal(str(value))
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    if not isinstance(text, str):
        raise invalid(name, value)
    text = text.strip()
    if len(text) > MAX_NUMBER_TEXT:
        raise invalid(name, value)
    if _DECIMAL.fullmatch(text):
        return Decimal(text)
    if _HEX.fullmatch(text):
        return Decimal(int(text, 16))
    raise invalid(name, value)


def seconds_us(name: str, value: Any) -> int:
    """Seconds (number or numeric string) -> µs, truncated, within ±MAX_US."""
    seconds = clamp(number(name, value), MAX_SECONDS)
    return int(seconds * US_PER_SECOND)


def clamp(n: Decimal, limit: int) -> Decimal:
    """n within ±limit, compared before any arithmetic (1e999999 must not overflow)."""
    return max(Decimal(-limit), min(Decimal(limit), n))


def optional_seconds_us(name: str, value: Any, default: int) -> int:
    return default if value is None else seconds_us(name, value)


def space_no(value: Any) -> int:
    """The space argument: a whole number 0..2^32-1."""
    n = number("space", value)
    if n != n.to_integral_value() or not 0 <= n <= MAX_SPACE_NO:
        raise invalid("space", value)
    return int(n)


def tube_name(value: Any) -> str:
    """Tube names are strings (1.5 had nothing else); bin from old drivers is decoded."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise invalid("tube", value) from None
    if not isinstance(value, str):
        raise invalid("tube", value)
    return value


def task_id(value: Any) -> str | None:
    """A task id as stored (32 hex chars); None when it cannot name any task."""
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def arg(args: list[Any], i: int) -> Any:
    """Argument i, or None when the client sent fewer (Lua sees both as nil)."""
    return args[i] if i < len(args) else None
