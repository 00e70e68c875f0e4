"""Hold an async context manager open in a task of its own.

pytest-asyncio runs an async fixture's setup and teardown in different tasks, but an anyio task
group (which `LocalCluster` owns) must be exited by the task that entered it. So a fixture enters
the context manager inside one dedicated task and hands the value out; teardown tells that task
to leave. Failures on entry or exit surface in the fixture, not as a stray task.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TypeVar

T = TypeVar("T")


@asynccontextmanager
async def held_in_own_task(cm: AbstractAsyncContextManager[T], *, name: str = "held") -> AsyncIterator[T]:
    ready: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        async with cm as value:
            ready.set_result(value)
            await stop.wait()

    task = asyncio.create_task(hold(), name=name)
    await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        await task  # raises the start-up failure
        raise RuntimeError(f"{name} exited before it was ready")
    try:
        yield ready.result()
    finally:
        stop.set()
        await task
