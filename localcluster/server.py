"""The aiohttp application: discovery, OpenAPI and the REST handlers on one registry.

Discovery and OpenAPI routes are exact paths (`/api/{version}`, `/apis/{group}/{version}`,
`/openapi/...`) and are added before the REST catch-alls so they win; everything deeper is a
resource request for `localcluster.rest`.
"""

from __future__ import annotations

from aiohttp import web

from localcluster import discovery, openapi
from localcluster.objects import ObjectAPI
from localcluster.registry import Registry
from localcluster.rest import RestHandlers


def build_app(
    registry: Registry, objects: ObjectAPI, *, bookmark_interval: float = 10.0
) -> tuple[web.Application, RestHandlers]:
    app = web.Application(client_max_size=16 * 1024 * 1024)
    discovery.setup_routes(app, registry)
    openapi.setup_routes(app, registry)
    rest = RestHandlers(registry, objects, bookmark_interval=bookmark_interval)

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    for path in ("/healthz", "/livez", "/readyz"):
        app.router.add_get(path, healthz)
    rest.setup_routes(app)
    return app, rest
