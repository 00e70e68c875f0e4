"""A tiny in-process API server for informer tests and the benchmark.

Speaks just enough of the Kubernetes REST protocol for a reflector: LIST with `limit` and
`continue` (a consistent snapshot per paginated list), `labelSelector`, and WATCH from a
resourceVersion streaming JSON lines, with bookmarks and `timeoutSeconds`. Objects are kept
pre-serialised so large lists cost the server little.

Faults are explicit and deterministic: fail the next N lists or watches with a status (500,
429, 410, 504 "Too large resource version"), send an ERROR event instead, compact the event
history (watches from older versions get 410), drop every open watch connection.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

import orjson
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from apiclient import KubeClient, Resource
from kubeutil.selectors import parse
from tests.support.waiting import eventually

Obj = dict[str, Any]


@dataclass
class _Fault:
    status: int
    body: Obj
    count: int
    as_event: bool = False


@dataclass
class _Watch:
    collection: str
    namespace: str | None
    queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)


def status_body(code: int, reason: str, message: str) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }


class FakeApiServer:
    """`async with FakeApiServer() as srv:`; `srv.client()` is a KubeClient pointed at it."""

    def __init__(self) -> None:
        self.rv = 1
        # collection ("/api/v1/pods") -> key -> (obj, serialized)
        self.objects: dict[str, dict[str, tuple[Obj, bytes]]] = {}
        self.history: list[tuple[int, str, str | None, bytes]] = []  # (rv, collection, ns, event line)
        self.compacted_rv = 0
        self.watches: list[_Watch] = []
        self.faults: dict[str, list[_Fault]] = {"list": [], "watch": []}
        self.requests: dict[str, int] = {"list": 0, "watch": 0}
        self.watch_rvs: list[str] = []
        self._snapshots: dict[str, tuple[int, list[bytes]]] = {}
        self._tokens = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.url = ""
        self._clients: list[KubeClient] = []

    # -- lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._get)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        for client in self._clients:
            await client.close()
        self.drop_watches()
        assert self._runner is not None
        await self._runner.cleanup()

    def client(self, *, request_timeout: float = 10.0) -> KubeClient:
        config = k8s_client.Configuration()
        config.host = self.url
        kube = KubeClient(
            k8s_client.ApiClient(configuration=config),
            qps=10_000,
            burst=10_000,
            request_timeout=request_timeout,
        )
        self._clients.append(kube)
        return kube

    # -- state ------------------------------------------------------------------------

    @staticmethod
    def _collection(res: Resource) -> str:
        return res.path(None)

    def _emit(self, res: Resource, event_type: str, obj: Obj) -> None:
        collection = self._collection(res)
        namespace = obj["metadata"].get("namespace")
        line = orjson.dumps({"type": event_type, "object": obj}) + b"\n"
        self.history.append((self.rv, collection, namespace, line))
        for w in self.watches:
            if w.collection == collection and (w.namespace is None or w.namespace == namespace):
                w.queue.put_nowait(line)

    def _store(self, res: Resource, obj: Obj) -> str:
        self.rv += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.rv)
        meta.setdefault("uid", f"uid-{meta.get('namespace', '')}-{meta['name']}")
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        key = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        self.objects.setdefault(self._collection(res), {})[key] = (obj, orjson.dumps(obj))
        return key

    def create(self, res: Resource, obj: Obj) -> Obj:
        self._store(res, obj)
        self._emit(res, "ADDED", obj)
        return obj

    def preload(self, res: Resource, objs: list[Obj]) -> None:
        """Store many objects at once, with no watch events (for benchmarks)."""
        for obj in objs:
            self._store(res, obj)

    def update(self, res: Resource, obj: Obj) -> Obj:
        self._store(res, obj)
        self._emit(res, "MODIFIED", obj)
        return obj

    def delete(self, res: Resource, name: str, namespace: str | None = None) -> Obj:
        key = f"{namespace}/{name}" if namespace else name
        obj, _ = self.objects[self._collection(res)].pop(key)
        self.rv += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        self._emit(res, "DELETED", obj)
        return obj

    def delete_silently(self, res: Resource, name: str, namespace: str | None = None) -> None:
        """Remove without an event (as if the event was compacted away while a watch was down)."""
        key = f"{namespace}/{name}" if namespace else name
        self.objects[self._collection(res)].pop(key)
        self.rv += 1

    def items(self, res: Resource) -> dict[str, Obj]:
        return {k: v[0] for k, v in self.objects.get(self._collection(res), {}).items()}

    # -- faults -----------------------------------------------------------------------

    def fail_next(
        self,
        verb: str,
        status: int,
        *,
        count: int = 1,
        reason: str = "",
        message: str = "",
        as_event: bool = False,
    ) -> None:
        """Answer the next `count` lists or watches with `status` (for watches, optionally as an ERROR event)."""
        body = status_body(
            status,
            reason or {410: "Expired", 429: "TooManyRequests", 504: "Timeout"}.get(status, "InternalError"),
            message or f"injected {status}",
        )
        self.faults[verb].append(_Fault(status, body, count, as_event))

    def compact(self) -> None:
        """Forget the event history: a watch from any version before now gets 410 Gone."""
        self.compacted_rv = self.rv
        self.history.clear()

    def drop_watches(self) -> None:
        """Close every open watch connection abruptly."""
        for w in self.watches:
            w.queue.put_nowait(None)
        self.watches.clear()

    def bookmark(self, res: Resource) -> None:
        obj = {"kind": res.kind, "apiVersion": res.api_version, "metadata": {"resourceVersion": str(self.rv)}}
        line = orjson.dumps({"type": "BOOKMARK", "object": obj}) + b"\n"
        for w in self.watches:
            if w.collection == self._collection(res):
                w.queue.put_nowait(line)

    async def wait_for_watches(self, count: int = 1) -> None:
        await eventually(lambda: len(self.watches) >= count, f"{count} open watches")

    # -- HTTP -------------------------------------------------------------------------

    def _take_fault(self, verb: str) -> _Fault | None:
        faults = self.faults[verb]
        if not faults:
            return None
        fault = faults[0]
        fault.count -= 1
        if fault.count <= 0:
            faults.pop(0)
        return fault

    @staticmethod
    def _split(path: str) -> tuple[str, str | None]:
        parts = path.split("/")
        # /api/v1/namespaces/ns/pods or /apis/g/v/namespaces/ns/plural
        if "namespaces" in parts and parts.index("namespaces") + 2 < len(parts):
            i = parts.index("namespaces")
            namespace = parts[i + 1]
            return "/".join(parts[:i] + parts[i + 2 :]), namespace
        return path, None

    async def _get(self, request: web.Request) -> web.StreamResponse:
        collection, namespace = self._split(request.path)
        query: Mapping[str, str] = request.query
        verb = "watch" if query.get("watch") in ("true", "1") else "list"
        self.requests[verb] += 1
        if verb == "watch":
            self.watch_rvs.append(query.get("resourceVersion") or "")
        fault = self._take_fault(verb)
        if fault is not None and not fault.as_event:
            return web.json_response(fault.body, status=fault.status)
        if verb == "list":
            return self._list(collection, namespace, query)
        return await self._watch(request, collection, namespace, query, fault)

    def _list(self, collection: str, namespace: str | None, query: Mapping[str, str]) -> web.Response:
        token = query.get("continue")
        limit = int(query.get("limit") or 0)
        if token:
            if token not in self._snapshots:
                return web.json_response(status_body(410, "Expired", "continue token expired"), status=410)
            rv, rest = self._snapshots.pop(token)
        else:
            selector = parse(query.get("labelSelector"))
            rv = self.rv
            rest = [
                raw
                for key, (obj, raw) in sorted(self.objects.get(collection, {}).items())
                if (namespace is None or obj["metadata"].get("namespace") == namespace)
                and selector.matches_obj(obj)
            ]
        page, rest = (rest[:limit], rest[limit:]) if limit else (rest, [])
        meta: Obj = {"resourceVersion": str(rv)}
        if rest:
            next_token = f"t{next(self._tokens)}"
            self._snapshots[next_token] = (rv, rest)
            meta["continue"] = next_token
        head = orjson.dumps({"kind": "List", "apiVersion": "v1", "metadata": meta})[:-1]
        body = head + b',"items":[' + b",".join(page) + b"]}"
        return web.Response(body=body, content_type="application/json")

    async def _watch(
        self,
        request: web.Request,
        collection: str,
        namespace: str | None,
        query: Mapping[str, str],
        fault: _Fault | None,
    ) -> web.StreamResponse:
        from_rv = int(query.get("resourceVersion") or 0)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        if fault is not None:
            await resp.write(orjson.dumps({"type": "ERROR", "object": fault.body}) + b"\n")
            return resp
        if from_rv < self.compacted_rv:
            await resp.write(
                orjson.dumps(
                    {"type": "ERROR", "object": status_body(410, "Expired", "too old resource version")}
                )
                + b"\n"
            )
            return resp
        watch = _Watch(collection, namespace)
        for rv, coll, ns, line in self.history:
            if rv > from_rv and coll == collection and (namespace is None or ns == namespace):
                watch.queue.put_nowait(line)
        self.watches.append(watch)
        timeout = float(query.get("timeoutSeconds") or 600)
        try:
            async with asyncio.timeout(timeout):
                while True:
                    batch = [await watch.queue.get()]
                    while not watch.queue.empty() and batch[-1] is not None:
                        batch.append(watch.queue.get_nowait())
                    lines = [line for line in batch if line is not None]
                    if lines:
                        try:
                            await resp.write(b"".join(lines))
                        except ConnectionResetError:
                            return resp
                    if batch[-1] is None:
                        # Dropped: close the transport without a clean end of stream.
                        if request.transport is not None:
                            request.transport.close()
                        return resp
        except TimeoutError:
            pass
        finally:
            if watch in self.watches:
                self.watches.remove(watch)
        return resp
