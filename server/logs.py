"""Logging setup: structlog, human-readable console lines or one JSON object per line.

Owns: the structlog configuration and `get_logger`. Logging policy (kept by
the callers): one line per connection open/close and per error, never one
per request at the default level. Must not decide what gets logged.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
LEVELS["error"] = logging.ERROR


def configure(log_format: str = "console", level: str = "info", stream: Any = None) -> None:
    stream = stream if stream is not None else sys.stderr
    shared: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=log_format == "json"),
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


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
