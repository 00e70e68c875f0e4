"""From a pod's controller reference to the controller's scale: KCM's `finders()`, in its order.

1. ReplicationController (core group);
2. Deployment — a ReplicaSet (`apps` or `extensions`) that is itself controlled by a Deployment
   counts as that Deployment (a rollout's two ReplicaSets are one controller of `spec.replicas`);
3. ReplicaSet not controlled by a Deployment;
4. StatefulSet;
5. anything else with a `/scale` subresource: discovery maps the reference's kind to its resource
   and `GET <resource>/<name>/scale` reads `spec.replicas`. A 404 means the object is gone (no
   controller) if the resource serves `/scale` (kind `Scale`), and an error if it does not.

The first four read the informers' caches; a reference to a missing object, or to a namesake with
another UID, finds nothing. A malformed `apiVersion` is an error, as `schema.ParseGroupVersion`'s.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from apiclient import ApiError, KubeClient
from controllers.common.controller_ref import get_controller_of
from controllers.disruption.budget import BudgetError, ControllerScale

Obj = Mapping[str, Any]

#: Group/versions of the `Scale` kind a scale client can read (`scale.NewScaleConverter().ScaleVersions()`).
_SCALE_VERSIONS = frozenset(
    {("autoscaling", "v1"), ("extensions", "v1beta1"), ("apps", "v1beta1"), ("apps", "v1beta2")}
)
_DISCOVERY_TTL = 30.0


class _Getter(Protocol):
    def get(self, name: str, namespace: str | None = None) -> dict[str, Any] | None: ...


def parse_group_version(api_version: str) -> tuple[str, str]:
    """`schema.ParseGroupVersion`: "" and "v1" are the core group, "g/v" a group; more slashes are an error."""
    if not api_version or api_version == "/":
        return "", ""
    parts = api_version.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise BudgetError(f"unexpected GroupVersion string: {api_version}")


def _verify(ref: Mapping[str, Any], kind: str, groups: tuple[str, ...]) -> bool:
    """`verifyGroupKind`: the reference names `kind` in one of `groups` (raises on a bad apiVersion)."""
    group, _ = parse_group_version(str(ref.get("apiVersion", "")))
    return ref.get("kind") == kind and group in groups


def _replicas(obj: Obj, default: int = 1) -> int:
    """`*spec.replicas`: the API server defaults it to 1 for the built-in workloads."""
    value = (obj.get("spec") or {}).get("replicas")
    return default if value is None else int(value)


def _same(obj: Obj | None, ref: Mapping[str, Any]) -> bool:
    return obj is not None and (obj.get("metadata") or {}).get("uid") == ref.get("uid")


class ScaleReader:
    """`getScaleController`: reads `/scale` of any kind found through discovery (cached briefly)."""

    def __init__(self, client: KubeClient, *, ttl: float = _DISCOVERY_TTL) -> None:
        self._client = client
        self._ttl = ttl
        self._discovery: dict[tuple[str, str], tuple[float, list[Mapping[str, Any]]]] = {}

    @staticmethod
    def _prefix(group: str, version: str) -> str:
        return f"/api/{version}" if not group else f"/apis/{group}/{version}"

    async def _resources(self, group: str, version: str, *, fresh: bool = False) -> list[Mapping[str, Any]]:
        key = (group, version)
        cached = self._discovery.get(key)
        now = time.monotonic()
        if cached is not None and not fresh and cached[0] > now:
            return cached[1]
        try:
            doc = await self._client.request("GET", self._prefix(group, version))
        except ApiError as exc:
            if not exc.not_found:
                raise
            doc = {}  # the group/version is not served: nothing maps
        resources = list(doc.get("resources") or [])
        self._discovery[key] = (now + self._ttl, resources)
        return resources

    async def _plural(self, group: str, version: str, kind: str) -> tuple[str, list[Mapping[str, Any]]]:
        """The RESTMapping: the top-level resource serving `kind` (rediscovered once on a miss)."""
        for fresh in (False, True):
            resources = await self._resources(group, version, fresh=fresh)
            for res in resources:
                name = str(res.get("name", ""))
                if "/" not in name and res.get("kind") == kind:
                    return name, resources
        gv = f"{group}/{version}" if group else version
        raise BudgetError(f'no matches for kind "{kind}" in version "{gv}"')

    async def __call__(self, ref: Mapping[str, Any], namespace: str) -> ControllerScale | None:
        group, version = parse_group_version(str(ref.get("apiVersion", "")))
        kind = str(ref.get("kind", ""))
        plural, resources = await self._plural(group, version, kind)
        path = f"{self._prefix(group, version)}/namespaces/{namespace}/{plural}/{ref.get('name', '')}/scale"
        try:
            scale = await self._client.request("GET", path)
        except ApiError as exc:
            if not exc.not_found:
                raise
            if not _implements_scale(resources, plural):
                resource = f"{plural}.{group}" if group else plural
                raise BudgetError(f"{resource} does not implement the scale subresource") from exc
            return None
        if not _same(scale, ref):
            return None
        return ControllerScale(str(ref.get("uid")), _replicas(scale, default=0))


def _implements_scale(resources: list[Mapping[str, Any]], plural: str) -> bool:
    """`implementsScale`: discovery lists `<plural>/scale` of kind `Scale` in a known group/version."""
    for res in resources:
        if res.get("name") != f"{plural}/scale" or res.get("kind") != "Scale":
            continue
        if (str(res.get("group", "")), str(res.get("version", ""))) in _SCALE_VERSIONS:
            return True
    return False


@dataclass(kw_only=True, eq=False)
class ControllerFinder:
    """All finders in KCM's order; callable as a `budget.Finder`.

    `scale` may be None (unit tests without an API server): then only the four workload kinds
    are known and anything else is unresolvable.
    """

    rcs: _Getter
    replicasets: _Getter
    deployments: _Getter
    statefulsets: _Getter
    scale: ScaleReader | None = None

    @staticmethod
    def _cached(
        getter: _Getter, ref: Mapping[str, Any], namespace: str, kind: str, groups: tuple[str, ...]
    ) -> dict[str, Any] | None:
        """The cached object `ref` points at, if `ref` names that kind and it is that very object."""
        if not _verify(ref, kind, groups):
            return None
        obj = getter.get(str(ref.get("name", "")), namespace)
        return obj if obj is not None and _same(obj, ref) else None

    def replication_controller(self, ref: Mapping[str, Any], namespace: str) -> ControllerScale | None:
        rc = self._cached(self.rcs, ref, namespace, "ReplicationController", ("",))
        return ControllerScale(str(ref.get("uid")), _replicas(rc)) if rc is not None else None

    def deployment(self, ref: Mapping[str, Any], namespace: str) -> ControllerScale | None:
        rs = self._cached(self.replicasets, ref, namespace, "ReplicaSet", ("apps", "extensions"))
        rs_ref = get_controller_of(rs) if rs is not None else None
        if rs_ref is None:
            return None
        dep = self._cached(self.deployments, rs_ref, namespace, "Deployment", ("apps", "extensions"))
        return ControllerScale(str(rs_ref.get("uid")), _replicas(dep)) if dep is not None else None

    def replicaset(self, ref: Mapping[str, Any], namespace: str) -> ControllerScale | None:
        rs = self._cached(self.replicasets, ref, namespace, "ReplicaSet", ("apps", "extensions"))
        if rs is None:
            return None
        rs_ref = get_controller_of(rs)
        if rs_ref is not None and rs_ref.get("kind") == "Deployment":
            return None  # counted as its Deployment (or not at all when that is gone)
        return ControllerScale(str(ref.get("uid")), _replicas(rs))

    def statefulset(self, ref: Mapping[str, Any], namespace: str) -> ControllerScale | None:
        ss = self._cached(self.statefulsets, ref, namespace, "StatefulSet", ("apps",))
        return ControllerScale(str(ref.get("uid")), _replicas(ss)) if ss is not None else None

    async def __call__(self, ref: Mapping[str, Any], namespace: str) -> ControllerScale | None:
        for finder in (self.replication_controller, self.deployment, self.replicaset, self.statefulset):
            found = finder(ref, namespace)
            if found is not None:
                return found
        if self.scale is None:
            return None
        return await self.scale(ref, namespace)
