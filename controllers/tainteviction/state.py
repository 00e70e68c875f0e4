"""The scheduled deletions, shared by the pass that judges pods and the one that deletes them.

A schedule is kept with the loop time it is due and the UID it was made for: the judging pass must
never postpone a deletion already scheduled (its start is the first time the pod was found
tainted), and the deleting pass must never delete a pod recreated under the same name.

Events name the pod as KCM's do: an `ObjectReference` of kind `Pod` by namespace and name only,
so a deletion can be announced (or its cancellation, once the pod is gone) without the object.
"""

from __future__ import annotations

from typing import Any

from controllers.context import EventRecorder
from workqueue import TimedWorkerQueue

EVENT_REASON = "TaintManagerEviction"


def pod_reference(key: str) -> dict[str, Any]:
    """The involved object of KCM's taint-manager events: `v1` `Pod` by namespace and name."""
    namespace, _, name = key.rpartition("/")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": namespace, "name": name}}


class EvictionSchedule:
    """Pod key -> when its deletion is due (loop time) and for which UID, beside the timer queue."""

    def __init__(self, evictions: TimedWorkerQueue[str], recorder: EventRecorder) -> None:
        self.evictions = evictions
        self.recorder = recorder
        # Loop time each pod's deletion is (or was) due, for the latency histogram; and the UID
        # it was scheduled for, so a pod recreated under the same name is judged afresh.
        self.due_at: dict[str, float] = {}
        self.due_uid: dict[str, str] = {}

    def add(self, key: str, created_at: float, fire_at: float, uid: str) -> None:
        if key in self.due_at:
            return
        self.due_at[key] = fire_at
        self.due_uid[key] = uid
        self.evictions.add_work(key, created_at=created_at, fire_at=fire_at)

    def cancel_key(self, key: str, *, event: bool = True) -> None:
        """`cancelWorkWithEvent`: drop the schedule; the event only if a timer was still pending.

        A deletion that fired at once, or already ran, has no timer to cancel: no event, as KCM.
        """
        self.due_at.pop(key, None)
        self.due_uid.pop(key, None)
        removed = self.evictions.cancel_work(key)
        if event and removed:
            self.recorder.event(
                pod_reference(key), "Normal", EVENT_REASON, f"Cancelling deletion of Pod {key}"
            )

    def scheduled(self, key: str) -> float | None:
        """The loop time `key`'s deletion is due at, if one is scheduled (for tests and the bench)."""
        return self.due_at.get(key)

    def forget(self, key: str) -> None:
        """Retries ran out: forget the schedule, so the pod's next update or its node's judges it afresh."""
        self.due_at.pop(key, None)
        self.due_uid.pop(key, None)
