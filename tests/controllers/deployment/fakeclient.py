"""An in-memory client and event recorder for driving `DeploymentSync` without a server.

The counterpart of client-go's `fake.Clientset` in KCM's Deployment tests: every call is
recorded as an `Action` (verb, resource, name, subresource, body) so a test can check what the
controller wrote, and the objects it holds answer GETs and merge PATCHes. Objects the client was
not seeded with are created on their first PATCH, as the Go fake answers an update of an object
it never stored with the object sent.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any, cast

from apiclient import ApiError, KubeClient
from apiclient.resources import REPLICASETS, Resource
from controllers.deployment.sync import DeploymentSync

Obj = dict[str, Any]


@dataclass
class Action:
    verb: str
    resource: str
    name: str
    subresource: str | None = None
    body: Any = None


def _merge(target: Obj, patch: Obj) -> Obj:
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass
class FakeClient:
    objects: dict[tuple[str, str, str], Obj] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    # Writes of these (resource plural, name) fail with a 500, as a reactor returning an error.
    failing: set[tuple[str, str]] = field(default_factory=set)
    _rv: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

    def add(self, res: Resource, obj: Obj) -> None:
        m = obj.get("metadata") or {}
        self.objects[(res.plural, str(m.get("namespace") or ""), str(m.get("name")))] = copy.deepcopy(obj)

    def _fail_if_asked(self, res: Resource, name: str, method: str) -> None:
        if (res.plural, name) in self.failing:
            raise ApiError(500, {"reason": "InternalError", "message": "injected"}, method=method, path=name)

    def _stamp(self, obj: Obj) -> Obj:
        obj.setdefault("metadata", {})["resourceVersion"] = str(next(self._rv))
        return obj

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        **_: Any,
    ) -> Obj:
        self.actions.append(Action("patch", res.plural, name, subresource, copy.deepcopy(patch)))
        self._fail_if_asked(res, name, "PATCH")
        key = (res.plural, namespace or "", name)
        current = self.objects.get(key) or {"metadata": {"name": name, "namespace": namespace}}
        if isinstance(patch, dict):
            body = {k: v for k, v in patch.items() if k != "metadata"}
            meta = {k: v for k, v in (patch.get("metadata") or {}).items() if k != "resourceVersion"}
            updated = _merge(current, {**body, "metadata": meta})
        else:  # a JSON patch: only the operations the rollback sends
            updated = copy.deepcopy(current)
            for op in patch:
                path = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
                if op["op"] == "test":
                    continue
                parent = updated
                for part in path[:-1]:
                    parent = parent.setdefault(part, {})
                if op["op"] == "remove":
                    parent.pop(path[-1], None)
                else:
                    parent[path[-1]] = copy.deepcopy(op["value"])
        self.objects[key] = self._stamp(updated)
        return copy.deepcopy(updated)

    async def create(self, res: Resource, body: Obj, *, namespace: str | None = None, **_: Any) -> Obj:
        name = str(body["metadata"]["name"])
        self.actions.append(Action("create", res.plural, name, None, copy.deepcopy(body)))
        self._fail_if_asked(res, name, "POST")
        key = (res.plural, namespace or "", name)
        if key in self.objects:
            raise ApiError(409, {"reason": "AlreadyExists"}, method="POST", path=name)
        created = copy.deepcopy(body)
        created["metadata"].setdefault("uid", f"{name}-uid")
        self.objects[key] = self._stamp(created)
        return copy.deepcopy(created)

    async def get(self, res: Resource, name: str, *, namespace: str | None = None, **_: Any) -> Obj:
        self.actions.append(Action("get", res.plural, name))
        found = self.objects.get((res.plural, namespace or "", name))
        if found is None:
            raise ApiError(404, {"reason": "NotFound"}, method="GET", path=name)
        return copy.deepcopy(found)

    async def delete(self, res: Resource, name: str, *, namespace: str | None = None, **_: Any) -> Obj:
        self.actions.append(Action("delete", res.plural, name))
        self._fail_if_asked(res, name, "DELETE")
        if self.objects.pop((res.plural, namespace or "", name), None) is None:
            raise ApiError(404, {"reason": "NotFound"}, method="DELETE", path=name)
        return {}

    # -- what the tests read ---------------------------------------------------------------

    def writes(self) -> list[Action]:
        return [a for a in self.actions if a.verb in ("patch", "create", "delete")]

    def scaled(self) -> dict[str, int]:
        """ReplicaSet name -> the `spec.replicas` of its last successful PATCH."""
        out: dict[str, int] = {}
        for a in self.actions:
            if (
                a.verb == "patch"
                and a.resource == REPLICASETS.plural
                and (a.resource, a.name) not in self.failing
            ):
                replicas = ((a.body or {}).get("spec") or {}).get("replicas")
                if replicas is not None:
                    out[a.name] = int(replicas)
        return out

    def deleted(self) -> list[str]:
        return [a.name for a in self.actions if a.verb == "delete"]


@dataclass
class Event:
    object_name: str
    type: str
    reason: str
    message: str


@dataclass
class FakeRecorder:
    events: list[Event] = field(default_factory=list)

    def event(self, obj: Any, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(str((obj.get("metadata") or {}).get("name")), type_, reason, message))


@dataclass
class Harness:
    client: FakeClient
    recorder: FakeRecorder
    sync: DeploymentSync
    requeued: list[float]


def harness(*, client: FakeClient | None = None) -> Harness:
    """A `DeploymentSync` over a fake client; `requeued` collects the delays it asks for."""
    fake = client or FakeClient()
    recorder = FakeRecorder()
    requeued: list[float] = []
    s = DeploymentSync(
        cast(KubeClient, fake), recorder, requeue_after=lambda _d, seconds: requeued.append(seconds)
    )
    return Harness(fake, recorder, s, requeued)
