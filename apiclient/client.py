"""`KubeClient`: raw JSON access to any resource, throttled and instrumented.

Why not the generated per-kind APIs: building kubernetes_asyncio's models costs ~10x the CPU of
orjson, and a controller manager spends most of its time decoding pods. We still go through
kubernetes_asyncio's `ApiClient` (its connection pool and request building), asking for raw
responses (`_preload_content=False`); `apiclient.config` builds it with client-go's credential
handling. A 401 lets the credentials rotate (a token file re-read, an exec plugin re-run) and,
when they did, the request is sent once more. With raw responses the generated client checks no
status code, so this module does, raising `ApiError` with the server's `Status`.

The `rest_client_*` metrics are installed on the `ApiClient`'s REST layer, so every request made
with that `ApiClient` is counted. The client-side token bucket belongs to the `KubeClient`: as KCM
builds a client, and so a rate limiter, per controller (`SimpleControllerClientBuilder`) and
gives leader election and events their own, `derive(component)` makes a client that shares the
connection pool and credentials but waits on a bucket of its own, so one controller's burst of
writes never delays another's, nor a lease renewal.
"""

from __future__ import annotations

import builtins
import contextvars
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, Unpack
from urllib.parse import urlsplit

import aiohttp
import anyio
import anyio.lowlevel
import orjson
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio.client.exceptions import ApiException

from apiclient import metrics
from apiclient.credentials import Credentials
from apiclient.errors import ApiError
from apiclient.resources import PODS, Resource
from apiclient.throttle import TokenBucket

PatchType = Literal["merge", "strategic", "json", "apply"]
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}
QueryValue = str | int | bool
Obj = dict[str, Any]


class RequestOptions(TypedDict, total=False):
    """What a raw request may carry besides its method and path; unset, `_send`'s defaults apply
    (no query, no body, JSON, the client's request timeout)."""

    query: Mapping[str, QueryValue | None] | None
    body: Any
    content_type: str
    timeout: float | None


# kubernetes_asyncio lays its default headers over the caller's, User-Agent included, so a
# client's own User-Agent reaches the REST layer beside the call instead of among its headers.
_USER_AGENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("aiokcm_user_agent", default=None)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event: `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR` (object is a Status)."""

    type: str
    object: Obj


def _api_host(api_client: k8s_client.ApiClient) -> str:
    host = str(api_client.configuration.host)
    return urlsplit(host).netloc or host


def _install_rest_hooks(api_client: k8s_client.ApiClient) -> None:
    """Wrap the REST layer once: timing and counting of every request."""
    rest: Any = api_client.rest_client
    if getattr(rest, "_aiokcm_instrumented", False):
        return
    host = _api_host(api_client)
    original = rest.request

    async def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        agent = _USER_AGENT.get()
        if agent is not None and isinstance(kwargs.get("headers"), dict):
            kwargs["headers"]["User-Agent"] = agent
        verb = method.upper()
        start = time.perf_counter()
        code = "<error>"
        try:
            response = await original(method, url, *args, **kwargs)
            code = str(getattr(response, "status", "<error>"))
            return response
        except ApiException as exc:
            code = str(exc.status)
            raise
        finally:
            metrics.REQUEST_DURATION.labels(verb, host).observe(time.perf_counter() - start)
            metrics.REQUESTS_TOTAL.labels(code, verb, host).inc()

    rest.request = request
    rest._aiokcm_instrumented = True


def _query(params: Mapping[str, QueryValue | None]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out.append((key, "true" if value else "false"))
        else:
            out.append((key, str(value)))
    return out


def _decode_error(status: int, raw: bytes, method: str, path: str) -> ApiError:
    body: Obj | None
    try:
        parsed = orjson.loads(raw) if raw else None
        body = parsed if isinstance(parsed, dict) else None
    except orjson.JSONDecodeError:
        body = None
    if body is None:
        text = raw.decode("utf-8", "replace").strip()
        body = {"message": text} if text else {}
    return ApiError(status, body, method=method, path=path)


class KubeClient:
    """The one way product code talks to the API server."""

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        *,
        qps: float = 20.0,
        burst: int = 30,
        request_timeout: float = 60.0,
        component: str = "",
        _owns_api_client: bool = True,
    ) -> None:
        self.api_client = api_client
        self.bucket = TokenBucket(qps, burst)
        self.request_timeout = request_timeout
        self.component = component
        self._owns_api_client = _owns_api_client
        self._host_label = _api_host(api_client)
        base_agent = str(api_client.user_agent or "aiokcm")
        self._user_agent = f"{base_agent}/{component}" if component else None
        hook = api_client.configuration.refresh_api_key_hook
        self._credentials: Credentials | None = hook if isinstance(hook, Credentials) else None
        _install_rest_hooks(api_client)

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    def derive(self, component: str, *, qps: float | None = None, burst: int | None = None) -> KubeClient:
        """A client for one component (a controller, leader election, events): the same server,
        credentials and connections, its own rate limiter (this client's qps and burst unless
        given) and a User-Agent naming the component, as KCM's per-controller clients."""
        return KubeClient(
            self.api_client,
            qps=self.bucket.qps if qps is None else qps,
            burst=self.bucket.burst if burst is None else burst,
            request_timeout=self.request_timeout,
            component=component,
            _owns_api_client=False,
        )

    async def close(self) -> None:
        """Close the connections, unless this client was derived from another (which owns them)."""
        if self._owns_api_client:
            await self.api_client.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- raw requests -----------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, QueryValue | None] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        creds = self._credentials
        agent = _USER_AGENT.set(self._user_agent)
        try:
            for attempt in (1, 2):
                waited = await self.bucket.acquire()
                metrics.RATE_LIMITER_DURATION.labels(method.upper(), self._host_label).observe(waited)
                auth_settings = ["BearerToken"]
                used: str | None = None
                if creds is not None:
                    # Set here, not by the generated client, to know which header a 401 answers; and
                    # after the rate limiter's wait, so a token is never sent stale from the queue.
                    used = await creds.authorization()
                    auth_settings = []
                    headers.pop("Authorization", None)
                    if used is not None:
                        headers["Authorization"] = used
                response: aiohttp.ClientResponse = await self.api_client.call_api(
                    path,
                    method,
                    query_params=_query(query or {}),
                    header_params=dict(headers),
                    body=body,
                    auth_settings=auth_settings,
                    _preload_content=False,
                    _request_timeout=timeout if timeout is not None else self.request_timeout,
                )
                if response.status == 401 and creds is not None and attempt == 1:
                    await response.read()  # the whole body: the connection goes back to the pool, the
                    # response keeps the body for the caller's error when the credentials did not rotate
                    if await creds.unauthorized(used):
                        continue  # rotated credentials (a re-run plugin, a re-read token file): send once more
                return response
        finally:
            _USER_AGENT.reset(agent)
        raise AssertionError("unreachable")

    async def request_raw(self, method: str, path: str, **options: Unpack[RequestOptions]) -> bytes:
        """Send one request and return the body bytes of a 2xx answer; raise `ApiError` otherwise."""
        response = await self._send(method, path, **options)
        try:
            raw = await response.read()
        finally:
            response.release()
        if not 200 <= response.status <= 299:
            raise _decode_error(response.status, raw, method, path)
        return raw

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> Obj:
        """`request_raw`, its JSON body decoded (a bare JSON list comes back as `{"items": [...]}`)."""
        raw = await self.request_raw(method, path, **options)
        parsed = orjson.loads(raw) if raw else {}
        return parsed if isinstance(parsed, dict) else {"items": parsed}

    # -- verbs ------------------------------------------------------------------------

    async def get(
        self, res: Resource, name: str, *, namespace: str | None = None, subresource: str | None = None
    ) -> Obj:
        return await self.request("GET", res.path(namespace, name, subresource))

    async def get_or_none(self, res: Resource, name: str, *, namespace: str | None = None) -> Obj | None:
        """The object, or None when the server answers 404: for callers to whom a missing object is
        an answer (kubectl's `--ignore-not-found`), not a failure. Other errors are raised."""
        try:
            return await self.get(res, name, namespace=namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def list(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
    ) -> Obj:
        """One page of a LIST: the List object with `items` and `metadata.continue`."""
        query: dict[str, QueryValue | None] = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": limit,
            "continue": continue_token,
            "resourceVersion": resource_version,
        }
        return await self.request("GET", res.path(namespace), query=query, timeout=timeout)

    async def list_all(
        self,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> builtins.list[Obj]:
        """Every item, following `continue` tokens."""
        items: builtins.list[Obj] = []
        token: str | None = None
        while True:
            page = await self.list(
                res,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=page_size,
                continue_token=token,
            )
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    async def create(
        self,
        res: Resource,
        body: Obj,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> Obj:
        if subresource:
            if name is None:
                raise ValueError("a subresource create needs the parent's name")
            path = res.path(namespace, name, subresource)
        else:
            path = res.path(namespace)
        return await self.request("POST", path, body=body)

    async def replace(
        self,
        res: Resource,
        body: Obj,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> Obj:
        """PUT: guarded by the body's `metadata.resourceVersion` when it has one."""
        obj_name = name or str(body["metadata"]["name"])
        return await self.request("PUT", res.path(namespace, obj_name, subresource), body=body)

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Obj | Sequence[Obj],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        patch_type: PatchType = "merge",
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> Obj:
        query: dict[str, QueryValue | None] = {"fieldManager": field_manager, "force": force}
        return await self.request(
            "PATCH",
            res.path(namespace, name, subresource),
            query=query,
            body=patch,
            content_type=_PATCH_CONTENT_TYPES[patch_type],
        )

    async def delete(
        self,
        res: Resource,
        name: str,
        *,
        namespace: str | None = None,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        preconditions: Obj | None = None,
    ) -> Obj:
        options: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if preconditions:
            options["preconditions"] = preconditions
        return await self.request("DELETE", res.path(namespace, name), body=options)

    async def evict(self, namespace: str, name: str, *, delete_options: Obj | None = None) -> Obj:
        """POST a policy/v1 Eviction: the API server checks PodDisruptionBudgets."""
        body: Obj = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if delete_options:
            body["deleteOptions"] = delete_options
        return await self.request("POST", PODS.path(namespace, name, "eviction"), body=body)

    # -- watch ------------------------------------------------------------------------

    @asynccontextmanager
    async def watch(
        self,
        res: Resource,
        *,
        resource_version: str | None,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
        decode: Callable[[bytes], WatchEvent] | None = None,
        read_interval: float = 0.0,
    ) -> AsyncIterator[AsyncIterator[WatchEvent]]:
        """Open a WATCH; yields an async iterator of events, closed when the block exits.

        A context manager rather than a bare async generator so the HTTP response is always
        released, even when the consumer is cancelled mid-stream. `decode` turns one event
        line into a `WatchEvent` in place of the generic orjson decoding: a projecting
        informer parses only the fields it keeps (`informers.rawdecode`).

        `read_interval` > 0: the connection is read at most that often, and events arriving in
        between wait in the socket and are read and decoded together. For a stream whose reader
        acts on a period of its own (the node Leases, read by node lifecycle's monitor pass every
        5 s), this trades that much staleness for one socket read and loop wake-up per batch
        instead of per event.
        """
        query: dict[str, QueryValue | None] = {
            "watch": True,
            "resourceVersion": resource_version,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": allow_bookmarks or None,
        }
        # The server ends a watch after timeoutSeconds: a total bound 30 s past it catches a dead
        # connection as surely as a read timeout, without re-arming a timer on every chunk
        # (500 lease renewals/s at 5,000 nodes). Without timeoutSeconds the server picks the length.
        if timeout_seconds:
            timeout = aiohttp.ClientTimeout(total=timeout_seconds + 30, sock_connect=self.request_timeout)
        else:
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.request_timeout, sock_read=630)
        path = res.path(namespace)
        response = await self._send(
            "GET", path, query=query, body=None, content_type="application/json", timeout=timeout
        )
        try:
            if not 200 <= response.status <= 299:
                raw = await response.read()
                raise _decode_error(response.status, raw, "WATCH", path)
            yield _iter_events(response, decode or _decode_event, read_interval)
        finally:
            response.close()


def _decode_event(line: bytes) -> WatchEvent:
    frame = orjson.loads(line)
    return WatchEvent(str(frame.get("type", "")), frame.get("object") or {})


_EVENTS_PER_SLICE = 200  # events handed over between two yields to the event loop (a few ms)


async def _iter_events(
    response: aiohttp.ClientResponse, decode: Callable[[bytes], WatchEvent], read_interval: float = 0.0
) -> AsyncIterator[WatchEvent]:
    """The stream's events, one JSON document per line.

    Reads whatever has arrived and splits it, rather than `readline` per event: one read then
    serves every event that came in together, and the per-line scan of aiohttp's `readline`
    was the largest single cost of an idle manager (at 5,000 nodes the Lease watch alone
    brings 500 events a second). A line still arriving is kept as a list of pieces, so an
    object as large as etcd allows costs one join, not a copy per piece.
    """
    content = response.content
    partial: list[bytes] = []  # the start of a line still arriving
    while True:
        chunk = await content.readany()
        if not chunk:
            tail = b"".join(partial).strip()
            if tail:
                yield decode(tail)
            return
        end = chunk.rfind(b"\n")
        if end < 0:
            partial.append(chunk)
            continue
        if partial:
            partial.append(chunk[: end + 1])
            complete = b"".join(partial)
            partial = []
        else:
            complete = chunk[: end + 1] if end + 1 < len(chunk) else chunk
        if end + 1 < len(chunk):
            partial.append(chunk[end + 1 :])
        for n, line in enumerate(complete.split(b"\n"), 1):
            line = line.strip()
            if line:
                yield decode(line)
            if n % _EVENTS_PER_SLICE == 0:
                # A read after the loop was busy can hold thousands of events, and handing them
                # over suspends nothing: let the other tasks run between slices.
                await anyio.lowlevel.checkpoint()
        if read_interval > 0:
            await _hold_reading(response, read_interval)


async def _hold_reading(response: aiohttp.ClientResponse, seconds: float) -> None:
    """Leave the socket unread for `seconds`: what arrives meanwhile is read in one go after.

    Pausing the protocol, as aiohttp's own flow control does, stops the transport reading; the
    kernel's receive buffer (and the server's send buffer) hold the events meanwhile.
    """
    connection = response.connection
    protocol = connection.protocol if connection is not None else None
    if protocol is None:
        await anyio.sleep(seconds)
        return
    protocol.pause_reading()
    try:
        await anyio.sleep(seconds)
    finally:
        protocol.resume_reading()
