"""One aiohttp server for `/metrics`, `/healthz`, `/livez`, `/readyz` and per-check endpoints.

As KCM: `/healthz` and `/livez` aggregate named checks (one per controller, one for leader
election), `/healthz/<name>` reports one check, and `/readyz` stays false until the informer
caches have synced. The server runs as one task in the caller's task group and is torn down
when that group is cancelled.

The manager serves it over TLS with a `Delegation` (see `controller_manager.delegation` and
`controller_manager.secureserving`): every request is authenticated and authorized before it is
routed, so a caller who may not read a path learns nothing about it (not even whether it exists),
as KCM's filter chain. `serve()` without them (plain HTTP to anyone) is for tests of the handlers.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import orjson
from aiohttp import web
from anyio.abc import TaskStatus
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    disable_created_metrics,
    generate_latest,
)

from controller_manager.delegation import AuthenticationError, AuthorizationError, Delegation, method_verb

HealthCheck = Callable[[], bool]

# client_golang, which KCM's /metrics is written with, exports no `*_created` series; Python's
# client adds one per counter, histogram and summary child, which doubles the series a scrape
# carries and shows up on dashboards as counters that do not exist in KCM. The flag is read at
# collection time, so turning it off where the metrics are served covers every registry.
disable_created_metrics()  # type: ignore[no-untyped-call]


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
    lines = [
        f"[{'-' if name in failing else '+'}]{name} {'failed' if name in failing else 'ok'}"
        for name in sorted(state.checks)
    ]
    lines.append("healthz check failed" if failing else "healthz check passed")
    return web.Response(status=500 if failing else 200, text="\n".join(lines) + "\n")


def _status(code: int, reason: str, message: str) -> web.Response:
    """A `metav1.Status` body, as KCM's responsewriters answer a refused request."""
    body: dict[str, object] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if code == 403:
        body["details"] = {}
    body["code"] = code
    return web.Response(status=code, body=orjson.dumps(body) + b"\n", content_type="application/json")


def delegation_middleware(delegation: Delegation) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        peercert = request.transport.get_extra_info("peercert") if request.transport is not None else None
        try:
            user = await delegation.authenticate(request.headers.get("Authorization"), peercert)
        except AuthenticationError:
            return _status(401, "Unauthorized", "Unauthorized")
        if delegation.needs_credential(user, request.path):
            return _status(401, "Unauthorized", "Unauthorized")
        verb = method_verb(request.method)
        try:
            allowed, reason = await delegation.authorize(user, verb, request.path)
        except AuthorizationError as exc:  # responsewriters.InternalError: plain text
            return web.Response(status=500, text=f'Internal Server Error: "{request.path_qs}": {exc}\n')
        if not allowed:
            message = f'forbidden: User "{user.name}" cannot {verb} path "{request.path}"'
            return _status(403, "Forbidden", f"{message}: {reason}" if reason else message)
        return await handler(request)

    return guard


def build_app(
    state: HealthState, registry: CollectorRegistry = REGISTRY, *, delegation: Delegation | None = None
) -> web.Application:
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

    app = web.Application(middlewares=[delegation_middleware(delegation)] if delegation is not None else [])
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
    tls: ssl.SSLContext | None = None,
    delegation: Delegation | None = None,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; reports the bound port through `task_status` (`tg.start`)."""
    runner = web.AppRunner(build_app(state, delegation=delegation), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, ssl_context=tls)
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
