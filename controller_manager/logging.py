"""structlog set-up: JSON lines (orjson) for log pipelines, or text for people, on stderr.

Workers bind `controller` and `key` with `structlog.contextvars` (the Controller base does), so
`merge_contextvars` comes first: every line a sync writes, however deep, names its object.
Log calls stay synchronous: a filtering bound logger drops disabled levels before any
formatting, which keeps debug calls on hot paths nearly free. The standard library's logging
(kubernetes_asyncio, aiohttp) goes to the same stream at WARNING and above.

Secrets never reach the output, whatever the format or verbosity: exceptions are rendered
without local variables (structlog's dict tracebacks and rich's console tracebacks show them by
default, and a request's locals hold its `Authorization` header), and a last processor, plus a
formatter for the standard library's records, scrubs bearer tokens, Authorization headers,
private-key blocks and kubeconfig credential fields from every string it is handed.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping
from typing import Any, TextIO

import orjson
import structlog


def level_for(verbosity: int) -> int:
    """klog verbosity to a level: V(4) and above is debug, as klog's convention has it."""
    return logging.DEBUG if verbosity >= 4 else logging.INFO


REDACTED = "[REDACTED]"
_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)", re.DOTALL
        ),
        "[REDACTED PRIVATE KEY]",
    ),
    (re.compile(r"(?i)\b(bearer|basic)(\s+|%20)[A-Za-z0-9\-._~+/]+=*"), rf"\1 {REDACTED}"),
    (
        re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)(?!bearer\b|basic\b)[^\s'\",}]+"),
        rf"\1{REDACTED}",
    ),
    (
        re.compile(
            r"(?i)(['\"]?\b(?:token|client-key-data|client_key_data|password|id-token|refresh-token|"
            r"access-token|api_key|key_data)['\"]?\s*[:=]\s*['\"]?)[^\s'\",}\]]+"
        ),
        rf"\1{REDACTED}",
    ),
)


def redact_text(text: str) -> str:
    """`text` with every secret shape this module knows replaced."""
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _redact(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: _redact(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact(v) for v in value]
    return value


def redact_secrets(_: Any, __: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: scrub every string value, nested ones (a rendered traceback) included."""
    return {key: _redact(value) for key, value in event_dict.items()}


class RedactingFormatter(logging.Formatter):
    """For the standard library's records (aiohttp, kubernetes_asyncio): scrub the formatted line."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


def _orjson_dumps(obj: Any, **_: Any) -> bytes:
    return orjson.dumps(obj, default=str)


def configure(
    *,
    log_format: str = "text",
    verbosity: int = 0,
    stream: TextIO | None = None,
    min_level: int | None = None,
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
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            ),
            redact_secrets,
            structlog.processors.JSONRenderer(serializer=_orjson_dumps),
        ]
        logger_factory = structlog.BytesLoggerFactory(file=out.buffer if hasattr(out, "buffer") else None)
    else:
        processors = [
            *shared,
            structlog.processors.format_exc_info,  # plain text, no locals, before the redaction
            redact_secrets,
            structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback),
        ]
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
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING if verbosity < 6 else logging.DEBUG)
