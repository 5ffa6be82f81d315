"""Argument conversions: how a msgpack value from a call becomes a queue value.

Owns: the Lua-flavoured reading of call arguments — truthiness, `tostring`,
type names in error texts, seconds to integer microseconds (truncated, like
upstream's uint64 arithmetic), task ids, priorities and option maps. Every
conversion raises the exact error a Lua caller would have seen.
Must not touch: tasks, tubes, the clock (callers pass `now`).
"""

from __future__ import annotations

import math
from typing import Any, Final

from .errors import QueueError, field_type, key_part_type, module_error

U64_MAX = (1 << 64) - 1
I64_MIN = -(1 << 63)
_SMALL: Final = (1 << 62) - 1  # ints within ±this are a tagged int compiled: no big-int compare
# 100 years in seconds: upstream's MAX_TIMEOUT, the "infinity" of ttl/ttr/timeouts.
MAX_TIMEOUT_S = 365 * 86400 * 100
US = 1_000_000


def is_number(value: object) -> bool:
    """A number a call can use: one msgpack can carry as an integer too (int64 or
    uint64 range). NaN, ±inf and floats beyond that range are not: upstream turns
    them into garbage times and counts, so they get the bad-number errors."""
    if type(value) is int:  # most: a small int, compared natively (compiled)
        n: int = value
        if -_SMALL <= n <= _SMALL:
            return True
        return I64_MIN <= n <= U64_MAX
    if isinstance(value, float):
        return math.isfinite(value) and I64_MIN <= value <= U64_MAX
    return isinstance(value, int) and not isinstance(value, bool) and I64_MIN <= value <= U64_MAX


def lua_truthy(value: object) -> bool:
    """Lua truth: only nil and false are false (0 and "" are true)."""
    return value is not None and value is not False


def lua_or(value: Any, default: Any) -> Any:
    """Lua's `value or default`."""
    return value if lua_truthy(value) else default


def lua_type(value: object) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str | bytes):
        return "string"
    if isinstance(value, list | tuple | dict):
        return "table"
    return "userdata"


def lua_tostring(value: object) -> str:
    """Lua's tostring() of a decoded msgpack value (LuaJIT prints numbers with %.14g)."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) < (1 << 53):
            return format(float(value), ".14g")
        return f"{value}ULL" if value >= 0 else f"{value}LL"
    if isinstance(value, float):
        return format(value, ".14g")
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return f"table: 0x{id(value):012x}"


def compare_error(value: object, number_first: bool = False) -> QueueError:
    """'attempt to compare X with number' (or 'number with X' for `value > n` in Lua)."""
    # A non-finite number is named by its value: "compare number with number" says nothing.
    other = lua_tostring(value) if isinstance(value, float) else lua_type(value)
    if number_first:
        return module_error(f"attempt to compare number with {other}")
    return module_error(f"attempt to compare {other} with number")


def number(value: object, number_first: bool = False) -> float | int:
    """A value Lua compares with a number: anything else is the compare error."""
    if not is_number(value):
        raise compare_error(value, number_first)
    return value  # type: ignore[return-value]


_U64_MAX_S: Final = U64_MAX / US  # seconds past which a time in µs is capped


def to_us(seconds: float | int) -> int:
    """upstream util.time(): seconds to µs, negative → 0, truncated, capped at uint64."""
    if seconds < 0:
        return 0
    if seconds >= _U64_MAX_S:
        return U64_MAX
    return int(seconds * US)


def event_time(seconds: float | int | None, now: int) -> int:
    """upstream util.event_time(): when an event `seconds` from now happens."""
    if seconds is None or seconds < 0:
        return now
    if seconds > MAX_TIMEOUT_S:
        return U64_MAX
    return add_u64(now, int(seconds * US))


def delay_option(opts: dict[Any, Any]) -> float | int:
    """opts.delay as a number (0 when absent); Lua compares it as `delay > 0`."""
    delay = opts.get("delay")
    if delay is None:
        return 0
    return number(delay, number_first=True)


def add_u64(a: int, b: int) -> int:
    """uint64 sum of two stored times, saturated so tuples stay msgpack-able."""
    return min(a + b, U64_MAX)


def task_id(value: object) -> int:
    """A task id: an unsigned integer, or a float holding one (5.0 works)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= U64_MAX:
        return value
    if isinstance(value, float) and value.is_integer() and 0 <= value <= U64_MAX:
        return int(value)
    raise key_part_type("unsigned")


def unsigned_field(value: object, field_no: int) -> int:
    """A value stored in an unsigned tuple field (pri): else ER 23."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise field_type(field_no, "unsigned")
    if not (float(value).is_integer() and 0 <= value <= U64_MAX):
        raise field_type(field_no, "unsigned")
    return int(value)


def options(value: object) -> dict[Any, Any]:
    """An options argument. Explicit nil is "no options" (a deliberate fix, QUEUE.md §10 #5),
    and so is false (the module's `opts = opts or {}`).

    Keys with a nil value are absent, as in a Lua table. A Lua string or array
    indexed by an option name gives nil, so those mean "no options" too.
    """
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not None}
    if value is None or value is False or isinstance(value, str | bytes | list | tuple):
        return {}
    raise module_error(f"attempt to index local 'opts' (a {lua_type(value)} value)")
