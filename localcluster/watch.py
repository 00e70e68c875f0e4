"""Watch over HTTP: the real server's framing and semantics on top of `Storage.subscribe`.

- Framing: a 200 response, `Content-Type: application/json`, `Transfer-Encoding: chunked`, one
  `{"type":"ADDED","object":{...}}` JSON document plus "\\n" per event (Go's json.Encoder); for
  clients that prefer protobuf, `WatchEvent` messages each prefixed by its length (`Framing`).
  Events buffered together go out in one write (up to `MAX_BATCH`), each line serialized once
  per event and shared by every watcher that sees it unchanged.
- Start: without a resourceVersion (or "0") the current objects come first as ADDED events
  (the list and the subscription are taken with no await between, so nothing is missed or
  repeated); from RV N, the window's events after N; older than the window, one ERROR event
  carrying a 410 Expired Status, then the stream ends, as the real server answers.
- Selectors are applied to every event with the object's state before and after it: moving into
  the selector is ADDED, moving out is DELETED (the cacher's behaviour).
- `allowWatchBookmarks`: a BOOKMARK (kind, apiVersion and metadata.resourceVersion only) shortly
  after the start and then periodically, only when nothing is buffered, so its RV never runs
  ahead of an undelivered event. `sendInitialEvents=true` ends the initial state with a bookmark
  annotated `k8s.io/initial-events-end`, as the WatchList feature does.
- `timeoutSeconds` ends the stream cleanly; the server closing all watches ends it too.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import orjson
from aiohttp import web

from kubeutil import selectors
from localcluster import errors
from localcluster.registry import ResourceType
from localcluster.storage import Entry, StoredEvent, Subscription

Render = Callable[[str, bytes], bytes]
#: Events per write: one write per wakeup keeps fan-out cheap, and the cap keeps a watcher that
#: fell far behind (or a 150,000-object initial state) from building one huge buffer.
MAX_BATCH = 1000


@dataclass(slots=True)
class WatchOptions:
    resource_version: int | None
    namespace: str | None
    label_selector: selectors.Selector
    field_requirements: tuple[selectors.FieldRequirement, ...]
    bookmarks: bool
    timeout: float
    send_initial_events: bool
    first_bookmark_after: float
    bookmark_interval: float


def make_filter(opts: WatchOptions) -> Callable[[StoredEvent], str | None] | None:
    """The event type a watcher sees (None: skip), given the object before and after; no
    filter at all for a watch of everything (the common informer case), so fan-out skips a call."""
    ns = opts.namespace
    sel = opts.label_selector
    reqs = opts.field_requirements
    trivial = sel.empty and not reqs
    if trivial and not ns:
        return None

    def matches(labels: dict[str, str] | None, fields: dict[str, str] | None) -> bool:
        if trivial:
            return True
        if not sel.empty and not sel.matches(labels or {}):
            return False
        for req in reqs:
            if ((fields or {}).get(req.field, "") == req.value) != (req.operator == "="):
                return False
        return True

    def flt(ev: StoredEvent) -> str | None:
        if ns and ev.namespace != ns:
            return None
        now = matches(ev.labels, ev.fields)
        if ev.type != "MODIFIED":
            return ev.type if now else None
        before = matches(ev.prev_labels, ev.prev_fields)
        if now and before:
            return "MODIFIED"
        if now:
            return "ADDED"
        if before:
            return "DELETED"
        return None

    return flt


_PREFIXES = {
    kind: b'{"type":"' + kind.encode() + b'","object":'
    for kind in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")
}


def frame(kind: str, raw: bytes) -> bytes:
    prefix = _PREFIXES.get(kind) or b'{"type":"' + kind.encode() + b'","object":'
    return b"".join((prefix, raw, b"}\n"))


@dataclass(frozen=True, slots=True)
class Framing:
    """How events are written: JSON lines, or (for protobuf clients) length-prefixed WatchEvents."""

    content_type: str
    frame: Callable[[str, bytes], bytes]


JSON_FRAMING = Framing("application/json", frame)


def _framer(render: Render, framing: Framing) -> Callable[[StoredEvent], bytes]:
    """Frame an event, sharing the bytes across watchers: when `render` hands back the stored
    bytes unchanged (no Table, no version rewrite), the line is built once per event and cached
    on it, so 10 watchers cost one concatenation instead of ten."""

    def encode(ev: StoredEvent) -> bytes:
        body = render(ev.type, ev.raw)
        if body is not ev.raw or framing is not JSON_FRAMING:
            return framing.frame(ev.type, body)
        line = ev.framed
        if line is None:
            line = ev.framed = frame(ev.type, body)
        return line

    return encode


def bookmark(
    rt: ResourceType, rv: int, *, initial_end: bool = False, framing: Framing = JSON_FRAMING
) -> bytes:
    meta: dict[str, object] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return framing.frame(
        "BOOKMARK", orjson.dumps({"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta})
    )


async def serve_watch(
    request: web.Request,
    rt: ResourceType,
    opts: WatchOptions,
    *,
    subscribe: Callable[[int | None, Callable[[StoredEvent], str | None] | None], Subscription],
    initial: Callable[[], tuple[list[Entry], int]],
    render: Render,
    framing: Framing = JSON_FRAMING,
) -> web.StreamResponse:
    """Stream events until timeout, server shutdown or client disconnect."""
    flt = make_filter(opts)
    encode = _framer(render, framing)
    frame = framing.frame
    response = web.StreamResponse(
        status=200, headers={"Content-Type": framing.content_type, "Cache-Control": "no-cache, private"}
    )
    response.enable_chunked_encoding()
    entries: list[Entry] = []
    initial_end = b""
    try:
        if opts.resource_version is None or opts.send_initial_events:
            # the list and the subscription with no await between: nothing missed or repeated;
            # the stored bytes never change, so they are framed later, batch by batch
            entries, list_rv = initial()
            sub = subscribe(None, flt)
            if opts.send_initial_events:
                initial_end = bookmark(rt, list_rv, initial_end=True, framing=framing)
        else:
            sub = subscribe(opts.resource_version, flt)
    except errors.StatusError as exc:
        await response.prepare(request)
        await response.write(frame("ERROR", orjson.dumps(exc.status())))
        await response.write_eof()
        return response
    loop = asyncio.get_running_loop()
    deadline = loop.time() + opts.timeout
    next_bookmark = loop.time() + opts.first_bookmark_after
    storage_rv = _storage_rv(sub)
    try:
        await response.prepare(request)
        for i in range(0, len(entries), MAX_BATCH):
            await response.write(
                b"".join([frame("ADDED", render("ADDED", e.raw)) for e in entries[i : i + MAX_BATCH]])
            )
        entries = []
        if initial_end:
            await response.write(initial_end)
        while True:
            now = loop.time()
            if now >= deadline:
                break
            if not sub.pending:
                wake = min(deadline, next_bookmark) if opts.bookmarks else deadline
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(wake - now, 0)):
                        await sub.wait()
            events = sub.drain(MAX_BATCH)
            if events:
                await response.write(b"".join([encode(ev) for ev in events]))
                continue
            if sub.closed:
                break
            if opts.bookmarks and loop.time() >= next_bookmark:
                await response.write(bookmark(rt, storage_rv(), framing=framing))
                next_bookmark = loop.time() + opts.bookmark_interval
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client went away: nothing to tell it
    finally:
        sub.close()
    return response


def _storage_rv(sub: Subscription) -> Callable[[], int]:
    storage = sub._storage
    return lambda: storage.rv
