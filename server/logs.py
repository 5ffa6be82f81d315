"""Logging setup: structlog, human-readable console lines or one JSON object per line.

Owns: the structlog configuration and `get_logger`; timestamps carry their
zone (console: local time with its offset; json: UTC, `Z`). Logging policy
(kept by the callers): one line per connection open/close (health checks at
debug, see connlog.py) and per error, never one per request at the default
level. Must not decide what gets logged.
"""

from __future__ import annotations

import logging
import sys
from datetime import datetime
from typing import Any

import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
LEVELS["error"] = logging.ERROR


def configure(log_format: str = "console", level: str = "info", stream: Any = None) -> None:
    stream = stream if stream is not None else sys.stderr
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    shared: list[Any] = [
        structlog.processors.add_log_level,
        stamp if log_format == "json" else local_timestamp,
    ]
    renderer: list[Any]
    if log_format == "json":
        renderer = [
            structlog.processors.dict_tracebacks,
            structlog.processors.JSONRenderer(sort_keys=True),
        ]
    else:
        colors = hasattr(stream, "isatty") and stream.isatty()
        renderer = [structlog.dev.ConsoleRenderer(colors=colors)]
    structlog.configure(
        processors=[*shared, *renderer],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )


def local_timestamp(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    """Local time with its UTC offset, so a console line is unambiguous anywhere."""
    event["timestamp"] = datetime.now().astimezone().isoformat(timespec="milliseconds")
    return event


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
