"""core/v1 Events from the in-process controllers, as client-go's legacy event recorder writes them.

`kubectl describe statefulset web` shows the events KCM's controllers record (SuccessfulCreate,
SuccessfulDelete); the simulated controllers record the same ones. One Event per
(object, reason, message) is kept and its `count` / `lastTimestamp` bumped on repeats, as the
recorder's correlator does, named `<object>.<hex nanoseconds>` as client-go names them. The
kubelet's recorder names its host in `source` and the container in `involvedObject.fieldPath`.

kube-scheduler records through the events.k8s.io API instead (`NewEventRecorder`): seen as a
core/v1 Event that has `eventTime`, `action`, `reportingComponent` / `reportingInstance`, and
neither timestamps, count nor source; `kubectl describe` shows either kind alike.
"""

from __future__ import annotations

import datetime as dt
import socket
import time

from kubeutil.timestamps import format_micro_time
from localcluster import errors
from localcluster.objects import ObjectAPI, now_rfc3339
from localcluster.registry import Obj

#: Repeats of one event kept in memory at most (the correlator's LRU is 4096 entries).
_CACHE_SIZE = 4096


def _involved(obj: Obj, namespace: str, field_path: str) -> Obj:
    meta = obj["metadata"]
    ref = {
        "kind": obj.get("kind"),
        "namespace": namespace,
        "name": meta["name"],
        "uid": meta.get("uid"),
        "apiVersion": obj.get("apiVersion"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    if field_path:
        ref["fieldPath"] = field_path
    return ref


class EventRecorder:
    def __init__(self, objects: ObjectAPI, component: str, *, host: str = "") -> None:
        self.objects = objects
        self.component = component
        self.source = {"component": component, "host": host} if host else {"component": component}
        self._rt = objects.registry.require("", "v1", "events")
        self._seen: dict[
            tuple[str, str, str, str], str
        ] = {}  # (namespace, uid, reason, message) -> event name

    def event(self, obj: Obj, type_: str, reason: str, message: str, *, field_path: str = "") -> None:
        """Record; never raises for an API refusal (a terminating namespace, a race)."""
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        key = (namespace, meta.get("uid", ""), reason, message)
        try:
            name = self._seen.get(key)
            if name is not None and self._bump(namespace, name):
                return
            now = now_rfc3339()
            name = f"{meta['name']}.{time.time_ns():x}"
            self.objects.create(
                self._rt,
                namespace,
                {
                    "metadata": {"name": name, "namespace": namespace},
                    "involvedObject": _involved(obj, namespace, field_path),
                    "reason": reason,
                    "message": message,
                    "source": dict(self.source),
                    "firstTimestamp": now,
                    "lastTimestamp": now,
                    "count": 1,
                    "type": type_,
                    "eventTime": None,
                    "reportingComponent": "",
                    "reportingInstance": "",
                },
            )
        except errors.StatusError:
            return
        if len(self._seen) >= _CACHE_SIZE:
            self._seen.pop(next(iter(self._seen)))
        self._seen[key] = name

    def _bump(self, namespace: str, name: str) -> bool:
        entry = self.objects.storage.get(self._rt.storage_key, namespace, name)
        if entry is None:
            return False
        event = entry.load()
        event["count"] = int(event.get("count") or 1) + 1
        event["lastTimestamp"] = now_rfc3339()
        self.objects.update(self._rt, namespace, name, event)
        return True


class NewEventRecorder:
    """events.k8s.io's recorder as kube-scheduler uses it (`reportingController` is the
    scheduler's name, `reportingInstance` the name and host), one Event per call."""

    def __init__(self, objects: ObjectAPI, controller: str) -> None:
        self.objects = objects
        self.controller = controller
        self.instance = f"{controller}-{socket.gethostname()}"
        self._rt = objects.registry.require("", "v1", "events")

    def eventf(self, regarding: Obj, type_: str, reason: str, action: str, note: str) -> None:
        """Record; never raises for an API refusal (a terminating namespace, a race)."""
        meta = regarding["metadata"]
        namespace = meta.get("namespace") or "default"
        now = dt.datetime.now(dt.UTC)
        try:
            self.objects.create(
                self._rt,
                namespace,
                {
                    "metadata": {"name": f"{meta['name']}.{time.time_ns():x}", "namespace": namespace},
                    "involvedObject": _involved(regarding, namespace, ""),
                    "reason": reason,
                    "message": note,
                    "source": {},
                    "firstTimestamp": None,
                    "lastTimestamp": None,
                    "type": type_,
                    "eventTime": format_micro_time(now),
                    "action": action,
                    "reportingComponent": self.controller,
                    "reportingInstance": self.instance,
                },
            )
        except errors.StatusError:
            return
