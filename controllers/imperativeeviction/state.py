"""When each pod's last `/eviction` call failed: the one thing the handlers and the reconcile share.

Upstream keeps this in memory too (`lastEvictionAttempts`), keyed by pod UID: the attempt count
is in the responder's message on the API server, so a restart loses only the time of the last
failure and tries once at once. An entry goes when the pod is evicted, terminates, is deleted,
or its Eviction is deleted.
"""

from __future__ import annotations

from datetime import datetime


class LastEvictionAttempts:
    """Pod UID -> the time of its last failed `/eviction` call."""

    __slots__ = ("_attempts",)

    def __init__(self) -> None:
        self._attempts: dict[str, datetime] = {}

    def set(self, uid: str, when: datetime) -> None:
        self._attempts[uid] = when

    def remove(self, uid: str) -> None:
        self._attempts.pop(uid, None)

    def get(self, uid: str) -> datetime | None:
        return self._attempts.get(uid)

    def __len__(self) -> int:
        return len(self._attempts)
