"""A tiny API server for the manager's tests: generic CRUD with resourceVersion guards.

Enough of the Kubernetes REST protocol for Leases, Events and empty informer LIST/WATCHes:
POST creates (409 AlreadyExists), PUT replaces only at the stored resourceVersion (409
Conflict otherwise), PATCH merges, LIST answers with what is stored, WATCH holds the stream
open. `fail_writes` turns every write into a 500, to take leadership away from a leader.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from aiohttp import web


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": message}
    return web.json_response(body, status=code)


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


@dataclass
class FakeApi:
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)  # object path -> object
    requests: list[tuple[str, str]] = field(default_factory=list)
    fail_writes: bool = False
    url: str = ""
    _rv: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def get(self, path: str) -> dict[str, Any] | None:
        return self.objects.get(path)

    def in_collection(self, collection: str) -> list[dict[str, Any]]:
        prefix = collection.rstrip("/") + "/"
        return [o for p, o in self.objects.items() if p.startswith(prefix) and "/" not in p[len(prefix):]]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/")
        self.requests.append((request.method, path))
        if request.method == "GET" and request.query.get("watch") in {"true", "1"}:
            response = web.StreamResponse()
            await response.prepare(request)
            await anyio.sleep_forever()
        if request.method != "GET" and self.fail_writes:
            return _status(500, "InternalError", "injected failure")
        if request.method == "GET":
            if path in self.objects:
                return web.json_response(self.objects[path])
            items = self.in_collection(path)
            if items or path.endswith("s"):
                return web.json_response({"kind": "List", "apiVersion": "v1", "items": items,
                                          "metadata": {"resourceVersion": str(next(self._rv))}})
            return _status(404, "NotFound", f"{path} not found")
        body = await request.json()
        if request.method == "POST":
            name = body.get("metadata", {}).get("name")
            obj_path = f"{path}/{name}"
            if obj_path in self.objects:
                return _status(409, "AlreadyExists", f"{name} already exists")
            return self._store(obj_path, body, 201)
        if path not in self.objects:
            return _status(404, "NotFound", f"{path} not found")
        current = self.objects[path]
        if request.method == "PUT":
            sent = body.get("metadata", {}).get("resourceVersion")
            if sent and sent != current["metadata"]["resourceVersion"]:
                return _status(409, "Conflict", "the object has been modified")
            return self._store(path, body, 200)
        if request.method == "PATCH":
            return self._store(path, _merge(current, body), 200)
        if request.method == "DELETE":
            del self.objects[path]
            return web.json_response(current)
        return _status(405, "MethodNotAllowed", request.method)

    def _store(self, path: str, obj: dict[str, Any], code: int) -> web.Response:
        stored = {**obj, "metadata": {**obj.get("metadata", {}), "resourceVersion": str(next(self._rv))}}
        self.objects[path] = stored
        return web.json_response(stored, status=code)


@asynccontextmanager
async def serve_fake_api() -> AsyncIterator[FakeApi]:
    api = FakeApi()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api.handle)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    api.url = f"http://127.0.0.1:{port}"
    try:
        yield api
    finally:
        await runner.cleanup()
