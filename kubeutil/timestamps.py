"""Kubernetes timestamps as aware datetimes: `metav1.Time` and `metav1.MicroTime`, RFC 3339 in UTC.

Controllers compare `lastTransitionTime`s and `creationTimestamp`s against "now", the lease code
reads and writes `renewTime`s, the local cluster stamps what it stores; one parser and one
formatter per precision keep them all agreeing on the wire format. `metav1.Time` has whole
seconds (`2024-05-01T10:00:00Z`); `metav1.MicroTime` (Lease times, `Event.eventTime`) has
microseconds (`2024-05-01T10:00:00.000000Z`). A field keeps the precision its type has.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache


def utcnow() -> datetime:
    """Wall-clock now in UTC (what `metav1.Now()` gives KCM)."""
    return datetime.now(UTC)


def parse_time(value: object) -> datetime | None:
    """Parse an RFC 3339 timestamp; None (Go's zero time) for a missing or unparsable value.

    Takes any JSON value, since a status written by someone else may hold anything there.
    """
    if not isinstance(value, str) or not value:
        return None
    return _parse_time(value)


@lru_cache(maxsize=65536)
def _parse_time(value: str) -> datetime | None:
    """Cached: the same few thousand timestamps are parsed again on every sync of a large ReplicaSet."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def format_time(value: datetime) -> str:
    """A `metav1.Time` as the API server writes it: UTC, whole seconds, a trailing `Z`."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(value: datetime) -> str:
    """A `metav1.MicroTime` as the API server writes it: UTC, six fractional digits, a trailing `Z`."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
