"""structlog set-up: JSON lines (orjson) for log pipelines, or text for people, on stderr.

Workers bind `controller` and `key` with `structlog.contextvars` (the Controller base does), so
`merge_contextvars` comes first: every line a sync writes, however deep, names its object.
Log calls stay synchronous: a filtering bound logger drops disabled levels before any
formatting, which keeps debug calls on hot paths nearly free. The standard library's logging
(kubernetes_asyncio, aiohttp) goes to the same stream at WARNING and above.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import orjson
import structlog


def level_for(verbosity: int) -> int:
    """klog verbosity to a level: V(4) and above is debug, as klog's convention has it."""
    return logging.DEBUG if verbosity >= 4 else logging.INFO


def _orjson_dumps(obj: Any, **_: Any) -> bytes:
    return orjson.dumps(obj, default=str)


def configure(
    *, log_format: str = "text", verbosity: int = 0, stream: TextIO | None = None, min_level: int | None = None
) -> None:
    """`min_level` raises the floor (the embedded demo keeps the manager to warnings so its narration reads)."""
    out = stream or sys.stderr
    level = max(level_for(verbosity), min_level or 0)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    logger_factory: Any
    if log_format == "json":
        processors = [
            *shared,
            structlog.processors.dict_tracebacks,
            structlog.processors.JSONRenderer(serializer=_orjson_dumps),
        ]
        logger_factory = structlog.BytesLoggerFactory(file=out.buffer if hasattr(out, "buffer") else None)
    else:
        processors = [*shared, structlog.dev.ConsoleRenderer(colors=False)]
        logger_factory = structlog.PrintLoggerFactory(file=out)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=logger_factory,
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING if verbosity < 6 else logging.DEBUG)
