"""Waiting for a condition in tests without a timed assertion: poll, bounded only as a safety net."""

from __future__ import annotations

from collections.abc import Callable

import anyio


async def eventually(predicate: Callable[[], bool], *, limit: float = 30.0, poll: float = 0.02) -> None:
    """Return once `predicate()` holds; `limit` only stops a broken test from hanging."""
    with anyio.fail_after(limit):
        while True:
            if predicate():
                return
            await anyio.sleep(poll)
