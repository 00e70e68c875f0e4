"""When each target pod was deleted, remembered past the moment it leaves the pod cache.

The Active responder gets `GRACEFUL_COMPLETION_DELAY` after its target's deletion to report its
completion before the controller calls the target evicted. The deletion time lives on the pod,
and a pod deleted outright (or whose termination finished) is gone from the cache before the
responder's report arrives: without this record a sync in between would find nothing to wait
for and mark the responder Interrupted instead of Completed. Upstream keeps the same record
(`TerminalTimeCache`).

Entries are needed only for the grace period, so each one is dropped once it is older than a
minute; a manager that runs for weeks keeps at most the deletions of the last minute.
"""

from __future__ import annotations

from datetime import datetime, timedelta

# Far longer than the grace period, so a slow queue still finds the entry.
KEEP_FOR = timedelta(minutes=1)


class TerminalTimes:
    """Deletion times of target pods by UID (the target's identity, as the Eviction names it)."""

    def __init__(self) -> None:
        self._times: dict[str, datetime] = {}

    def record(self, uid: str, when: datetime, now: datetime) -> None:
        if not uid:
            return
        self._times.setdefault(uid, when)
        stale = [u for u, t in self._times.items() if now - t > KEEP_FOR]
        for u in stale:
            del self._times[u]

    def get(self, uid: str) -> datetime | None:
        return self._times.get(uid)
