"""The imperative evictor's decisions, without I/O: which Evictions are its, what to say, when to look again.

Everything here is upstream's `utils.go` and the decision half of its `sync`
(`pkg/controller/imperativeevictionresponder`), on plain dicts:

- `should_handle` / `label_changed` / `target_responder` / `responder_status`: which Evictions
  name this responder, and its entries in `status.targetResponders` and `status.responders`;
- `exponential_backoff` and `recorded_attempts`: the retry schedule (5 s doubling to 10 min) and
  the attempt count, which lives in the responder's own message (`(attempts=N)`) so a restarted
  manager resumes counting where the status says it was;
- `assess`: what the target pod's state means (done, terminating, or still to evict);
- `after_failure` (with `failed_message`), `evicted_message` and `suggested_delay`: how an `/eviction` call's answer is
  reported and how long its server asks us to wait;
- `status_update`: whether the responder entry needs a write (a heartbeat every 3 min at least,
  or a change) and the entry to write.

The message texts are upstream's byte for byte, its doubled "been" included, because users and
other responders match on them (upstream itself reads "marked for deletion via the /eviction
subresource" back from its previous message).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from apiclient import ApiError
from controllers.common.pods import is_pod_terminal, is_terminating
from evictionapi import names
from kubeutil.timestamps import format_time, parse_time

Obj = Mapping[str, Any]

# Upstream's timings: the first retry after 5 s, doubling to 10 min, and a heartbeat at least
# every 3 min (the evictionrequest controller passes over a responder silent for 20 min).
MIN_BACKOFF = 5.0
MAX_BACKOFF = 10 * 60.0
HEARTBEAT_INTERVAL = 3 * 60.0

MAX_UINT64 = 2**64 - 1
_ATTEMPTS = re.compile(r"\(attempts=(\d+)\)")
_EVICTED_VIA_SUBRESOURCE = "pod has been been marked for deletion via the /eviction subresource"
_RESPONDER_ROLES = (names.ROLE_RESPONDER, names.ROLE_REQUESTER_RESPONDER)
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


def _q(value: str) -> str:
    """Go's `%q` for the names and phases quoted in messages (printable text: a JSON string)."""
    return json.dumps(value, ensure_ascii=False)


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def target_pod(eviction: Obj) -> Obj | None:
    """`spec.target.pod` ({name, uid}), or None for a target that is not a pod."""
    pod = ((eviction.get("spec") or {}).get("target") or {}).get("pod")
    return pod if isinstance(pod, Mapping) else None


def should_handle(eviction: Obj) -> bool:
    """The Eviction targets a pod and labels this responder as one (`responder` or `requester-responder`).

    Upstream's `shouldHandleEviction` also tests the Failed and TargetEvicted conditions, after a
    `return true` for both roles, so that test never decides anything; what stops the evictor on
    a finished Eviction is its state no longer being Active. Kept as it behaves.
    """
    if target_pod(eviction) is None:
        return False
    return (_meta(eviction).get("labels") or {}).get(names.IMPERATIVE_EVICTOR) in _RESPONDER_ROLES


def label_changed(old: Obj, new: Obj, key: str) -> bool:
    """The label `key` was added, removed or changed (upstream's `hasLabelChanged`)."""
    old_labels = _meta(old).get("labels") or {}
    new_labels = _meta(new).get("labels") or {}
    return (key in old_labels) != (key in new_labels) or old_labels.get(key) != new_labels.get(key)


def _named(entries: object, name: str) -> Obj | None:
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            return entry
    return None


def target_responder(eviction: Obj) -> Obj | None:
    """This responder's `status.targetResponders[]` entry (its priority and the state assigned to it)."""
    return _named(_status(eviction).get("targetResponders"), names.IMPERATIVE_EVICTOR)


def responder_status(eviction: Obj) -> Obj | None:
    """This responder's `status.responders[]` entry: the one it writes."""
    return _named(_status(eviction).get("responders"), names.IMPERATIVE_EVICTOR)


def responder_index(eviction: Obj) -> int | None:
    """Where that entry sits in the list (the path a JSON patch of it names)."""
    entries = _status(eviction).get("responders")
    if not isinstance(entries, list):
        return None
    for i, entry in enumerate(entries):
        if isinstance(entry, Mapping) and entry.get("name") == names.IMPERATIVE_EVICTOR:
            return i
    return None


def exponential_backoff(base: float, maximum: float, exponent: int) -> float:
    """`base * 2**exponent` seconds, capped at `maximum` (an overflowing power is the maximum)."""
    try:
        backoff = base * 2.0**exponent
    except OverflowError:
        return maximum
    return min(backoff, maximum)


def recorded_attempts(message: str) -> int:
    """The failed `/eviction` calls counted in the last message, `(attempts=N)`; 0 when absent or
    not a uint64 (upstream parses it as one)."""
    match = _ATTEMPTS.search(message)
    if match is None:
        return 0
    attempts = int(match.group(1))
    return attempts if attempts <= MAX_UINT64 else 0


def wait_before_retry(message: str, last_attempt: datetime, now: datetime) -> float:
    """Seconds still to wait after the failed attempt at `last_attempt` (<= 0: retry now).

    The first retry waits 5 s, and each further one twice as long as the one before, which is
    why the recorded count is lowered by one: the message already counts the failure being
    backed off from.
    """
    attempts = recorded_attempts(message)
    if attempts > 0:
        attempts -= 1
    due = last_attempt + timedelta(seconds=exponential_backoff(MIN_BACKOFF, MAX_BACKOFF, attempts))
    return (due - now).total_seconds()


def error_message(exc: BaseException) -> str:
    """What Go prints for the call's error: the Status message for an API refusal."""
    if isinstance(exc, ApiError):
        return exc.message
    return str(exc) or type(exc).__name__


def suggested_delay(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (client-go's `SuggestsClientDelay`), or None."""
    if not isinstance(exc, ApiError) or not isinstance(exc.body.get("details"), Mapping):
        return None
    seconds = exc.retry_after_seconds or 0.0
    if exc.reason == "ServerTimeout":
        return float(int(seconds))
    return float(int(seconds)) if seconds > 0 else None


def after_failure(pod_name: str, last_message: str, exc: BaseException) -> tuple[str, float]:
    """The message reporting a failed `/eviction` call and the seconds until the next try.

    The wait grows with the attempts before this one; the server's suggested delay wins when it
    is longer. The count wraps at 2**64 as upstream's uint64 does.
    """
    old_attempts = recorded_attempts(last_message)
    wait = exponential_backoff(MIN_BACKOFF, MAX_BACKOFF, old_attempts)
    delay = suggested_delay(exc)
    if delay is not None and wait < delay:
        wait = delay
    attempts = (old_attempts + 1) & MAX_UINT64
    return failed_message(pod_name, attempts, error_message(exc)), wait


def failed_message(pod_name: str, attempts: int, error: str) -> str:
    return f"{_q(pod_name)} pod deletion via the /eviction subresource failed (attempts={attempts}): {error}"


def evicted_message(pod_name: str) -> str:
    return (
        f"{_q(pod_name)} pod has been been marked for deletion via the /eviction subresource "
        "and will be terminated gracefully"
    )


@dataclass(frozen=True, slots=True)
class Assessment:
    """What the target pod's state says, before any call: done, waiting, or evict now."""

    completed: bool = False
    message: str = ""
    expected_completion: datetime | None = None
    requeue_after: float | None = None
    evict: bool = False


def assess(target: Obj, pod: Obj | None, last_message: str) -> Assessment:
    """Upstream's `sync` switch, in its order: gone (or replaced under the same name), deleted and
    terminal, terminating, terminal, else evict (but never a mirror or DaemonSet pod). A terminating pod is never evicted again: its
    deletion is reported with the time it is due, and looked at again at the next heartbeat."""
    name = str(target.get("name", ""))
    if pod is None or _meta(pod).get("uid") != target.get("uid"):
        return Assessment(completed=True, message=f"{_q(name)} pod has been deleted and fully terminated")
    pod_name = str(_meta(pod).get("name", ""))
    phase = str(_status(pod).get("phase", ""))
    if is_terminating(pod) and is_pod_terminal(pod):
        return Assessment(
            completed=True,
            message=f"{_q(pod_name)} pod has been deleted and fully terminated (pod phase={_q(phase)})",
        )
    if is_terminating(pod):
        via = " via the /eviction subresource" if _EVICTED_VIA_SUBRESOURCE in last_message else ""
        return Assessment(
            message=f"{_q(pod_name)} pod has been been marked for deletion{via} and is being terminated gracefully",
            expected_completion=parse_time(_meta(pod).get("deletionTimestamp")),
            requeue_after=HEARTBEAT_INTERVAL,
        )
    if is_pod_terminal(pod):
        return Assessment(
            completed=True, message=f"{_q(pod_name)} pod has been fully terminated (pod phase={_q(phase)})"
        )
    left_alone = left_alone_because(pod)
    if left_alone:
        return Assessment(completed=True, message=f"{_q(pod_name)} pod is not evicted: {left_alone}")
    return Assessment(evict=True)


def left_alone_because(pod: Obj) -> str:
    """Why the evictor leaves `pod` alone ("" to evict it): a mirror pod or a DaemonSet's pod.

    Evicting either achieves nothing and costs something: the kubelet recreates a static pod's
    mirror at once, and a DaemonSet's controller puts its pod straight back on the node (it
    tolerates `unschedulable`), after a gap in whatever the daemon serves. `kubectl drain` skips
    both for the same reason. The evictor completes instead, so the Eviction fails with the
    reason in this responder's message rather than evicting in a loop.
    """
    meta = _meta(pod)
    if MIRROR_POD_ANNOTATION in (meta.get("annotations") or {}):
        return "it is a mirror pod; the kubelet owns its static pod"
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == "DaemonSet":
            return f"it is managed by DaemonSet {_q(str(ref.get('name', '')))}, which would put it back"
    return ""


def responder_entry(last: Obj, message: str) -> dict[str, Any]:
    """The entry as last written, with `message` (upstream's `toResponderStatusApplyConfiguration`
    and `WithMessage`): every time already set is kept, so a write never unsets one."""
    entry: dict[str, Any] = {"name": last.get("name")}
    for field in ("startTime", "heartbeatTime", "expectedCompletionTime", "completionTime"):
        if last.get(field):
            entry[field] = last[field]
    entry["message"] = message
    return entry


def status_update(
    last: Obj,
    *,
    message: str,
    completed: bool,
    expected_completion: datetime | None,
    now: datetime,
) -> dict[str, Any] | None:
    """The responder entry to write, or None when the last one still stands.

    A write is due for a heartbeat older than 3 min (less a second of slack, so a requeue that
    fires a little early still beats), a new expected completion, the completion, or a new
    message; any write carries a fresh heartbeat. The expected completion may not lie in the
    past (the API refuses it), and the message is cut to the API's 4000 characters.
    """
    if expected_completion is not None and expected_completion < now:
        expected_completion = now
    message = message[: names.MAX_MESSAGE_LENGTH]
    heartbeat = parse_time(last.get("heartbeatTime"))
    stale = heartbeat is None or heartbeat < now - timedelta(seconds=HEARTBEAT_INTERVAL - 1)
    new_expected = expected_completion is not None and format_time(expected_completion) != last.get(
        "expectedCompletionTime"
    )
    complete = completed and not last.get("completionTime")
    if not (stale or new_expected or complete or str(last.get("message") or "") != message):
        return None
    entry = responder_entry(last, message)
    entry["heartbeatTime"] = format_time(now)
    if new_expected and expected_completion is not None:
        entry["expectedCompletionTime"] = format_time(expected_completion)
    if complete:
        entry["expectedCompletionTime"] = format_time(now)
        entry["completionTime"] = format_time(now)
    return entry
