"""core/v1 Events with client-go's correlation, so a controller in a hot loop cannot flood the API.

`recorder.event(...)` is synchronous and never blocks: it builds the Event and drops it into a
bounded buffer (1000, dropping when full, as client-go's broadcaster does). One task owned by the
broadcaster (`await broadcaster.run()` inside a task group) drains the buffer through
client-go's `EventCorrelator` (tools/record/events_cache.go), in its order:

1. `EventAggregator`: events alike except for the message (same source, object, type, reason)
   are grouped; once 10 distinct messages were seen within 10 minutes, further ones become one
   Event, "(combined from similar events): <message>", keyed by the group so it is bumped rather
   than re-created.
2. `eventLogger` (observe): an Event identical to one already written gets `count` + 1, the
   original `firstTimestamp` and name, and is written as a PATCH of count, message and
   lastTimestamp instead of a new object.
3. `EventSourceObjectSpamFilter`: a token bucket per source + involved object (burst 25,
   refilling one every 5 minutes); an event with no token is dropped.

Writes are retried (up to 12 tries, 10 s apart) on server errors and transport failures; client
errors (an invalid Event, a missing namespace) are dropped as client-go does.
"""

from __future__ import annotations

import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import aiohttp
import anyio
import structlog
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from apiclient.client import KubeClient
from apiclient.errors import ApiError
from apiclient.resources import EVENTS
from kubeutil.timestamps import format_time

log = structlog.get_logger()

MAX_LRU_CACHE_ENTRIES = 4096
DEFAULT_AGGREGATE_MAX_EVENTS = 10
DEFAULT_AGGREGATE_INTERVAL = 600.0
DEFAULT_SPAM_BURST = 25
DEFAULT_SPAM_QPS = 1.0 / 300.0
MAX_QUEUED_EVENTS = 1000
MAX_TRIES_PER_EVENT = 12
RETRY_SLEEP = 10.0
COMBINED_PREFIX = "(combined from similar events): "

Clock = Callable[[], float]
K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """A bounded map that forgets the least recently used key, like golang/groupcache's lru."""

    def __init__(self, size: int = MAX_LRU_CACHE_ENTRIES) -> None:
        self.size = size
        self._data: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.size:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


def _involved(event: Mapping[str, Any]) -> Mapping[str, Any]:
    involved: Mapping[str, Any] = event.get("involvedObject") or {}
    return involved


def _source(event: Mapping[str, Any]) -> Mapping[str, Any]:
    source: Mapping[str, Any] = event.get("source") or {}
    return source


def aggregate_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    """client-go's `EventAggregatorByReasonFunc` key: everything but the message."""
    obj, src = _involved(event), _source(event)
    return (
        str(src.get("component", "")),
        str(src.get("host", "")),
        str(obj.get("kind", "")),
        str(obj.get("namespace", "")),
        str(obj.get("name", "")),
        str(obj.get("uid", "")),
        str(obj.get("apiVersion", "")),
        str(event.get("type", "")),
        str(event.get("reason", "")),
        str(event.get("reportingComponent", "")),
        str(event.get("reportingInstance", "")),
    )


def event_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    """client-go's `getEventKey`: identical events share it (message included)."""
    return (*aggregate_key(event), str(event.get("message", "")))


def spam_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    """client-go's `getSpamKey`: source and involved object only."""
    return aggregate_key(event)[:7]


@dataclass
class _AggregateRecord:
    local_keys: set[str] = field(default_factory=set)
    last_timestamp: float = 0.0


class EventAggregator:
    """Group similar events; past `max_events` distinct messages, emit one combined event."""

    def __init__(
        self,
        *,
        max_events: int = DEFAULT_AGGREGATE_MAX_EVENTS,
        interval: float = DEFAULT_AGGREGATE_INTERVAL,
        clock: Clock = time.time,
    ) -> None:
        self.max_events = max_events
        self.interval = interval
        self.clock = clock
        self.cache: LRU[tuple[str, ...], _AggregateRecord] = LRU()

    def aggregate(self, event: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
        now = self.clock()
        akey = aggregate_key(event)
        local = str(event.get("message", ""))
        record = self.cache.get(akey)
        if record is None or now - record.last_timestamp > self.interval:
            record = _AggregateRecord()
        record.local_keys.add(local)
        record.last_timestamp = now
        self.cache.put(akey, record)
        if len(record.local_keys) < self.max_events:
            return event, event_key(event)
        record.local_keys.pop()  # do not grow past max, as client-go's PopAny
        obj = _involved(event)
        combined: dict[str, Any] = {
            **event,
            "metadata": {
                "name": f"{obj.get('name', '')}.{time.time_ns():x}",
                "namespace": event["metadata"]["namespace"],
            },
            "count": 1,
            "firstTimestamp": format_time(datetime.fromtimestamp(now, UTC)),
            "lastTimestamp": format_time(datetime.fromtimestamp(now, UTC)),
            "message": COMBINED_PREFIX + local,
        }
        return combined, akey


@dataclass
class _Observation:
    count: int
    first_timestamp: str
    name: str
    resource_version: str


class EventLogger:
    """Remember what was written so a repeat becomes a count bump (client-go's eventLogger)."""

    def __init__(self) -> None:
        self.cache: LRU[tuple[str, ...], _Observation] = LRU()

    def observe(
        self, event: dict[str, Any], key: tuple[str, ...]
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        last = self.cache.get(key)
        if last is None or last.count <= 0:
            self.cache.put(
                key, _Observation(1, str(event.get("firstTimestamp", "")), event["metadata"]["name"], "")
            )
            return event, None
        bumped = {
            **event,
            "count": last.count + 1,
            "firstTimestamp": last.first_timestamp,
            "metadata": {**event["metadata"], "name": last.name, "resourceVersion": last.resource_version},
        }
        self.cache.put(
            key, _Observation(last.count + 1, last.first_timestamp, last.name, last.resource_version)
        )
        patch = {
            "count": bumped["count"],
            "lastTimestamp": bumped["lastTimestamp"],
            "message": bumped["message"],
        }
        return bumped, patch

    def update_state(self, event: Mapping[str, Any], key: tuple[str, ...]) -> None:
        """After a successful write: remember the server's name, count and resourceVersion."""
        meta = event.get("metadata") or {}
        self.cache.put(key, _Observation(
            int(event.get("count") or 1),
            str(event.get("firstTimestamp", "")),
            str(meta.get("name", "")),
            str(meta.get("resourceVersion", "")),
        ))  # fmt: skip


@dataclass
class _Bucket:
    tokens: float
    last: float


class SpamFilter:
    """client-go's `EventSourceObjectSpamFilter`: a token bucket per source + object."""

    def __init__(
        self, *, qps: float = DEFAULT_SPAM_QPS, burst: int = DEFAULT_SPAM_BURST, clock: Clock = time.time
    ) -> None:
        self.qps = qps
        self.burst = burst
        self.clock = clock
        self.cache: LRU[tuple[str, ...], _Bucket] = LRU()

    def filter(self, event: Mapping[str, Any]) -> bool:
        """True when the event must be dropped."""
        now = self.clock()
        key = spam_key(event)
        bucket = self.cache.get(key)
        if bucket is None:
            bucket = _Bucket(tokens=float(self.burst), last=now)
        else:
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.last) * self.qps)
            bucket.last = now
        self.cache.put(key, bucket)
        if bucket.tokens < 1.0:
            return True
        bucket.tokens -= 1.0
        return False


@dataclass(frozen=True)
class Correlated:
    event: dict[str, Any]
    key: tuple[str, ...]
    patch: dict[str, Any] | None


class EventCorrelator:
    """Aggregate, then observe, then spam-filter: client-go's `EventCorrelate` order."""

    def __init__(
        self,
        *,
        clock: Clock = time.time,
        spam_qps: float = DEFAULT_SPAM_QPS,
        spam_burst: int = DEFAULT_SPAM_BURST,
    ) -> None:
        self.aggregator = EventAggregator(clock=clock)
        self.logger = EventLogger()
        self.spam = SpamFilter(qps=spam_qps, burst=spam_burst, clock=clock)

    def correlate(self, event: dict[str, Any]) -> Correlated | None:
        aggregated, key = self.aggregator.aggregate(event)
        observed, patch = self.logger.observe(aggregated, key)
        if self.spam.filter(observed):
            return None
        return Correlated(observed, key, patch)


def _log_event(event: Mapping[str, Any]) -> None:
    """Every event as it is recorded, as KCM's controllers' `StartStructuredLogging`: the log says
    what a controller did even when the API server never gets the Event (down, or the spam filter
    dropping it). At debug (`-v 4`), not KCM's V(0): a line costs ~0.1 ms here, and a start on a
    large cluster records an event per node (20,000 `RegisteredNode`), seconds of the shared loop."""
    involved: Mapping[str, Any] = event.get("involvedObject") or {}
    namespace, name = involved.get("namespace"), involved.get("name", "")
    log.debug(
        "Event occurred",
        object=f"{namespace}/{name}" if namespace else name,
        kind=involved.get("kind", ""),
        apiVersion=involved.get("apiVersion", ""),
        type=event.get("type", ""),
        reason=event.get("reason", ""),
        message=event.get("message", ""),
    )


class EventRecorder:
    """What a controller holds: `event(obj, type_, reason, message)`, synchronous and non-blocking."""

    def __init__(self, broadcaster: EventBroadcaster, component: str) -> None:
        self._broadcaster = broadcaster
        self.component = component

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self._broadcaster.submit(self._make(obj, type_, reason, message))

    def _make(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> dict[str, Any]:
        meta: Mapping[str, Any] = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        namespace = str(meta.get("namespace") or "")
        now = self._broadcaster.clock()
        involved = {
            "kind": obj.get("kind", ""),
            "namespace": namespace,
            "name": name,
            "uid": meta.get("uid", ""),
            "apiVersion": obj.get("apiVersion", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        host = self._broadcaster.host
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace or "default"},
            "involvedObject": {k: v for k, v in involved.items() if v},
            "reason": reason,
            "message": message,
            "type": type_,
            "source": {"component": self.component, "host": host},
            "firstTimestamp": format_time(datetime.fromtimestamp(now, UTC)),
            "lastTimestamp": format_time(datetime.fromtimestamp(now, UTC)),
            "count": 1,
            "reportingComponent": self.component,
            "reportingInstance": host,
        }


class EventBroadcaster:
    """Owns the buffer and the one writer task; hands out recorders per component."""

    def __init__(
        self,
        client: KubeClient,
        *,
        host: str | None = None,
        clock: Clock = time.time,
        retry_sleep: float = RETRY_SLEEP,
        max_queued: int = MAX_QUEUED_EVENTS,
    ) -> None:
        self.client = client
        self.host = host or socket.gethostname()
        self.clock = clock
        self.retry_sleep = retry_sleep
        self.correlator = EventCorrelator(clock=clock)
        self.dropped = 0
        send: MemoryObjectSendStream[dict[str, Any]]
        receive: MemoryObjectReceiveStream[dict[str, Any]]
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](max_queued)
        self._send = send
        self._receive = receive

    def recorder(self, component: str) -> EventRecorder:
        return EventRecorder(self, component)

    def submit(self, event: dict[str, Any]) -> None:
        _log_event(event)
        try:
            self._send.send_nowait(event)
        except anyio.WouldBlock:
            self.dropped += 1
            log.warning("event buffer full, dropping event", reason=event.get("reason"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.dropped += 1

    async def run(self) -> None:
        """Write events until cancelled; run it in a task group."""
        async with self._receive:
            async for event in self._receive:
                await self.write(event)

    async def flush(self) -> None:
        """Write whatever is buffered now (for a clean shutdown and for tests)."""
        while True:
            try:
                event = self._receive.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return
            await self.write(event)

    async def write(self, event: dict[str, Any]) -> None:
        result = self.correlator.correlate(event)
        if result is None:
            return
        for attempt in range(MAX_TRIES_PER_EVENT):
            try:
                written = await self._write_once(result)
            except ApiError as exc:
                if exc.status < 500 and not exc.too_many_requests:
                    log.warning(
                        "server rejected event, dropping it",
                        reason=result.event.get("reason"),
                        error=str(exc),
                    )
                    return
                error = str(exc)
            except (aiohttp.ClientError, OSError) as exc:
                error = str(exc)
            else:
                self.correlator.logger.update_state(written, result.key)
                return
            log.debug("unable to write event, retrying", attempt=attempt + 1, error=error)
            await anyio.sleep(self.retry_sleep)
        log.error("unable to write event, giving up", reason=result.event.get("reason"))

    async def _write_once(self, result: Correlated) -> dict[str, Any]:
        event = result.event
        meta = event["metadata"]
        if result.patch is not None:
            try:
                return await self.client.patch(
                    EVENTS, meta["name"], result.patch, namespace=meta["namespace"]
                )
            except ApiError as exc:
                if not exc.not_found:
                    raise
                # The old Event expired server-side: create it afresh (client-go resets the count).
                event = {
                    **event,
                    "count": 1,
                    "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                }
        body = {**event, "metadata": {k: v for k, v in event["metadata"].items() if k != "resourceVersion"}}
        return await self.client.create(EVENTS, body, namespace=meta["namespace"])
