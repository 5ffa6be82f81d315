"""One setting's value read from what the user wrote: the environment and flags
give strings, the TOML file typed values.

Owns: the parsers of single values (booleans, sizes like 16M, seconds, counts,
choices, name lists, HOST:PORT addresses, URLs, UUIDs, tube name patterns,
shard names and numbers),
each raising ValueError with what it expected. Must not touch: which setting
takes which parser (config_load.py), the settings themselves (config.py),
files, sockets.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable
from typing import Any

from queuebox.protocol.placement import ID_SHARDS


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


_SIZE_SUFFIXES = {"k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(value: Any) -> int:
    """An int, or a string like 65536, 64k, 16M, 1G (binary multiples)."""
    if isinstance(value, int) and not isinstance(value, bool):
        result = value
    elif isinstance(value, str):
        text = value.strip().lower().removesuffix("ib").removesuffix("b")
        scale = _SIZE_SUFFIXES.get(text[-1:], 1)
        digits = text[:-1] if scale != 1 else text
        if not digits.isdigit():
            raise ValueError(f"expected an integer (like 16M), got {value!r}")
        result = int(digits) * scale
    else:
        raise ValueError(f"expected an integer (like 16M), got {value!r}")
    if result < 0:
        raise ValueError(f"expected an integer >= 0, got {value!r}")
    return result


def parse_record_size(value: Any) -> int:
    result = parse_size(value)
    if result < 4096:
        raise ValueError(f"expected at least 4k, got {value!r}")
    return result


def parse_float(value: Any) -> float:
    expected = f"expected a number of seconds (like 2.5), got {value!r}"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(expected)
    try:
        result = float(value)
    except ValueError:
        raise ValueError(expected) from None
    if not math.isfinite(result):
        raise ValueError(f"expected a finite number, got {value!r}")
    if result < 0:
        raise ValueError(f"expected a number >= 0, got {value!r}")
    return result


def parse_count(value: Any) -> int:
    """A whole number, at least 1."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"not a whole number: {value!r}")
    result = int(value)
    if result < 1:
        raise ValueError(f"must be at least 1: {value!r}")
    return result


def parse_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def choice(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = parse_str(value).strip().lower()
        if text not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {value!r}")
        return text

    parse.choices = allowed  # type: ignore[attr-defined]  # shown by `serve --help`
    return parse


def parse_names(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ValueError(f"not a list: {value!r}")
    names = tuple(parse_str(item).strip() for item in items)
    return tuple(name for name in names if name)


def parse_listen(value: Any) -> tuple[str, int]:
    """ "HOST:PORT", "[v6]:PORT" or ":PORT" (loopback) -> (host, port)."""
    text = parse_str(value).strip()
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    host = host.removeprefix("[").removesuffix("]") or "127.0.0.1"
    return host, int(port_text)


def parse_optional_listen(value: Any) -> tuple[str, int] | None:
    """Like `listen`, and "" or "off" turns it off."""
    if isinstance(value, str) and value.strip().lower() in ("", "off"):
        return None
    return parse_listen(value)


def parse_addresses(value: Any) -> tuple[tuple[str, int], ...]:
    """ "HOST:PORT,HOST:PORT" (or a list) -> ((host, port), ...); "" -> ()."""
    return tuple(parse_listen(name) for name in parse_names(value))


def parse_urls(value: Any) -> tuple[str, ...]:
    urls = parse_names(value)
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"expected http://HOST:PORT, got {url!r}")
    return urls


def parse_advertise(value: Any) -> str:
    text = parse_str(value).strip()
    if text:
        parse_listen(text)
    return text


def parse_uuid(value: Any) -> str:
    try:
        return str(uuid.UUID(parse_str(value)))
    except ValueError:
        raise ValueError(f"expected a UUID, got {value!r}") from None


def parse_tube_patterns(value: Any) -> tuple[str, ...]:
    """ "jobs*,mail" or ["jobs*", "mail"] -> tube name patterns (globs)."""
    patterns = parse_names(value)
    if not patterns and value not in ([], ""):
        raise ValueError(f"expected tube name patterns, got {value!r}")
    return patterns


# A shard's name is one etcd key segment (P/shards/NAME/...): no slash, short.
_SHARD_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
SHARD_NUMBERS = ID_SHARDS  # a task id names its shard: id % 1024


def parse_shard_name(value: Any) -> str:
    """ "" (not a shard of a cluster) or a name of letters, digits, `_`, `.`, `-`."""
    text = parse_str(value).strip()
    if text and (not _SHARD_NAME.fullmatch(text) or text in (".", "..")):
        raise ValueError(f"expected a shard name of letters, digits, _ . - (1-64), got {value!r}")
    return text


def parse_shard_number(value: Any) -> int | None:
    """ "" or "none" (None: unsharded ids), else 0..1023."""
    if isinstance(value, str) and value.strip().lower() in ("", "none"):
        return None
    number = parse_size(value) if not isinstance(value, str) or value.strip().isdigit() else -1
    if not 0 <= number < SHARD_NUMBERS:
        raise ValueError(f"expected a shard number 0..{SHARD_NUMBERS - 1} or none, got {value!r}")
    return number
