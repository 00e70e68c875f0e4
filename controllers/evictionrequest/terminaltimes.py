"""When this controller saw each target pod's deletion, by its own clock, past the pod's removal.

The Active responder gets `GRACEFUL_COMPLETION_DELAY` after its target's deletion to report its
completion before the controller calls the target evicted. Two things the pod alone cannot say:

- a pod deleted outright (or whose termination finished) is gone from the cache before the
  responder's report arrives; without a record a sync in between would find nothing to wait for
  and mark the responder Interrupted instead of Completed (upstream keeps the same record, its
  `TerminalTimeCache`);
- the pod's `deletionTimestamp` is the API server's clock, the grace this controller's: a
  manager whose clock runs ahead of the server's would give no grace at all. The grace runs from
  the later of the two, so skew only ever lengthens it.

Each observation replaces the last: the deletion seen starting, then the pod seen gone (which is
when a responder that waits for it, as the imperative evictor does, can report).

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
        self._times[uid] = when
        stale = [u for u, t in self._times.items() if now - t > KEEP_FOR]
        for u in stale:
            del self._times[u]

    def get(self, uid: str) -> datetime | None:
        return self._times.get(uid)
