"""One aiohttp server for `/metrics`, `/healthz`, `/livez`, `/readyz` and per-check endpoints.

As KCM: `/healthz` and `/livez` aggregate named checks (one per controller, one for leader
election), `/healthz/<name>` reports one check, and `/readyz` stays false until the informer
caches have synced. Plain HTTP (see `--secure-port`'s help). The server runs as one task in the
caller's task group and is torn down when that group is cancelled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
from aiohttp import web
from anyio.abc import TaskStatus
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

HealthCheck = Callable[[], bool]


@dataclass
class HealthState:
    """What the endpoints report; the app mutates it as the manager moves through its lifecycle."""

    checks: dict[str, HealthCheck] = field(default_factory=dict)
    ready: bool = False

    def add_check(self, name: str, check: HealthCheck) -> None:
        self.checks[name] = check

    def failing(self) -> list[str]:
        bad: list[str] = []
        for name, check in sorted(self.checks.items()):
            try:
                ok = check()
            except Exception:
                ok = False
            if not ok:
                bad.append(name)
        return bad


def _report(state: HealthState, verbose: bool) -> web.Response:
    failing = state.failing()
    if not verbose:
        if failing:
            return web.Response(status=500, text=f"[-]{failing[0]} failed\nhealthz check failed\n")
        return web.Response(text="ok")
    lines = [f"[{'-' if name in failing else '+'}]{name} {'failed' if name in failing else 'ok'}"
             for name in sorted(state.checks)]
    lines.append("healthz check failed" if failing else "healthz check passed")
    return web.Response(status=500 if failing else 200, text="\n".join(lines) + "\n")


def build_app(state: HealthState, registry: CollectorRegistry = REGISTRY) -> web.Application:
    async def health(request: web.Request) -> web.Response:
        return _report(state, "verbose" in request.query)

    async def one_check(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        check = state.checks.get(name)
        if check is None:
            return web.Response(status=404, text=f"no health check named {name}\n")
        ok = name not in state.failing()
        return web.Response(status=200 if ok else 500, text="ok" if ok else f"[-]{name} failed\n")

    async def readyz(request: web.Request) -> web.Response:
        if not state.ready:
            return web.Response(status=500, text="[-]informer-sync failed: caches not synced\n")
        return web.Response(text="ok")

    async def metrics(request: web.Request) -> web.Response:
        body = generate_latest(registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", health)
    app.router.add_get("/livez", health)
    app.router.add_get("/healthz/{name}", one_check)
    app.router.add_get("/livez/{name}", one_check)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app


async def serve(
    state: HealthState,
    *,
    host: str,
    port: int,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; reports the bound port through `task_status` (`tg.start`)."""
    runner = web.AppRunner(build_app(state), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = port
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            bound = int(sockets[0].getsockname()[1])
        task_status.started(bound)
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()
