"""Capturing what the manager logs: a stream with a byte buffer (the JSON format writes bytes),
and a fixture that puts structlog and the root logger back as they were."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
import structlog


class CapturedStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self._bytes = io.BytesIO()

    @property
    def buffer(self) -> io.BytesIO:
        """Where the JSON format writes (`sys.stdout.buffer` in a real run)."""
        return self._bytes

    def everything(self) -> str:
        return self.getvalue() + self.buffer.getvalue().decode()


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """Autouse wherever it is imported."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)
