"""An API server restart: the watch retries while it is down must not delay the relist after it.

When kube-apiserver comes back, its watch cache starts at the current revision, so every watch
resumes with 410 and relists. client-go keeps two backoffs: one between watch attempts, one
before each LIST. With one shared backoff, ten seconds of refused watches grew the delay before
that relist to ~10 s and every controller worked from a stale cache meanwhile.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import anyio
import orjson
import pytest

from apiclient import ApiError
from apiclient.resources import PODS
from informers.reflector import Reflector

Obj = dict[str, Any]


class _Sink:
    def __init__(self) -> None:
        self.replaced: list[float] = []
        self.relisted = anyio.Event()

    def replace(self, items: list[Obj], resource_version: str) -> None:
        self.replaced.append(anyio.current_time())
        if len(self.replaced) >= 2:
            self.relisted.set()

    def apply(self, event_type: str, obj: Obj) -> None:
        return None


class _RestartingServer:
    """LIST always answers; WATCH is refused until `back_at`, then answers 410 once, then idles."""

    def __init__(self, back_at: float) -> None:
        self.back_at = back_at
        self.gone_sent = False
        self.gone_at = 0.0

    async def request_raw(self, method: str, path: str, **_: Any) -> bytes:
        return orjson.dumps({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": []})

    @asynccontextmanager
    async def watch(self, res: Any, **_: Any) -> AsyncIterator[AsyncIterator[Any]]:
        if anyio.current_time() < self.back_at:
            raise aiohttp.ClientConnectionError("connection refused")
        if not self.gone_sent:
            self.gone_sent = True
            self.gone_at = anyio.current_time()
            raise ApiError(
                410,
                {"reason": "Expired", "message": "too old resource version: 3 (9)", "code": 410},
                method="WATCH",
                path="/api/v1/pods",
            )

        async def idle() -> AsyncIterator[Any]:
            await anyio.sleep_forever()
            yield  # pragma: no cover

        yield idle()


@pytest.mark.looptime
async def test_relist_after_a_restart_is_not_delayed_by_the_watch_retries() -> None:
    start = anyio.current_time()
    server = _RestartingServer(back_at=start + 12.0)  # the watch broke at once; the server is down 12 s
    sink = _Sink()
    reflector = Reflector(server, PODS, sink)  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        tg.start_soon(reflector.run)
        with anyio.fail_after(120):
            await sink.relisted.wait()
        tg.cancel_scope.cancel()
    # The 410 arrives at the first watch attempt after the server's return (the watch backoff has
    # grown meanwhile, that is fine); the relist then waits only the LIST backoff, which is fresh:
    # at most 0.8 s plus 100 % jitter.
    assert server.gone_sent
    assert sink.replaced[1] - server.gone_at <= 1.6 + 0.1
