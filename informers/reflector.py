"""The reflector: keep a store equal to the server's state with LIST, then WATCH.

Modeled on client-go's `tools/cache/reflector.go`:

- LIST in pages (`limit` 500, following `continue`), then WATCH from the list's
  resourceVersion with `allowWatchBookmarks` and a random `timeoutSeconds` in 5-10 minutes,
  so thousands of watches do not all expire together.
- A watch that ends (server timeout, dropped connection) is reopened from the last
  resourceVersion seen: no relist, no missed event. Bookmarks only advance that version.
- 410 Gone (on opening the watch, or as an ERROR event whose Status code is 410) and "Too
  large resource version" mean the version cannot be resumed from: relist.
- Connection failures, 429 and 5xx on opening a watch are retried from the same version after
  a backoff; any other failure relists after a backoff. As client-go, two backoffs (each 800 ms
  to 30 s, jittered, reset after 2 minutes of health): one between watch attempts (its
  `initConnBackoffManager`), one before each new LIST (its `backoffManager`). With a single
  one, the watch retries of a 5 s API server restart grew the delay before the relist that
  follows it to ~10 s, and every controller worked from a stale cache that long. A watch that
  ends at once with no event is a failure too ("very short watch"), so a server dropping every
  watch is not hammered.
- LIST pages are fetched raw and decoded out of the garbage collector's way (see `gcpolicy`).
  When the transform has a schema-directed decoder (the pod projection, see `rawdecode`), LIST
  pages and watch events are decoded by it straight into the cached objects, and the
  transform is not applied again.
- Every request carries a timeout (KubeClient's request timeout for LIST; connect timeout and
  a read timeout just past `timeoutSeconds` for WATCH).

The reflector owns no cache: it applies the transform, then calls its sink's `replace` with a
full list and `apply` with each watch event, synchronously, so the informer updates its store and fans out in the same
step, with no queue in between.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import anyio
import orjson
import structlog

from apiclient import ApiError, KubeClient, Resource
from informers import gcpolicy, metrics
from informers.backoff import Backoff, BackoffPolicy
from informers.rawdecode import RawDecoder

log = structlog.get_logger(__name__)

Obj = dict[str, Any]

_NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    aiohttp.ClientError,
    OSError,
    TimeoutError,
    orjson.JSONDecodeError,
)


class ReflectorSink(Protocol):
    """What the reflector feeds: the informer."""

    def replace(self, items: list[Obj], resource_version: str) -> None: ...

    def apply(self, event_type: str, obj: Obj) -> None: ...


@dataclass(frozen=True, slots=True)
class ReflectorOptions:
    """Knobs with client-go's defaults; tests shrink the times."""

    page_size: int = 500
    watch_timeout_min: int = 300
    watch_timeout_max: int = 600
    min_watch_duration: float = 1.0
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)


class _Relist(Exception):
    """The resourceVersion cannot be resumed from: list again."""


def too_large_resource_version(err: ApiError) -> bool:
    """client-go's `isTooLargeResourceVersionError`: the server has not caught up with the version."""
    if "too large resource version" in err.message.lower():
        return True
    for cause in err.details.get("causes") or ():
        if isinstance(cause, dict) and "too large resource version" in str(cause.get("message", "")).lower():
            return True
    return False


def _resource_version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class Reflector:
    """LIST then WATCH one resource (optionally one namespace and selectors) into a sink."""

    def __init__(
        self,
        client: KubeClient,
        res: Resource,
        sink: ReflectorSink,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        options: ReflectorOptions | None = None,
        transform: Callable[[Obj], Obj] | None = None,
        freeze_pages: bool = False,
        raw_decoder: Callable[[], RawDecoder | None] | None = None,
    ) -> None:
        self.client = client
        # Asked before each LIST and WATCH: the informer's transform may be settled late.
        self.raw_decoder = raw_decoder
        self.freeze_pages = freeze_pages
        self.transform = transform
        self.res = res
        self.sink = sink
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.options = options or ReflectorOptions()
        # > 0: each watch reads its connection at most this often (`KubeClient.watch`); asked
        # at each watch, so a change takes effect from the next one.
        self.read_interval = 0.0
        self.last_sync_resource_version = ""
        self._backoff = Backoff(self.options.backoff)  # before each LIST
        self._watch_backoff = Backoff(self.options.backoff)  # between watch attempts
        name = res.group_resource
        self._name = name
        self._events = {
            t: metrics.EVENTS_TOTAL.labels(name, t)
            for t in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")
        }
        self._log = log.bind(resource=name, namespace=namespace)

    async def run(self) -> None:
        """List and watch until cancelled; failures are logged and retried after a backoff."""
        while True:
            try:
                await self.list_and_watch()
            except ApiError as err:
                metrics.ERRORS_TOTAL.labels(self._name, "api").inc()
                self._log.warning("list and watch failed", error=str(err))
            except _NETWORK_ERRORS as err:
                metrics.ERRORS_TOTAL.labels(self._name, "network").inc()
                self._log.warning("list and watch failed", error=repr(err))
            await self._backoff.sleep()

    async def list_and_watch(self) -> None:
        """One LIST, then WATCHes until the version is lost (returns) or a failure (raises)."""
        await self._list()
        await self._watch_until_relist()

    # -- LIST -------------------------------------------------------------------------

    async def _list(self) -> None:
        start = anyio.current_time()
        items: list[Obj] = []
        token: str | None = None
        api_version, kind = self.res.api_version, self.res.kind
        path = self.res.path(self.namespace)
        transform = self.transform
        decoder = self.raw_decoder() if self.raw_decoder is not None else None
        while True:
            raw = await self.client.request_raw(
                "GET",
                path,
                query={
                    "labelSelector": self.label_selector,
                    "fieldSelector": self.field_selector,
                    "limit": self.options.page_size,
                    "continue": token,
                },
            )
            meta = decoder.decode_page(raw, items, freeze=self.freeze_pages) if decoder is not None else None
            if meta is None:
                page = gcpolicy.decode_page(raw, freeze=self.freeze_pages)
                meta = page.get("metadata") or {}
                # One synchronous step per page, out of the collector's way as decoding is: the
                # transform allocates the cached objects and frees the parsed ones, so young
                # collections would keep rescanning them (see `gcpolicy.transform_page`).
                gcpolicy.transform_page(
                    page.get("items") or [], api_version, kind, transform, items, freeze=self.freeze_pages
                )
                del page
            del raw
            token = meta.get("continue") or None
            if not token:
                resource_version = str(meta.get("resourceVersion") or "")
                break
        metrics.LISTS_TOTAL.labels(self._name).inc()
        metrics.LIST_DURATION.labels(self._name).observe(anyio.current_time() - start)
        metrics.ITEMS_PER_LIST.labels(self._name).set(len(items))
        self.sink.replace(items, resource_version)
        self.last_sync_resource_version = resource_version

    # -- WATCH ------------------------------------------------------------------------

    async def _watch_until_relist(self) -> None:
        opts = self.options
        while True:
            timeout_seconds = random.randint(opts.watch_timeout_min, opts.watch_timeout_max)
            start = anyio.current_time()
            metrics.WATCHES_TOTAL.labels(self._name).inc()
            count = 0
            decoder = self.raw_decoder() if self.raw_decoder is not None else None
            decoded = decoder is not None
            try:
                async with self.client.watch(
                    self.res,
                    resource_version=self.last_sync_resource_version,
                    namespace=self.namespace,
                    label_selector=self.label_selector,
                    field_selector=self.field_selector,
                    timeout_seconds=timeout_seconds,
                    allow_bookmarks=True,
                    decode=decoder.decode_event if decoder is not None else None,
                    read_interval=self.read_interval,
                ) as events:
                    try:
                        async for event in events:
                            count += 1
                            self._handle(event.type, event.object, decoded=decoded)
                    except _NETWORK_ERRORS as err:
                        # The stream broke: resume from the last version seen.
                        self._log.debug("watch stream ended", error=repr(err), events=count)
            except _Relist:
                return
            except ApiError as err:
                if err.gone or too_large_resource_version(err):
                    self._relist_reason("gone" if err.gone else "too_large_rv", err)
                    return
                if err.too_many_requests or err.status >= 500:
                    metrics.ERRORS_TOTAL.labels(self._name, "api").inc()
                    self._log.info("watch refused, retrying", error=str(err))
                    await self._watch_backoff.sleep()
                    continue
                raise
            except _NETWORK_ERRORS as err:
                metrics.ERRORS_TOTAL.labels(self._name, "network").inc()
                self._log.info("watch failed to open, retrying", error=repr(err))
                await self._watch_backoff.sleep()
                continue
            finally:
                metrics.WATCH_DURATION.labels(self._name).observe(anyio.current_time() - start)
            if count == 0 and anyio.current_time() - start < opts.min_watch_duration:
                metrics.SHORT_WATCHES_TOTAL.labels(self._name).inc()
                await self._watch_backoff.sleep()

    def _handle(self, event_type: str, obj: Obj, *, decoded: bool = False) -> None:
        """One watch event; `decoded`: a raw decoder already made the cached object."""
        counter = self._events.get(event_type)
        if counter is not None:
            counter.inc()
        if event_type == "BOOKMARK":
            rv = _resource_version(obj)
            if rv:
                self.last_sync_resource_version = rv
            return
        if event_type == "ERROR":
            err = ApiError(
                int(obj.get("code") or 500), obj, method="WATCH", path=self.res.path(self.namespace)
            )
            if err.gone or too_large_resource_version(err):
                self._relist_reason("gone" if err.gone else "too_large_rv", err)
                raise _Relist()
            raise err
        if event_type not in ("ADDED", "MODIFIED", "DELETED"):
            self._log.warning("unknown watch event type", type=event_type)
            return
        rv = _resource_version(obj)
        if self.transform is not None and not decoded:
            obj = self.transform(obj)
        self.sink.apply(event_type, obj)
        if rv:
            self.last_sync_resource_version = rv

    def _relist_reason(self, kind: str, err: ApiError) -> None:
        metrics.ERRORS_TOTAL.labels(self._name, kind).inc()
        metrics.RELISTS_TOTAL.labels(self._name).inc()
        self._log.info("resource version expired, relisting", error=str(err))
