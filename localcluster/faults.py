"""Fault injection (`cluster.faults`): the failures a controller must survive on a real cluster.

- `drop_watches()`: every open watch ends at once (an API server rolling, a load balancer
  cutting idle streams). Clients must re-watch from their last resourceVersion.
- `restart(downtime=)`: the server stops listening, every connection is closed, and after
  `downtime` it listens again on the same port with the same state, as a restarted
  kube-apiserver in front of the same etcd. `async with server_down():` is the same with the
  downtime being the block, for tests that act while the server is away. A write being served
  when the connections close still runs to its end, as a request past the point of no return on
  a killed server: it may be stored while its client sees the connection drop. Such writes are
  kept in `cut_writes` (method and path), so a test can tell the extra work they cause (a
  controller retrying what was in fact done) from a controller's own mistakes.
- `add_latency(seconds)`: every API request waits this long before it is served.
- `fail_requests(fraction, code=500|429, retry_after=)`: that fraction of API requests (chosen by a
  seeded RNG, so a test is repeatable) answers a `Status` error instead; a 429 carries
  `Retry-After` and `details.retryAfterSeconds`, as the real server's max-in-flight filter does.
- `shrink_watch_window(size)`: the history window of every resource shrinks, so a client resuming
  from an older resourceVersion gets 410 Expired and must relist.

The request faults are an aiohttp middleware installed on the server's app; the watch faults are
knobs on `Storage`. `clear()` undoes everything but a shrunk window (use `shrink_watch_window`).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
from aiohttp import web

from localcluster import errors
from localcluster.requestlog import WRITE_METHODS
from localcluster.rest import status_response

if TYPE_CHECKING:
    from localcluster.cluster import LocalCluster

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_API_PREFIXES = ("/api/", "/apis/", "/api", "/apis")


class Faults:
    def __init__(self, cluster: LocalCluster, *, seed: int = 0) -> None:
        self._cluster = cluster
        self._rng = random.Random(seed)
        self.latency = 0.0
        self.error_fraction = 0.0
        self.error_code = 500
        self.retry_after = 1
        #: Requests answered with an injected error so far (tests assert they really happened).
        self.injected = 0
        self.restarts = 0
        #: Writes that were being served when a restart closed their connections (method, path).
        self.cut_writes: list[tuple[str, str]] = []
        self._serving: dict[int, tuple[str, str]] = {}

    # -- request faults -------------------------------------------------------------------
    def add_latency(self, seconds: float) -> None:
        self.latency = max(0.0, seconds)

    def fail_requests(self, fraction: float, *, code: int = 500, retry_after: int = 1) -> None:
        if code not in (500, 429):
            raise ValueError("injected failures are 500 or 429")
        self.error_fraction = min(max(fraction, 0.0), 1.0)
        self.error_code = code
        self.retry_after = retry_after

    def clear(self) -> None:
        self.latency = 0.0
        self.error_fraction = 0.0

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith(_API_PREFIXES):
            return await handler(request)
        if self.latency:
            await anyio.sleep(self.latency)
        if self.error_fraction and self._rng.random() < self.error_fraction:
            self.injected += 1
            if self.error_code == 429:
                exc = errors.too_many_requests("Too many requests, please try again later.", self.retry_after)
                response = status_response(exc)
                response.headers["Retry-After"] = str(self.retry_after)
                return response
            return status_response(errors.internal("injected fault"))
        if request.method not in WRITE_METHODS:
            return await handler(request)
        token = id(request)
        self._serving[token] = (request.method, request.path)
        try:
            return await handler(request)
        finally:
            del self._serving[token]

    # -- watch faults ---------------------------------------------------------------------
    def drop_watches(self) -> int:
        """End every open watch (HTTP and in-process); returns how many were closed."""
        return self._cluster.storage.close_all_watches()

    def shrink_watch_window(self, size: int) -> None:
        self._cluster.storage.set_window(size)

    # -- restart --------------------------------------------------------------------------
    async def restart(self, *, downtime: float = 0.0) -> None:
        """Stop listening and close every connection, wait, then listen again on the same port."""
        async with self.server_down():
            await anyio.sleep(downtime)

    @contextlib.asynccontextmanager
    async def server_down(self) -> AsyncIterator[None]:
        """The server is down inside the block (connections refused) and back, same port and state, after it."""
        runner = self._cluster._runner
        if runner is None:
            raise RuntimeError("the cluster is not started")
        for site in list(runner.sites):
            await site.stop()
        self._cluster.storage.close_all_watches()
        self.cut_writes.extend(self._serving.values())
        if runner.server is not None:
            for conn in list(runner.server.connections):
                conn.force_close()
        try:
            yield
        finally:
            site = web.TCPSite(
                runner, self._cluster.host, self._cluster.port, backlog=1024, reuse_address=True
            )
            await site.start()
            self.restarts += 1
