"""Log lines carry `controller` and `key` bound by the worker, as JSON or text."""

from __future__ import annotations

import orjson
import structlog

from controller_manager import logging as manager_logging
from tests.manager.logcapture import CapturedStream, restore_logging  # noqa: F401 - autouse fixture


def test_json_lines_carry_bound_context_and_respect_verbosity() -> None:
    stream = CapturedStream()
    manager_logging.configure(log_format="json", verbosity=0, stream=stream)
    log = structlog.get_logger()
    with structlog.contextvars.bound_contextvars(controller="replicaset", key="shop/web"):
        log.info("synced", replicas=3)
        log.debug("hidden at -v 0")
    (line,) = stream.buffer.getvalue().splitlines()
    record = orjson.loads(line)
    assert record["controller"] == "replicaset" and record["key"] == "shop/web"
    assert record["event"] == "synced" and record["level"] == "info" and record["replicas"] == 3
    assert record["timestamp"].endswith("Z")


def test_text_format_and_debug_at_v4() -> None:
    stream = CapturedStream()
    manager_logging.configure(log_format="text", verbosity=4, stream=stream)
    structlog.get_logger().debug("detail", controller="deployment")
    text = stream.getvalue()
    assert "detail" in text and "controller=deployment" in text and "debug" in text
