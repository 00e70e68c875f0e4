"""The admission plugins a default cluster runs that need other objects to decide, and the
quota controller KCM runs beside them.

- LimitRanger (mutating, pods): each container gets the `default` limits and `defaultRequest`
  requests of the namespace's Container limit ranges for what it does not set (annotated
  `kubernetes.io/limit-ranger` as the plugin does), and a pod outside a range's min/max is
  refused with the plugin's 403.
- Priority (mutating, pods): `spec.priority` from `priorityClassName` (or the global default
  class), 403 when the class does not exist.
- ResourceQuota (validating, every namespaced kind): a create that would take a quota's usage
  over its `hard` is refused with the real 403 "exceeded quota: <name>, requested: ..., used:
  ..., limited: ...". Usage is counted from the store at the moment of the create, so two
  creates in a row never both slip under.
- `QuotaController` keeps each quota's `status.hard` and `status.used` in line with the
  namespace's objects (KCM's resourcequota controller), one sync per namespace however many
  objects changed.

Counted: `pods`, `services`, `services.nodeports`, `services.loadbalancers`, `configmaps`,
`secrets`, `persistentvolumeclaims`, `replicationcontrollers`, `resourcequotas`,
`requests.cpu|memory|storage` (and bare `cpu`, `memory`), `limits.cpu|memory`, and
`count/<resource>[.<group>]` for every served kind. Pods in a terminal phase count for nothing.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from decimal import Decimal

from localcluster import errors, quantity
from localcluster.builtin.base import get_path
from localcluster.keyed import KeyedLoop
from localcluster.objects import ObjectAPI
from localcluster.registry import Obj, ResourceType
from localcluster.storage import StoredEvent

LIMIT_RANGER_ANNOTATION = "kubernetes.io/limit-ranger"
_SIMPLE_COUNTS = {
    "pods": "pods",
    "services": "services",
    "configmaps": "configmaps",
    "secrets": "secrets",
    "persistentvolumeclaims": "persistentvolumeclaims",
    "replicationcontrollers": "replicationcontrollers",
    "resourcequotas": "resourcequotas",
}
#: What the controller watches to keep usage current.
WATCHED = (
    "resourcequotas",
    "pods",
    "services",
    "configmaps",
    "secrets",
    "persistentvolumeclaims",
    "replicationcontrollers",
    "jobs.batch",
    "cronjobs.batch",
    "deployments.apps",
    "replicasets.apps",
    "statefulsets.apps",
    "daemonsets.apps",
)


def _containers(pod: Obj) -> list[Obj]:
    return [c for c in get_path(pod, "spec", "containers", default=[]) if isinstance(c, dict)]


def _pod_terminal(pod: Obj) -> bool:
    return get_path(pod, "status", "phase") in ("Succeeded", "Failed")


def _pod_resource(pod: Obj, kind: str, name: str) -> Decimal:
    """Sum over containers, or the largest init container when that is more (`PodRequests`)."""
    total = Decimal(0)
    for c in _containers(pod):
        total += quantity.parse(get_path(c, "resources", kind, name)) or Decimal(0)
    for c in get_path(pod, "spec", "initContainers", default=[]):
        if isinstance(c, dict):
            total = max(total, quantity.parse(get_path(c, "resources", kind, name)) or Decimal(0))
    return total


def object_usage(storage_key: str, obj: Obj, resource: str) -> Decimal:
    """What one object of `storage_key` adds to the quota resource `resource`."""
    if resource.startswith("count/"):
        return Decimal(1) if resource[len("count/") :] == storage_key else Decimal(0)
    if storage_key == "pods":
        if _pod_terminal(obj):
            return Decimal(0)
        if resource == "pods":
            return Decimal(1)
        if resource in ("cpu", "memory", "requests.cpu", "requests.memory"):
            return _pod_resource(obj, "requests", resource.rsplit(".", 1)[-1])
        if resource in ("limits.cpu", "limits.memory"):
            return _pod_resource(obj, "limits", resource.rsplit(".", 1)[-1])
        return Decimal(0)
    if storage_key == "services":
        service_type = get_path(obj, "spec", "type", default="ClusterIP")
        if resource == "services.loadbalancers":
            return Decimal(service_type == "LoadBalancer")
        if resource == "services.nodeports":
            return (
                Decimal(len(get_path(obj, "spec", "ports", default=[])))
                if service_type in ("NodePort", "LoadBalancer")
                else Decimal(0)
            )
    if storage_key == "persistentvolumeclaims" and resource == "requests.storage":
        return quantity.parse(get_path(obj, "spec", "resources", "requests", "storage")) or Decimal(0)
    return Decimal(_SIMPLE_COUNTS.get(resource) == storage_key)


def _storage_keys(resource: str) -> Iterable[str]:
    if resource.startswith("count/"):
        return (resource[len("count/") :],)
    if resource in ("services.nodeports", "services.loadbalancers"):
        return ("services",)
    if resource == "requests.storage":
        return ("persistentvolumeclaims",)
    if resource in ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"):
        return ("pods",)
    key = _SIMPLE_COUNTS.get(resource)
    return (key,) if key else ()


def namespace_usage(objects: ObjectAPI, namespace: str, resources: Iterable[str]) -> dict[str, Decimal]:
    used: dict[str, Decimal] = {}
    for resource in resources:
        total = Decimal(0)
        for key in _storage_keys(resource):
            for entry in objects.storage.iter_entries(key, namespace):
                total += object_usage(key, entry.load(), resource)
        used[resource] = total
    return used


def _quotas(objects: ObjectAPI, namespace: str) -> list[Obj]:
    return [e.load() for e in objects.storage.iter_entries("resourcequotas", namespace)]


#: LimitRanger's per-container bounds: (LimitRange field, container resources section, the
#: section's name in messages, the bound's name, a value out of bounds) - max caps limits, min floors requests.
_CONTAINER_BOUNDS: tuple[tuple[str, str, str, str, Callable[[Decimal, Decimal], bool]], ...] = (
    ("max", "limits", "limit", "maximum", operator.gt),
    ("min", "requests", "request", "minimum", operator.lt),
)


class Admission:
    """Registered on `ObjectAPI` (`mutating_admission`, `validating_admission`) by the cluster."""

    def __init__(self, objects: ObjectAPI) -> None:
        self.objects = objects

    def install(self) -> None:
        self.objects.mutating_admission.append(self.mutate)
        self.objects.validating_admission.append(self.validate)

    # -- mutating -------------------------------------------------------------------------
    def mutate(self, rt: ResourceType, obj: Obj) -> None:
        if rt.storage_key != "pods":
            return
        self._priority(obj)
        self._limit_ranger(obj)

    def _priority(self, pod: Obj) -> None:
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            return
        name = spec.get("priorityClassName")
        if name:
            entry = self.objects.storage.get("priorityclasses.scheduling.k8s.io", "", name)
            if entry is None:
                raise errors.forbidden(
                    "pods", pod["metadata"].get("name", ""), f"no PriorityClass with name {name} was found"
                )
            cls = entry.load()
        else:
            default: Obj | None = next(
                (
                    e.load()
                    for e in self.objects.storage.iter_entries("priorityclasses.scheduling.k8s.io")
                    if b'"globalDefault":true' in e.raw
                ),
                None,
            )
            if default is None:
                return
            cls = default
            spec["priorityClassName"] = cls["metadata"]["name"]
        spec["priority"] = cls.get("value", 0)
        spec["preemptionPolicy"] = cls.get("preemptionPolicy", "PreemptLowerPriority")

    def _limit_ranger(self, pod: Obj) -> None:
        namespace = pod["metadata"].get("namespace", "")
        items = [
            item
            for e in self.objects.storage.iter_entries("limitranges", namespace)
            for item in get_path(e.load(), "spec", "limits", default=[])
            if isinstance(item, dict) and item.get("type") == "Container"
        ]
        if not items:
            return
        notes: list[str] = []
        for c in _containers(pod):
            resources = c.setdefault("resources", {})
            set_requests: list[str] = []
            set_limits: list[str] = []
            for item in items:
                for name, value in (item.get("defaultRequest") or {}).items():
                    requests = resources.setdefault("requests", {})
                    if name not in requests:
                        requests[name] = value
                        set_requests.append(name)
                for name, value in (item.get("default") or {}).items():
                    limits = resources.setdefault("limits", {})
                    if name not in limits:
                        limits[name] = value
                        set_limits.append(name)
            if set_requests:
                notes.append(f"{', '.join(sorted(set_requests))} request for container {c.get('name', '')}")
            if set_limits:
                notes.append(f"{', '.join(sorted(set_limits))} limit for container {c.get('name', '')}")
            self._check_bounds(pod, c, items)
        if notes:
            annotations = pod["metadata"].setdefault("annotations", {}) or {}
            annotations[LIMIT_RANGER_ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)
            pod["metadata"]["annotations"] = annotations

    def _check_bounds(self, pod: Obj, container: Obj, items: list[Obj]) -> None:
        name = pod["metadata"].get("name", "")
        for item in items:
            for bound_key, section, noun, word, beyond in _CONTAINER_BOUNDS:
                for resource, bound in (item.get(bound_key) or {}).items():
                    value = get_path(container, "resources", section, resource)
                    if value is None:
                        raise errors.forbidden(
                            "pods",
                            name,
                            f"{word} {resource} usage per Container is {bound}.  No {noun} is specified",
                        )
                    parsed = quantity.parse(value)
                    if parsed is not None and beyond(parsed, quantity.parse(bound) or Decimal(0)):
                        raise errors.forbidden(
                            "pods",
                            name,
                            f"{word} {resource} usage per Container is {bound}, but {noun} is {value}",
                        )

    # -- validating -----------------------------------------------------------------------
    def validate(self, rt: ResourceType, obj: Obj) -> None:
        namespace = obj["metadata"].get("namespace")
        if not rt.namespaced or not namespace:
            return
        for quota in _quotas(self.objects, namespace):
            hard = get_path(quota, "spec", "hard", default={})
            requested = {r: object_usage(rt.storage_key, obj, r) for r in hard}
            requested = {r: v for r, v in requested.items() if v}
            if not requested:
                continue
            used = namespace_usage(self.objects, namespace, requested)
            over = sorted(
                r for r, v in requested.items() if used[r] + v > (quantity.parse(hard[r]) or Decimal(0))
            )
            if over:
                raise errors.forbidden(
                    rt.group_resource,
                    obj["metadata"].get("name", ""),
                    _exceeded(quota, over, requested, used),
                )


def _exceeded(quota: Obj, over: list[str], requested: dict[str, Decimal], used: dict[str, Decimal]) -> str:
    """The ResourceQuota plugin's message, word for word."""
    hard = get_path(quota, "spec", "hard", default={})

    def show(values: Callable[[str], str]) -> str:
        return ",".join(f"{r}={values(r)}" for r in over)

    return (
        f"exceeded quota: {quota['metadata']['name']}, requested: {show(lambda r: quantity.format_like(requested[r], r))}, "
        f"used: {show(lambda r: quantity.format_like(used[r], r))}, limited: {show(lambda r: str(hard[r]))}"
    )


class QuotaController:
    """KCM's resourcequota controller: `status.hard` from the spec, `status.used` counted."""

    def __init__(self, objects: ObjectAPI) -> None:
        self.objects = objects
        self._rt = objects.registry.require("", "v1", "resourcequotas")
        self.loop: KeyedLoop[str] = KeyedLoop(self.sync)

    async def run(self) -> None:
        await self.loop.watch_and_run(self.objects.storage, [(key, self._on_event) for key in WATCHED])

    def _on_event(self, ev: StoredEvent) -> None:
        if (
            ev.namespace
            and next(iter(self.objects.storage.iter_entries("resourcequotas", ev.namespace)), None)
            is not None
        ):
            self.loop.add(ev.namespace)

    def sync(self, namespace: str) -> float | None:
        for quota in _quotas(self.objects, namespace):
            hard = dict(get_path(quota, "spec", "hard", default={}))
            used = namespace_usage(self.objects, namespace, hard)
            status = {"hard": hard, "used": {r: quantity.format_like(v, r) for r, v in used.items()}}
            if quota.get("status") == status:
                continue
            quota["status"] = status
            try:
                self.objects.update_status(self._rt, namespace, quota["metadata"]["name"], quota)
            except errors.StatusError as exc:
                if exc.code in (404, 409):
                    return 0.05
                raise
        return None
