"""What the handlers and the create reconcile share: the nodes whose lease is still to be made.

The handlers add a node when they find its lease missing; the create reconcile settles it once
the lease exists (made here, or by a holder first) or the node is gone, and the worker gives it
up when its retries are spent (the next event about the node adds it again). The count settled since
the backlog was last empty, against what is left, is the progress the controller logs
("created N of M missing maintenance leases") and `aiokcm_maintenance_leases_missing` reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PROGRESS_EVERY = 100  # a progress line every this many settled nodes (10 s at the default pace)


@dataclass(frozen=True, slots=True)
class Progress:
    """Where the creation stands: `created` of `missing` (since the backlog was last empty)."""

    created: int
    missing: int
    skipped: int  # settled without a create: made by a holder first, or the node went away
    failed: int  # given up after the worker's retries
    finished: bool  # nothing left to make


@dataclass
class Backlog:
    """The nodes whose lease is to be made, and how many were settled since it was last empty."""

    pending: set[str] = field(default_factory=set)
    created: int = 0
    skipped: int = 0
    failed: int = 0

    def __len__(self) -> int:
        return len(self.pending)

    def add(self, node: str) -> bool:
        """Note `node` as missing its lease; False if it already was."""
        if node in self.pending:
            return False
        self.pending.add(node)
        return True

    def settle(self, node: str, *, created: bool) -> Progress | None:
        """`node` needs nothing more; the progress to log now (every `PROGRESS_EVERY`, and the last)."""
        if node not in self.pending:
            return None
        if created:
            self.created += 1
        else:
            self.skipped += 1
        return self._done(node)

    def give_up(self, node: str) -> Progress | None:
        """The worker dropped `node` (its retries spent): no longer counted as pending."""
        if node not in self.pending:
            return None
        self.failed += 1
        return self._done(node)

    def _done(self, node: str) -> Progress | None:
        self.pending.discard(node)
        settled = self.created + self.skipped + self.failed
        progress = Progress(
            created=self.created,
            missing=settled + len(self.pending),
            skipped=self.skipped,
            failed=self.failed,
            finished=not self.pending,
        )
        if progress.finished:
            self.created = self.skipped = self.failed = 0
        elif settled % PROGRESS_EVERY:
            return None
        return progress
