"""Controller expectations: the creates and deletes a controller has asked for but not yet seen.

The informer cache lags behind the controller's own writes. Without bookkeeping, a sync that runs
right after creating 10 pods still sees 0 and creates 10 more. As `pkg/controller/controller_utils.go`:
before writing, a sync records how many adds/deletes it expects; the informer handlers lower the
counts as the events arrive; a sync only acts again once they are fulfilled — or once the record is
older than `EXPECTATIONS_TIMEOUT` (5 minutes), so a lost event can never wedge a controller.

`UIDTrackingControllerExpectations` also remembers *which* pods were asked to be deleted, so a delete
event for a pod the controller did not delete (or saw twice, as update-with-deletionTimestamp and
then delete) does not count.

All state is plain dicts touched from one event loop: no locks needed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

EXPECTATIONS_TIMEOUT = 5 * 60.0


@dataclass(slots=True)
class Expectations:
    add: int
    delete: int
    timestamp: float

    def fulfilled(self) -> bool:
        return self.add <= 0 and self.delete <= 0


class ControllerExpectations:
    """Per-controller-key counts of pending creations and deletions, with a TTL."""

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, timeout: float = EXPECTATIONS_TIMEOUT
    ) -> None:
        self._clock = clock
        self._timeout = timeout
        self._store: dict[str, Expectations] = {}

    def get_expectations(self, key: str) -> Expectations | None:
        return self._store.get(key)

    def delete_expectations(self, key: str) -> None:
        self._store.pop(key, None)

    def satisfied_expectations(self, key: str) -> bool:
        """True when the controller may act: no record, all observed, or the record expired."""
        exp = self._store.get(key)
        if exp is None:
            return True
        return exp.fulfilled() or self._clock() - exp.timestamp > self._timeout

    def set_expectations(self, key: str, add: int, delete: int) -> None:
        self._store[key] = Expectations(add, delete, self._clock())

    def expect_creations(self, key: str, adds: int) -> None:
        self.set_expectations(key, adds, 0)

    def expect_deletions(self, key: str, dels: int) -> None:
        self.set_expectations(key, 0, dels)

    def raise_expectations(self, key: str, add: int, delete: int) -> None:
        exp = self._store.get(key)
        if exp is not None:
            exp.add += add
            exp.delete += delete

    def lower_expectations(self, key: str, add: int, delete: int) -> None:
        exp = self._store.get(key)
        if exp is not None:
            exp.add -= add
            exp.delete -= delete

    def creation_observed(self, key: str) -> None:
        self.lower_expectations(key, 1, 0)

    def deletion_observed(self, key: str) -> None:
        self.lower_expectations(key, 0, 1)


class UIDTrackingControllerExpectations:
    """Expectations that also track the keys (`ns/name`) of the pods a controller deletes.

    Wraps a `ControllerExpectations` (as KCM's type embeds the interface) rather than subclassing
    it, because deletions are expected by pod key here, not by count.
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, timeout: float = EXPECTATIONS_TIMEOUT
    ) -> None:
        self.counts = ControllerExpectations(clock=clock, timeout=timeout)
        self._uids: dict[str, set[str]] = {}

    def get_expectations(self, key: str) -> Expectations | None:
        return self.counts.get_expectations(key)

    def satisfied_expectations(self, key: str) -> bool:
        return self.counts.satisfied_expectations(key)

    def expect_creations(self, key: str, adds: int) -> None:
        self.counts.expect_creations(key, adds)

    def creation_observed(self, key: str) -> None:
        self.counts.creation_observed(key)

    def lower_expectations(self, key: str, add: int, delete: int) -> None:
        self.counts.lower_expectations(key, add, delete)

    def raise_expectations(self, key: str, add: int, delete: int) -> None:
        self.counts.raise_expectations(key, add, delete)

    def get_uids(self, key: str) -> set[str] | None:
        return self._uids.get(key)

    def expect_deletions(self, key: str, pod_keys: Iterable[str]) -> None:
        """Expect exactly these pods to be deleted (replaces any earlier record, as KCM)."""
        keys = set(pod_keys)
        self._uids[key] = keys
        self.counts.expect_deletions(key, len(keys))

    def deletion_observed(self, key: str, pod_key: str) -> None:
        """Count a deletion only for a pod this controller asked to delete, and only once."""
        uids = self._uids.get(key)
        if uids is not None and pod_key in uids:
            self.counts.deletion_observed(key)
            uids.discard(pod_key)

    def delete_expectations(self, key: str) -> None:
        self.counts.delete_expectations(key)
        self._uids.pop(key, None)
