"""A tiny API server for the manager's tests: generic CRUD with resourceVersion guards.

Enough of the Kubernetes REST protocol for Leases, Events and empty informer LIST/WATCHes:
POST creates (409 AlreadyExists), PUT replaces only at the stored resourceVersion (409
Conflict otherwise), PATCH merges, LIST answers with what is stored, WATCH holds the stream
open. A WATCH of one object (`fieldSelector=metadata.name=X`) streams that object's changes;
`drop_watches()` ends every open stream and `refuse_watches` answers new ones with a 500.
`fail_writes` turns every write into a 500, to take leadership away from a leader.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from aiohttp import web
from anyio.streams.memory import MemoryObjectSendStream


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
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
    refuse_watches: bool = False
    watches: int = 0  # WATCH requests received, refused ones included
    url: str = ""
    _watchers: dict[str, set[MemoryObjectSendStream[dict[str, Any]]]] = field(default_factory=dict)
    _rv: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def get(self, path: str) -> dict[str, Any] | None:
        return self.objects.get(path)

    def in_collection(self, collection: str) -> list[dict[str, Any]]:
        prefix = collection.rstrip("/") + "/"
        return [o for p, o in self.objects.items() if p.startswith(prefix) and "/" not in p[len(prefix) :]]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/")
        self.requests.append((request.method, path))
        if request.method == "GET" and request.query.get("watch") in {"true", "1"}:
            self.watches += 1
            if self.refuse_watches:
                return _status(500, "InternalError", "injected watch failure")
            selector = request.query.get("fieldSelector", "")
            response = web.StreamResponse()
            await response.prepare(request)
            if not selector.startswith("metadata.name="):
                await anyio.sleep_forever()
            obj_path = f"{path}/{selector.removeprefix('metadata.name=')}"
            send, receive = anyio.create_memory_object_stream[dict[str, Any]](100)
            self._watchers.setdefault(obj_path, set()).add(send)
            try:
                if not request.query.get("resourceVersion") and obj_path in self.objects:
                    await send.send({"type": "ADDED", "object": self.objects[obj_path]})
                async with receive:
                    while request.transport is not None and not request.transport.is_closing():
                        with anyio.move_on_after(0.05):  # aiohttp does not cancel a handler on disconnect
                            event = await receive.receive()
                            await response.write(orjson.dumps(event) + b"\n")
            except (ConnectionError, anyio.EndOfStream):
                pass  # the client went away
            finally:
                self._watchers.get(obj_path, set()).discard(send)
            return response
        if request.method != "GET" and self.fail_writes:
            return _status(500, "InternalError", "injected failure")
        if request.method == "GET":
            if path in self.objects:
                return web.json_response(self.objects[path])
            items = self.in_collection(path)
            if items or path.endswith("s"):
                return web.json_response(
                    {
                        "kind": "List",
                        "apiVersion": "v1",
                        "items": items,
                        "metadata": {"resourceVersion": str(next(self._rv))},
                    }
                )
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
            self._publish(path, "DELETED", current)
            return web.json_response(current)
        return _status(405, "MethodNotAllowed", request.method)

    def _store(self, path: str, obj: dict[str, Any], code: int) -> web.Response:
        stored = {**obj, "metadata": {**obj.get("metadata", {}), "resourceVersion": str(next(self._rv))}}
        self.objects[path] = stored
        self._publish(path, "ADDED" if code == 201 else "MODIFIED", stored)
        return web.json_response(stored, status=code)

    def _publish(self, path: str, kind: str, obj: dict[str, Any]) -> None:
        for send in list(self._watchers.get(path, ())):
            send.send_nowait({"type": kind, "object": obj})

    def drop_watches(self) -> None:
        """End every open object watch, as an API server restart or a dropped connection does."""
        for watchers in self._watchers.values():
            for send in list(watchers):
                send.close()
            watchers.clear()


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
        api.drop_watches()
        await runner.cleanup()
