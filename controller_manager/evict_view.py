"""What `aiokcm evict` shows and decides, from the objects it watches: no I/O here.

One pod's progress is read from two objects: its EvictionRequest (ours, with the conditions the
evictionrequest controller copies onto it) and the pod's Eviction (shared by every requester of
the pod, with the responders' states and messages). A pod is done when `TargetEvicted` is True
(evicted) or `Failed` is True, or when our request disappears (someone deleted it: nothing
tracks the eviction for us any more). The command prints a line for a pod only when what the line
says changes, so a responder's progress messages show and its heartbeats do not.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evictionapi import names, requests

Obj = Mapping[str, Any]

EXIT_EVICTED = 0
EXIT_FAILED = 1

PHASE_REQUESTED = "Requested"  # our request exists; no Eviction for the pod yet
PHASE_EVICTING = "Evicting"  # the Eviction exists; its responders are at work
PHASE_EVICTED = "Evicted"
PHASE_FAILED = "Failed"
PHASE_WITHDRAWN = "Withdrawn"  # our request says Withdrawn (someone changed it), not settled yet
PHASE_DELETED = "RequestDeleted"  # our request is gone before it settled

FINAL_PHASES = frozenset({PHASE_EVICTED, PHASE_FAILED, PHASE_DELETED})


@dataclass(frozen=True, slots=True)
class Target:
    """A pod the command asked to evict, and the name of the request it made for it."""

    namespace: str
    name: str
    uid: str
    request: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PodProgress:
    """One pod as the command reports it."""

    key: str
    phase: str
    responder: str = ""  # the Active responder, else the last one that ran
    state: str = ""  # that responder's state
    message: str = ""  # its message, or the deciding condition's
    expected: str = ""  # its expectedCompletionTime, when it gave one

    @property
    def final(self) -> bool:
        return self.phase in FINAL_PHASES

    @property
    def evicted(self) -> bool:
        return self.phase == PHASE_EVICTED

    def line(self) -> str:
        """`ns/pod: <phase>[, <responder> <state>][ (expected by T)][: message]`."""
        text = f"{self.key}: {self.phase}"
        if self.responder:
            text += f", {self.responder} {self.state}".rstrip()
        if self.expected:
            text += f" (expected by {self.expected})"
        if self.message:
            text += f": {self.message}"
        return text


def eviction_for(evictions: Iterable[Obj], target: Target) -> Obj | None:
    """The Eviction of `target`'s pod: same namespace and the pod's UID (names are not to be relied on)."""
    for ev in evictions:
        if str((ev.get("metadata") or {}).get("namespace") or "") != target.namespace:
            continue
        pod = requests.target_pod_of(ev)
        if pod is not None and pod[0] == target.name and pod[1] == target.uid:
            return ev
    return None


def _message(type_: str, *objs: Obj | None) -> str:
    """The message (else the reason) of the first of `objs` whose `type_` condition is True."""
    for obj in objs:
        cond = requests.condition(obj, type_)
        if cond is not None and cond.get("status") == "True":
            return str(cond.get("message") or cond.get("reason") or "")
    return ""


def _current_responder(eviction: Obj | None) -> tuple[str, str]:
    """The Active responder, else the last one that left Inactive: who is (or was last) at work."""
    targets = requests.target_responders_of(eviction)
    for entry in targets:
        if entry.get("state") == names.STATE_ACTIVE:
            return str(entry.get("name") or ""), names.STATE_ACTIVE
    ran = [t for t in targets if t.get("state") not in (None, "", names.STATE_INACTIVE)]
    if ran:
        return str(ran[-1].get("name") or ""), str(ran[-1].get("state") or "")
    return "", ""


def progress(target: Target, request: Obj | None, eviction: Obj | None, *, seen: bool = True) -> PodProgress:
    """`target`'s progress from its request (None: not there) and its pod's Eviction (None: not yet).

    `seen` says whether the request was ever seen: a request not yet in the watch's first list is
    just created, not deleted.
    """
    if request is None:
        if seen:
            return PodProgress(target.key, PHASE_DELETED, message="the eviction request was deleted")
        return PodProgress(target.key, PHASE_REQUESTED)
    responder, state = _current_responder(eviction)
    status = requests.responder_status(eviction, responder) if responder else None
    message = str((status or {}).get("message") or "")
    expected = str((status or {}).get("expectedCompletionTime") or "") if state == names.STATE_ACTIVE else ""
    # The request's conditions are copied from the Eviction; either one settles the pod.
    if requests.target_evicted(request) or requests.target_evicted(eviction):
        why = _message(names.CONDITION_TARGET_EVICTED, request, eviction)
        return PodProgress(target.key, PHASE_EVICTED, responder, state, why)
    if requests.failed(request) or requests.failed(eviction):
        why = _message(names.CONDITION_FAILED, request, eviction)
        if message and message not in why:
            why = f"{why} (last from {responder}: {message})" if why else message
        return PodProgress(target.key, PHASE_FAILED, responder, state, why)
    if not requests.wants_eviction(request):
        return PodProgress(target.key, PHASE_WITHDRAWN, responder, state, message)
    if eviction is None:
        return PodProgress(target.key, PHASE_REQUESTED)
    return PodProgress(target.key, PHASE_EVICTING, responder, state, message, expected)


def exit_code(progresses: Sequence[PodProgress]) -> int:
    """0 when every pod was evicted, 1 otherwise (failed, deleted, or not done: a timeout)."""
    return EXIT_EVICTED if progresses and all(p.evicted for p in progresses) else EXIT_FAILED


def all_final(progresses: Sequence[PodProgress]) -> bool:
    return all(p.final for p in progresses)


def timeout_hint(p: PodProgress) -> str:
    """What a pod still waiting at the timeout is waiting for, in a sentence."""
    if p.phase == PHASE_REQUESTED:
        return (
            f"{p.key}: no Eviction was made for its request; is the evictionrequest controller "
            "running (feature gate EvictionRequestAPI)?"
        )
    return f"{p.key}: still {p.line().split(': ', 1)[1]}"


class Printer:
    """Remembers the last line printed for each pod; `changed` returns the lines that differ."""

    def __init__(self) -> None:
        self._last: dict[str, str] = {}

    def changed(self, progresses: Iterable[PodProgress]) -> list[str]:
        out = []
        for p in progresses:
            line = p.line()
            if self._last.get(p.key) != line:
                self._last[p.key] = line
                out.append(line)
        return out
