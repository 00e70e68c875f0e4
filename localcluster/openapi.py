"""`/openapi/v3` (and a JSON `/openapi/v2`) built from Kubernetes' own definitions and CRD schemas.

kubectl 1.32 reads OpenAPI v3 for three things:
- `kubectl explain` looks up the component schema whose `x-kubernetes-group-version-kind`
  names the kind, following `$ref`s;
- `kubectl apply` / `create` / `patch` decide whether the server validates fields itself by
  looking for a `fieldValidation` query parameter on the kind's PATCH operation; if it is
  missing kubectl falls back to client-side validation against OpenAPI v2 *protobuf*, which we
  do not serve, so every kind here gets PATCH operations carrying that parameter;
- client-side apply computes strategic merge patches from `x-kubernetes-patch-merge-key` /
  `x-kubernetes-patch-strategy` (present in the upstream definitions).

The definitions come from `kubernetes-validate` (the JSON-schema form of the 1.32 OpenAPI);
they are converted back to OpenAPI 3 shape (`type: ["string","null"]` -> `type: string`,
`$ref` siblings wrapped in `allOf` as the real server emits them). Each group-version document
holds only the definitions it reaches, is built on first request and cached until the registry
changes that group-version; the root document's `?hash=` changes with it so clients refetch.
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol, runtime_checkable

import orjson
from aiohttp import web

from localcluster.builtin.schemas import definition_name, definitions
from localcluster.registry import Registry, ResourceType

__all__ = ["OpenAPI", "SchemaProvider", "setup_routes"]

Schema = dict[str, Any]
_V3_REF = "#/components/schemas/"
_V2_REF = "#/definitions/"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_PATCH = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
_STATUS = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
_PATCH_TYPES = (
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)


@runtime_checkable
class SchemaProvider(Protocol):
    """A strategy that knows its kind's OpenAPI schema (custom resources implement this)."""

    def openapi_schema(self) -> Schema | None: ...


# ----------------------------------------------------------------------------- conversion


def _convert(node: Any, ref_prefix: str) -> Any:
    """kubernetes-validate's JSON-schema form back to the OpenAPI form kube-openapi emits."""
    if isinstance(node, list):
        return [_convert(v, ref_prefix) for v in node]
    if not isinstance(node, dict):
        return node
    out: Schema = {}
    for key, value in node.items():
        if key == "$ref":
            continue
        if key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            if types:
                out["type"] = types[0]
            continue
        out[key] = _convert(value, ref_prefix)
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = ref_prefix + ref.rsplit("/", 1)[-1]
        if len(out) == 0:
            return {"$ref": target}
        out["allOf"] = [{"$ref": target}]
    return out


def _special(name: str, schema: Schema) -> Schema | None:
    """The few definitions whose upstream form is not a JSON-schema `type`."""
    desc = {"description": schema["description"]} if "description" in schema else {}
    if name == _INT_OR_STRING:
        return {**desc, "type": "string", "format": "int-or-string", "x-kubernetes-int-or-string": True}
    if name == _QUANTITY:
        return {**desc, "type": "string", "format": "quantity"}
    return None


def _refs(node: Any) -> set[str]:
    found: set[str] = set()
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            ref = cur.get("$ref")
            if isinstance(ref, str):
                found.add(ref.rsplit("/", 1)[-1])
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)
    return found


def _closure(roots: set[str]) -> list[str]:
    defs = definitions()
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        todo.extend(_refs(defs[name]) - seen)
    return sorted(seen)


def _component(name: str, ref_prefix: str) -> Schema:
    raw = definitions()[name]
    special = _special(name, raw)
    if special is not None:
        return special
    converted: Schema = _convert(raw, ref_prefix)
    if "x-kubernetes-group-version-kind" in raw:
        # kubernetes-validate pins apiVersion/kind with an enum the real spec does not have.
        for key in ("apiVersion", "kind"):
            prop = converted.get("properties", {}).get(key)
            if isinstance(prop, dict):
                prop.pop("enum", None)
    return converted


# ----------------------------------------------------------------------------- CRD schemas


def custom_resource_schema(rt: ResourceType, schema: Schema | None, ref_prefix: str) -> Schema:
    """A CR's published schema: its openAPIV3Schema plus apiVersion/kind/metadata and its GVK."""
    out: Schema = dict(schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    props = dict(out.get("properties") or {})
    props["apiVersion"] = {
        "type": "string",
        "description": "APIVersion defines the versioned schema of this representation of an object.",
    }
    props["kind"] = {
        "type": "string",
        "description": "Kind is a string value representing the REST resource this object represents.",
    }
    meta = {"description": "Standard object's metadata.", "allOf": [{"$ref": ref_prefix + _OBJECT_META}]}
    props["metadata"] = meta
    out["properties"] = props
    out.setdefault("type", "object")
    out["x-kubernetes-group-version-kind"] = [{"group": rt.group, "kind": rt.kind, "version": rt.version}]
    return out


def _definition_key(rt: ResourceType) -> str:
    """Component name for a CR: reversed group + version + kind (`io.aiokcm.maintenance.v1alpha1.NodeMaintenance`)."""
    return ".".join([*reversed(rt.group.split(".")), rt.version, rt.kind])


# ----------------------------------------------------------------------------- paths


def _operation(rt: ResourceType, action: str, verb: str, ref: str, *, write: bool) -> Schema:
    params: list[Schema] = [
        {"name": "pretty", "in": "query", "schema": {"type": "string", "uniqueItems": True}}
    ]
    if write:
        for name in ("dryRun", "fieldManager", "fieldValidation"):
            params.append({"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}})
    if action == "patch":
        params.append({"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": True}})
    gv = "".join(p.capitalize() for p in rt.group.replace(".k8s.io", "").split(".")) + rt.version.capitalize()
    scope = "Namespaced" if rt.namespaced else ""
    op: Schema = {
        "operationId": f"{verb}{gv or 'CoreV1'}{scope}{rt.kind}",
        "parameters": params,
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}
        },
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
    }
    if action == "patch":
        body = {"schema": {"$ref": _V3_REF + _PATCH}}
        op["requestBody"] = {"content": {t: body for t in _PATCH_TYPES}, "required": True}
    elif write:
        op["requestBody"] = {"content": {"application/json": {"schema": {"$ref": ref}}}, "required": True}
    return op


def _paths(rt: ResourceType, ref: str) -> dict[str, Schema]:
    base = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    if rt.namespaced:
        base += "/namespaces/{namespace}"
    item = {
        "get": _operation(rt, "get", "read", ref, write=False),
        "put": _operation(rt, "put", "replace", ref, write=True),
        "patch": _operation(rt, "patch", "patch", ref, write=True),
        "delete": _operation(rt, "delete", "delete", ref, write=False),
    }
    collection = {"post": _operation(rt, "post", "create", ref, write=True)}
    paths = {f"{base}/{rt.plural}": collection, f"{base}/{rt.plural}/{{name}}": item}
    if "status" in rt.subresources:
        paths[f"{base}/{rt.plural}/{{name}}/status"] = {
            "get": _operation(rt, "get", "read", ref, write=False) | {"operationId": f"read{rt.kind}Status"},
            "put": _operation(rt, "put", "replace", ref, write=True)
            | {"operationId": f"replace{rt.kind}Status"},
            "patch": _operation(rt, "patch", "patch", ref, write=True)
            | {"operationId": f"patch{rt.kind}Status"},
        }
    return paths


# ----------------------------------------------------------------------------- documents


class OpenAPI:
    """Builds and caches the per-group-version documents for one registry."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._v3: dict[str, bytes] = {}
        self._v2: bytes | None = None
        self._generation: dict[str, int] = {}
        self._counter = itertools.count(1)
        registry.subscribe(self._changed)

    @staticmethod
    def gv_path(group: str, version: str) -> str:
        return f"apis/{group}/{version}" if group else f"api/{version}"

    def _changed(self, event: str, rt: ResourceType) -> None:
        key = self.gv_path(rt.group, rt.version)
        self._v3.pop(key, None)
        self._v2 = None
        self._generation[key] = next(self._counter)

    def _types_by_gv(self) -> dict[str, list[ResourceType]]:
        out: dict[str, list[ResourceType]] = {}
        for rt in self._registry.all():
            out.setdefault(self.gv_path(rt.group, rt.version), []).append(rt)
        return out

    def root_v3(self) -> Schema:
        paths = {}
        for key in sorted(self._types_by_gv()):
            gen = self._generation.get(key, 0)
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={gen:016X}"}
        return {"paths": paths}

    def _schemas_for(
        self, types: list[ResourceType], ref_prefix: str
    ) -> tuple[dict[str, Schema], dict[str, str]]:
        """Component schemas reachable from `types`, and each type's component name."""
        builtin_roots: set[str] = {_STATUS, _PATCH}
        custom: dict[str, Schema] = {}
        names: dict[str, str] = {}
        for rt in types:
            provider = rt.strategy if isinstance(rt.strategy, SchemaProvider) else None
            upstream = definition_name(rt.group, rt.version, rt.kind) if provider is None else None
            if upstream is not None:
                builtin_roots.add(upstream)
                builtin_roots.add(upstream + "List")
                names[rt.plural] = upstream
            else:
                key = _definition_key(rt)
                custom[key] = custom_resource_schema(
                    rt, provider.openapi_schema() if provider else None, ref_prefix
                )
                builtin_roots.add(_OBJECT_META)
                names[rt.plural] = key
        schemas = {name: _component(name, ref_prefix) for name in _closure(builtin_roots)}
        schemas.update(custom)
        return schemas, names

    def group_version_v3(self, key: str) -> bytes | None:
        cached = self._v3.get(key)
        if cached is not None:
            return cached
        types = self._types_by_gv().get(key)
        if not types:
            return None
        schemas, names = self._schemas_for(types, _V3_REF)
        paths: dict[str, Schema] = {}
        for rt in sorted(types, key=lambda t: t.plural):
            paths.update(_paths(rt, _V3_REF + names[rt.plural]))
        doc = {
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "paths": paths,
            "components": {"schemas": schemas},
        }
        body = orjson.dumps(doc)
        self._v3[key] = body
        return body

    def v2(self) -> bytes:
        """Swagger 2.0 definitions of every served kind (JSON; clients asking protobuf get 406)."""
        if self._v2 is None:
            schemas, _ = self._schemas_for(self._registry.all(), _V2_REF)
            doc = {
                "swagger": "2.0",
                "info": {"title": "Kubernetes", "version": "v1.32.0"},
                "paths": {},
                "definitions": schemas,
            }
            self._v2 = orjson.dumps(doc)
        return self._v2


def setup_routes(app: web.Application, registry: Registry) -> OpenAPI:
    """Add `/openapi/v2`, `/openapi/v3` and `/openapi/v3/{api|apis}/...` to the server's app."""
    openapi = OpenAPI(registry)

    async def v3_root(request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps(openapi.root_v3()), content_type="application/json")

    async def v3_gv(request: web.Request) -> web.Response:
        body = openapi.group_version_v3(request.match_info["path"])
        if body is None:
            return web.Response(status=404, text="404 page not found\n", content_type="text/plain")
        resp = web.Response(body=body, content_type="application/json")
        if "hash" in request.query:
            resp.headers["Cache-Control"] = "public, immutable"
        return resp

    async def v2(request: web.Request) -> web.Response:
        accept = request.headers.get("Accept", "*/*")
        if "json" not in accept and "*/*" not in accept:
            return web.Response(status=406, text="406 Not Acceptable\n", content_type="text/plain")
        return web.Response(body=openapi.v2(), content_type="application/json")

    app.router.add_get("/openapi/v2", v2)
    app.router.add_get("/openapi/v3", v3_root)
    app.router.add_get("/openapi/v3/{path:apis?/.+}", v3_gv)
    return openapi
