"""The suite's task-leak guard, shared by the fixtures of each event loop the tests run on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest


@asynccontextmanager
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail when the body leaves a task running: every background task must be owned and cancelled."""
    before = set(asyncio.all_tasks())
    yield
    current = asyncio.current_task()
    leaked: set[asyncio.Task[object]] = set()
    for _ in range(20):
        leaked = {t for t in asyncio.all_tasks() - before if t is not current and not t.done()}
        if not leaked:
            return
        await asyncio.sleep(0.01)
    names = sorted(t.get_name() + ": " + repr(t.get_coro()) for t in leaked)
    for t in leaked:
        t.cancel()
    pytest.fail("test left tasks running:\n  " + "\n  ".join(names))
