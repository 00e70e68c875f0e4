"""API discovery as kube-apiserver serves it: `/version`, `/api`, `/apis`, `/api/v1`, `/apis/<g>[/<v>]`.

Everything is computed from the `Registry` on each request, so a CRD's resources appear the
moment it is registered and vanish when it is removed (the real server's discovery is also
dynamic). Documents are small: building them per request costs microseconds.

Two wire forms exist and clients pick by `Accept`:
- legacy (`APIVersions`, `APIGroupList`, `APIGroup`, `APIResourceList`), one request per
  group-version;
- aggregated (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`) which kubectl >= 1.30 asks for
  first on `/api` and `/apis`: one request returns every resource. We honour it only when the
  client lists it, and answer with the exact content type client-go switches on; otherwise the
  client gets the legacy document and falls back to per-group-version requests.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from localcluster.negotiation import negotiated
from localcluster.registry import Registry, ResourceType

__all__ = [
    "AGGREGATED_V2",
    "VERSION_INFO",
    "aggregated_discovery",
    "api_group",
    "api_group_list",
    "api_resource_list",
    "api_versions",
    "setup_routes",
]

VERSION_INFO: dict[str, str] = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-aiokcm",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-12-11T00:00:00Z",
    "goVersion": "go1.23.4",
    "compiler": "gc",
    "platform": "linux/amd64",
}

AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

#: (group, version, kind) of what each known subresource reads and writes, and its verbs.
_SUBRESOURCE_KINDS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "scale": ("autoscaling", "v1", "Scale", ("get", "patch", "update")),
    "eviction": ("policy", "v1", "Eviction", ("create",)),
    "binding": ("", "v1", "Binding", ("create",)),
    "log": ("", "v1", "Pod", ("get",)),
    "exec": ("", "v1", "PodExecOptions", ("create", "get")),
    "attach": ("", "v1", "PodAttachOptions", ("create", "get")),
    "portforward": ("", "v1", "PodPortForwardOptions", ("create", "get")),
}
_STATUS_VERBS = ("get", "patch", "update")

#: Groups listed in this order first, as the real server orders them by priority.
_GROUP_ORDER = ("", "apps", "events.k8s.io", "policy", "coordination.k8s.io", "apiextensions.k8s.io")


def storage_version_hash(rt: ResourceType) -> str:
    """The apiserver's opaque hash: base64 of the first 8 bytes of sha256("group/version/kind")."""
    digest = hashlib.sha256(f"{rt.group}/{rt.version}/{rt.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _subresource_kind(rt: ResourceType, sub: str) -> tuple[str, str, str, tuple[str, ...]]:
    if sub in _SUBRESOURCE_KINDS:
        return _SUBRESOURCE_KINDS[sub]
    return (rt.group, rt.version, rt.kind, _STATUS_VERBS)


def _ordered_groups(registry: Registry) -> list[tuple[str, list[str]]]:
    groups = registry.groups()
    rank = {g: i for i, g in enumerate(_GROUP_ORDER)}
    return sorted(groups.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))


def _versions(registry: Registry, group: str) -> list[str]:
    """Served versions, preferred first (a type marked `preferred=False` sorts after)."""
    versions = registry.groups().get(group, [])
    preferred = {rt.version for rt in registry.all() if rt.group == group and rt.preferred}
    return sorted(versions, key=lambda v: (v not in preferred, versions.index(v)))


def _types_in(registry: Registry, group: str, version: str) -> list[ResourceType]:
    return sorted(
        (rt for rt in registry.all() if rt.group == group and rt.version == version), key=lambda rt: rt.plural
    )


def _aliases(rt: ResourceType) -> dict[str, list[str]]:
    """The other names kubectl finds a type by (`shortNames`, `categories`), where it has any:
    both discovery forms leave out an empty list rather than send one."""
    out: dict[str, list[str]] = {}
    if rt.short_names:
        out["shortNames"] = list(rt.short_names)
    if rt.categories:
        out["categories"] = list(rt.categories)
    return out


# ------------------------------------------------------------------------------- legacy


def api_versions(host: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
    }


def _group_entry(registry: Registry, group: str) -> dict[str, Any]:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in _versions(registry, group)]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = [_group_entry(registry, g) for g, _ in _ordered_groups(registry) if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    if not group or group not in registry.groups():
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(registry, group)}


def _legacy_resources(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    main.update(_aliases(rt))
    main["storageVersionHash"] = storage_version_hash(rt)
    out = [main]
    for sub in sorted(rt.subresources):
        group, version, kind, verbs = _subresource_kind(rt, sub)
        entry: dict[str, Any] = {
            "name": f"{rt.plural}/{sub}",
            "singularName": "",
            "namespaced": rt.namespaced,
        }
        if (group, version) != (rt.group, rt.version):
            entry["group"], entry["version"] = group, version
        entry["kind"] = kind
        entry["verbs"] = list(verbs)
        out.append(entry)
    return out


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = _types_in(registry, group, version)
    if not types:
        return None
    doc: dict[str, Any] = {"kind": "APIResourceList"}
    if group:
        doc["apiVersion"] = "v1"
    doc["groupVersion"] = f"{group}/{version}" if group else version
    doc["resources"] = [entry for rt in types for entry in _legacy_resources(rt)]
    return doc


# ------------------------------------------------------------------------------- aggregated


def _aggregated_resource(rt: ResourceType) -> dict[str, Any]:
    res: dict[str, Any] = {
        "resource": rt.plural,
        "responseKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": list(rt.verbs),
    }
    res.update(_aliases(rt))
    subs = []
    for sub in sorted(rt.subresources):
        group, version, kind, verbs = _subresource_kind(rt, sub)
        subs.append(
            {
                "subresource": sub,
                "responseKind": {"group": group, "version": version, "kind": kind},
                "verbs": list(verbs),
            }
        )
    if subs:
        res["subresources"] = subs
    return res


def aggregated_discovery(registry: Registry, *, core: bool) -> dict[str, Any]:
    """`APIGroupDiscoveryList` for `/api` (core=True: the legacy group only) or `/apis`."""
    items = []
    for group, _ in _ordered_groups(registry):
        if (group == "") != core:
            continue
        versions = [
            {
                "version": v,
                "resources": [_aggregated_resource(rt) for rt in _types_in(registry, group, v)],
                "freshness": "Current",
            }
            for v in _versions(registry, group)
        ]
        meta: dict[str, Any] = {"creationTimestamp": None}
        if group:
            meta["name"] = group
        items.append({"metadata": meta, "versions": versions})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }


def wants_aggregated(accept: str) -> bool:
    """True when the client's first acceptable media type is aggregated discovery v2."""
    for part in accept.split(","):
        params = {p.strip() for p in part.split(";")}
        if "application/json" not in params and "*/*" not in params:
            continue
        return {"g=apidiscovery.k8s.io", "v=v2", "as=APIGroupDiscoveryList"} <= params
    return False


# ------------------------------------------------------------------------------- HTTP


def _json(doc: Any, content_type: str = "application/json") -> web.Response:
    resp = web.Response(body=orjson.dumps(doc))
    resp.headers["Content-Type"] = content_type
    return resp


def _not_found() -> web.Response:
    return web.Response(status=404, text="404 page not found\n", content_type="text/plain")


def setup_routes(app: web.Application, registry: Registry) -> None:
    """Add the discovery endpoints to the API server's app (GET only, as the real server)."""

    async def version(request: web.Request) -> web.Response:
        return _json(VERSION_INFO)

    async def api(request: web.Request) -> web.Response:
        if wants_aggregated(request.headers.get("Accept", "")):
            return _json(aggregated_discovery(registry, core=True), AGGREGATED_V2)
        return _json(api_versions(request.host))

    async def apis(request: web.Request) -> web.Response:
        if wants_aggregated(request.headers.get("Accept", "")):
            return _json(aggregated_discovery(registry, core=False), AGGREGATED_V2)
        return _json(api_group_list(registry))

    async def core_version(request: web.Request) -> web.Response:
        doc = api_resource_list(registry, "", request.match_info["version"])
        return _json(doc) if doc else _not_found()

    async def group(request: web.Request) -> web.Response:
        doc = api_group(registry, request.match_info["group"])
        return _json(doc) if doc else _not_found()

    async def group_version(request: web.Request) -> web.Response:
        doc = api_resource_list(registry, request.match_info["group"], request.match_info["version"])
        return _json(doc) if doc else _not_found()

    # kube-apiserver answers each with and without a trailing slash (some clients, kr8s for
    # one, always send it); deeper resource paths are trimmed by the REST handlers
    for path, handler in (
        ("/version", version),
        ("/api", api),
        ("/apis", apis),
        ("/api/{version}", core_version),
        ("/apis/{group}", group),
        ("/apis/{group}/{version}", group_version),
    ):
        app.router.add_get(path, _negotiating(handler))
        app.router.add_get(path + "/", _negotiating(handler))


def _negotiating(
    handler: Callable[[web.Request], Awaitable[web.Response]],
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """Discovery documents in protobuf for clients that prefer it (kube-controller-manager does)."""

    async def negotiating(request: web.Request) -> web.StreamResponse:
        return negotiated(request, await handler(request))

    return negotiating
