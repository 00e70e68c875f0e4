"""Reading an Eviction for one responder, and the JSON patch of that responder's status entry.

An Eviction's `status.targetResponders` (the states the evictionrequest controller assigns) and
`status.responders` (each responder's own report) are lists keyed by name, so a responder writes
its own entry by index: a merge patch would replace the whole list, and a custom resource has no
strategic merge. The `test` operations pin the entry's name and the responder's state, so a stale
cache (the list reordered, the responder no longer Active) fails the write instead of reporting
into someone else's entry or past a cancellation; the sync is then retried from the new version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from evictionapi import names
from kubeutil.timestamps import format_time, parse_time

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Entry:
    """One responder's place on an Eviction: its state and its own status, with their indexes."""

    state: str
    target_index: int
    status: Obj | None  # its `status.responders` entry; None until the controller initialises it
    status_index: int | None

    @property
    def started(self) -> datetime | None:
        return parse_time((self.status or {}).get("startTime"))

    @property
    def heartbeat(self) -> datetime | None:
        return parse_time((self.status or {}).get("heartbeatTime"))

    @property
    def completed(self) -> bool:
        return bool((self.status or {}).get("completionTime"))

    @property
    def message(self) -> str:
        return str((self.status or {}).get("message") or "")


def entry_of(eviction: Obj, responder: str) -> Entry | None:
    """`responder`'s entry on `eviction`; None when the Eviction does not list it."""
    status = eviction.get("status") or {}
    target_index = state = None
    for i, target in enumerate(status.get("targetResponders") or ()):
        if target.get("name") == responder:
            target_index, state = i, str(target.get("state") or "")
            break
    if target_index is None or state is None:
        return None
    for j, own in enumerate(status.get("responders") or ()):
        if own.get("name") == responder:
            return Entry(state, target_index, own, j)
    return Entry(state, target_index, None, None)


def target_pod(eviction: Obj) -> tuple[str, str]:
    """(name, uid) of the pod an Eviction targets; ("", "") for any other target."""
    pod = ((eviction.get("spec") or {}).get("target") or {}).get("pod") or {}
    return str(pod.get("name") or ""), str(pod.get("uid") or "")


def report_ops(
    entry: Entry,
    responder: str,
    *,
    message: str,
    now: datetime,
    heartbeat: bool = True,
    complete: bool = False,
) -> list[dict[str, Any]]:
    """The JSON patch writing `responder`'s message (and heartbeat, and completion) on the Eviction.

    A heartbeat or a completion is written only while the responder is Active, as the API allows;
    a message alone (`heartbeat=False`) is pinned to the state the entry was read in.
    """
    if entry.status_index is None:
        raise ValueError(f"{responder} has no status entry to report in")
    own = f"/status/responders/{entry.status_index}"
    target = f"/status/targetResponders/{entry.target_index}"
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": f"{own}/name", "value": responder},
        {"op": "test", "path": f"{target}/name", "value": responder},
        {"op": "test", "path": f"{target}/state", "value": names.STATE_ACTIVE if heartbeat else entry.state},
    ]
    stamp = format_time(now)
    if heartbeat or complete:
        ops.append({"op": "add", "path": f"{own}/heartbeatTime", "value": stamp})
    ops.append({"op": "add", "path": f"{own}/message", "value": message[: names.MAX_MESSAGE_LENGTH]})
    if complete:
        ops.append({"op": "add", "path": f"{own}/completionTime", "value": stamp})
    return ops
