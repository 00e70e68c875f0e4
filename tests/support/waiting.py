"""Waiting for a state in tests: poll until it holds, bounded only so a broken test cannot hang.

    await eventually(lambda: ..., "three pods")
    pod = await eventually(lambda: when(kube.get(R.PODS, "web", namespace="default"), is_ready), "web ready")

Nothing here asserts how fast a state is reached: the timeout is generous and only stops a hang.
`when` turns an awaited read and a predicate on it into the value-or-None that `eventually` polls;
`holds` does the same for a predicate whose satisfying value may itself be falsy (an empty list).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")

FIRST_INTERVAL = 0.05
INTERVAL_FACTOR = 1.5
INTERVAL_CAP = 0.25


async def eventually(
    check: Callable[[], Any] | Callable[[], Awaitable[Any]],
    what: str,
    *,
    timeout: float = 20.0,
    interval: float | None = None,
) -> Any:
    """Poll `check` (sync or async) until it returns something truthy; fail with `what` after `timeout`.

    A wait for a state, not a speed assertion: the timeout is generous and only bounds a hang.
    `interval` fixes the pause between polls; without it the pauses grow from `FIRST_INTERVAL` by
    `INTERVAL_FACTOR` up to `INTERVAL_CAP`, as client-go's `wait.Backoff` does: a state that comes
    at once is seen at once, and a wait of seconds does not ask the API server twenty times a
    second (each poll is a request the server, and the test's own process, must serve).
    """
    last: Any = None
    pause = FIRST_INTERVAL if interval is None else interval
    with anyio.move_on_after(timeout):
        while True:
            result = check()
            last = await result if inspect.isawaitable(result) else result
            if last:
                return last
            await anyio.sleep(pause)
            if interval is None:
                pause = min(pause * INTERVAL_FACTOR, INTERVAL_CAP)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


async def when(value: Awaitable[T], check: Callable[[T], object]) -> T | None:
    """The awaited `value` if `check` holds for it, else None."""
    got = await value
    return got if check(got) else None


async def holds(value: Awaitable[T], check: Callable[[T], object]) -> bool:
    """Whether `check` holds for the awaited `value`."""
    return bool(check(await value))
