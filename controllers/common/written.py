"""Which cached objects this controller has already overwritten: a cache behind our own writes.

A controller that writes an object and is woken again before its informer has seen that write
reads the version it replaced. A write guarded by that `resourceVersion` is a certain 409 and a
retry, and an unguarded decision made from it may undo what the last sync did. The informer
will deliver our write (or something newer) and wake the key again, so the right move is to
wait for it: `superseded(key, rv)` says the cached copy is one this controller replaced.

An entry lives until the cache shows any other version of the object (ours or a later one), or
until the object is forgotten; it holds a few short strings per object written and not yet seen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _rv(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class WrittenVersions:
    """key -> the resourceVersions our writes replaced since the cache last caught up."""

    def __init__(self) -> None:
        self._replaced: dict[str, set[str]] = {}

    def wrote(self, key: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        """Record that `before` (the copy we wrote over) was replaced by `after` (what the write returned).

        Several writes in one sync each replace the previous one's result; the cache may still
        hold any of them, so all are kept until it shows a version we did not replace."""
        old, new = _rv(before), _rv(after)
        if old and new and old != new:
            self._replaced.setdefault(key, set()).add(old)

    def superseded(self, key: str, cached: Mapping[str, Any]) -> bool:
        """Whether `cached` is a version this controller has already replaced."""
        replaced = self._replaced.get(key)
        if replaced is None:
            return False
        if _rv(cached) in replaced:
            return True
        del self._replaced[key]  # the cache has moved on: our write, or a newer one
        return False

    def forget(self, key: str) -> None:
        self._replaced.pop(key, None)

    def __len__(self) -> int:
        return len(self._replaced)
