"""apiextensions.k8s.io/v1 CustomResourceDefinitions and the custom resources they define.

How the real server does it, and what we keep:
- A CRD is validated when written (names, scope, one storage version, a structural schema
  whose `x-kubernetes-validations` rules compile). Its `status` carries `acceptedNames` and the
  `NamesAccepted` / `Established` conditions, which the real naming and establishing
  controllers set within milliseconds; we set them in the write itself so that the CRD is
  Established, and its resources served, as soon as the create returns.
- Serving: each served version becomes a `ResourceType` in the registry (discovery, OpenAPI
  and REST follow from that) whose `CustomResourceStrategy` prunes, defaults and validates with
  the version's schema, keeps spec/status apart when the status subresource is declared, maps
  `/scale` to the declared paths, and renders `additionalPrinterColumns` for `kubectl get`.
- Deletion: the CRD carries the `customresourcecleanup.apiextensions.k8s.io` finalizer, so a
  DELETE only marks it; `CRDController` then stops serving, deletes every custom resource
  (watchers see DELETED events) and removes the finalizer, and the CRD goes away.

Registration happens synchronously inside the storage write (a subscription filter observes
each CRD event), so a client may create a custom resource right after its CRD. The cleanup
writes happen on the controller's task, never inside another write's event dispatch.
"""

from __future__ import annotations

import asyncio
import copy
import re
from typing import Any

import orjson

from localcluster import schema as crschema
from localcluster.builtin.base import age
from localcluster.builtin.validation import object_items
from localcluster.objects import ObjectAPI, now_rfc3339
from localcluster.registry import (
    FieldError,
    Obj,
    Registry,
    ResourceType,
    ScaleSubresource,
    Strategy,
    TableColumn,
)
from localcluster.storage import Storage, StoredEvent, Subscription

__all__ = [
    "CLEANUP_FINALIZER",
    "CRDController",
    "CRDStrategy",
    "CustomResourceStrategy",
    "crd_resource_type",
    "resource_types_for",
]

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
CRD_GROUP = "apiextensions.k8s.io"
CRD_STORAGE_KEY = f"customresourcedefinitions.{CRD_GROUP}"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


# --------------------------------------------------------------------------- printer columns


def _jsonpath(obj: Any, path: str) -> list[Any]:
    """The values at a printer-column JSONPath: `.a.b`, `.a[0]`, `.a[*].b`, `.a[?(@.k=="v")].b`."""
    tokens = re.findall(
        r"\.([A-Za-z0-9_\-]+)|\[(\d+|\*|\?\(@\.[A-Za-z0-9_\-]+\s*==\s*['\"][^'\"]*['\"]\))\]", path
    )
    values = [obj]
    for name, bracket in tokens:
        nxt: list[Any] = []
        for v in values:
            if name:
                if isinstance(v, dict) and name in v:
                    nxt.append(v[name])
            elif bracket == "*":
                if isinstance(v, list):
                    nxt.extend(v)
            elif bracket.isdigit():
                if isinstance(v, list) and int(bracket) < len(v):
                    nxt.append(v[int(bracket)])
            else:
                m = re.match(r"\?\(@\.([A-Za-z0-9_\-]+)\s*==\s*['\"]([^'\"]*)['\"]\)", bracket)
                if m and isinstance(v, list):
                    nxt.extend(i for i in v if isinstance(i, dict) and str(i.get(m.group(1))) == m.group(2))
        values = nxt
    return values


def _cell(values: list[Any], column: dict[str, Any]) -> Any:
    """One table cell as the apiextensions table convertor renders it (`<none>` when absent)."""
    if not values:
        return None
    value = values[0] if len(values) == 1 else values
    typ = column.get("type", "string")
    if typ == "date" and isinstance(value, str):
        return age(value)
    if typ in ("integer", "number", "boolean") and not isinstance(value, list | dict):
        return value
    if isinstance(value, list | dict):
        return orjson.dumps(value).decode()
    return str(value)


# --------------------------------------------------------------------------- custom resources


_DEFAULT_AGE_COLUMN = {
    "name": "Age",
    "type": "date",
    "jsonPath": ".metadata.creationTimestamp",
    "description": "CreationTimestamp is a timestamp representing the server time when this object was created.",
}


class CustomResourceStrategy(Strategy):
    """The behaviour of one served version of a CRD."""

    #: The REST layer adds no Age column of its own: the printer columns say where age goes.
    table_age_column: str | None = None
    requires_type_meta = True

    def __init__(self, crd: Obj, version: Obj) -> None:
        self.crd_name: str = crd["metadata"]["name"]
        self.version_name: str = version["name"]
        self.schema: dict[str, Any] = ((version.get("schema") or {}).get("openAPIV3Schema")) or {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
        }
        subresources = version.get("subresources") or {}
        self.has_status_subresource = "status" in subresources
        # As apiextensions' `serveDefaultColumnsIfEmpty`: the declared columns, in their order
        # (a `date` creationTimestamp column where the CRD puts it), or Age alone if none.
        self.columns: list[dict[str, Any]] = list(version.get("additionalPrinterColumns") or []) or [
            _DEFAULT_AGE_COLUMN
        ]
        #: Fields dropped by the last `prune` call, for `fieldValidation=Strict` / `Warn`.
        self.last_pruned: list[str] = []
        # `selectableFields` (apiextensions v1.30+): each declared JSON path is a field label
        self.selectable_paths: dict[str, str] = {
            str(f["jsonPath"]).lstrip("."): str(f["jsonPath"])
            for f in version.get("selectableFields") or []
            if isinstance(f, dict) and f.get("jsonPath")
        }
        self.field_labels = frozenset(self.selectable_paths)

    def openapi_schema(self) -> dict[str, Any] | None:
        return self.schema

    def prune(self, obj: Obj) -> None:
        self.last_pruned = crschema.prune(obj, self.schema)

    def default(self, obj: Obj) -> None:
        crschema.apply_defaults(obj, self.schema)

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return crschema.validate(obj, self.schema, old)

    def validate_status(self, obj: Obj, old: Obj) -> list[FieldError]:
        return crschema.validate(obj, self.schema, old)

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        """Declared fields as field-selector values: strings as they are, integers in decimal,
        booleans `true`/`false`; an absent field selects as the empty string."""
        out: dict[str, str] = {}
        for label, path in self.selectable_paths.items():
            found = _jsonpath(obj, path)
            value = found[0] if found else None
            out[label] = (
                ("true" if value else "false")
                if isinstance(value, bool)
                else ""
                if value is None
                else str(value)
            )
        return out

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]] | None:
        cols = [
            TableColumn(
                c["name"],
                c.get("type", "string"),
                c.get("format", ""),
                c.get("description", ""),
                c.get("priority", 0),
            )
            for c in self.columns
        ]
        cells = [_cell(_jsonpath(obj, c.get("jsonPath", "")), c) for c in self.columns]
        return cols, cells


def _version_priority(name: str) -> tuple[int, int, int, str]:
    """Kubernetes' version order: GA > beta > alpha, higher numbers first, then the rest by name."""
    m = _VERSION_RE.match(name)
    if m is None:
        return (3, 0, 0, name)
    major, stage, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -major, -minor, name)


def resource_types_for(crd: Obj) -> list[ResourceType]:
    """One `ResourceType` per served version, the highest-priority version marked preferred."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    served = [v for v in spec.get("versions") or [] if v.get("served")]
    preferred = min((v["name"] for v in served), key=_version_priority, default=None)
    types = []
    for version in served:
        subresources = version.get("subresources") or {}
        scale_spec = subresources.get("scale")
        scale = None
        if scale_spec is not None:
            scale = ScaleSubresource(
                scale_spec.get("specReplicasPath", ".spec.replicas"),
                scale_spec.get("statusReplicasPath", ".status.replicas"),
                scale_spec.get("labelSelectorPath"),
            )
        types.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope") == "Namespaced",
                singular=names.get("singular") or names["kind"].lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=frozenset(k for k in ("status", "scale") if k in subresources),
                strategy=CustomResourceStrategy(crd, version),
                scale=scale,
                preferred=version["name"] == preferred,
            )
        )
    return types


# --------------------------------------------------------------------------- the CRD kind


def _condition(type_: str, reason: str, message: str) -> Obj:
    return {
        "type": type_,
        "status": "True",
        "lastTransitionTime": now_rfc3339(),
        "reason": reason,
        "message": message,
    }


class CRDStrategy(Strategy):
    """Defaulting, validation and status of CustomResourceDefinition objects."""

    has_status_subresource = True
    #: `kubectl get crd` prints NAME and CREATED AT (the default table convertor), no AGE.
    table_age_column: str | None = None

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]]:
        created = obj["metadata"].get("creationTimestamp")
        column = TableColumn(
            "Created At",
            "date",
            "",
            "CreationTimestamp is a timestamp representing the server time when this object was created.",
        )
        return [column], [created]

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def default(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        if not isinstance(spec, dict):
            return
        names = spec.get("names")
        if isinstance(names, dict) and isinstance(names.get("kind"), str):
            names.setdefault("singular", names["kind"].lower())
            names.setdefault("listKind", names["kind"] + "List")
        spec.setdefault("conversion", {"strategy": "None"})

    def prepare_for_create(self, obj: Obj) -> None:
        super().prepare_for_create(obj)
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CLEANUP_FINALIZER)
        obj["status"] = self._status(obj, None)

    def prepare_for_update(self, obj: Obj, old: Obj) -> None:
        super().prepare_for_update(obj, old)
        obj["status"] = self._status(obj, old.get("status"))

    def _status(self, obj: Obj, old: Obj | None) -> Obj:
        spec = obj.get("spec") or {}
        names = copy.deepcopy(spec.get("names") or {})
        stored = list((old or {}).get("storedVersions") or [])
        for v in spec.get("versions") or []:
            if isinstance(v, dict) and v.get("storage") and v.get("name") not in stored:
                stored.append(v["name"])
        conditions = list((old or {}).get("conditions") or [])
        have = {c.get("type") for c in conditions}
        if "NamesAccepted" not in have:
            conditions.append(_condition("NamesAccepted", "NoConflicts", "no conflicts found"))
        if "Established" not in have:
            conditions.append(
                _condition("Established", "InitialNamesAccepted", "the initial names have been accepted")
            )
        return {"conditions": conditions, "acceptedNames": names, "storedVersions": stored}

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs = _validate_crd(obj)
        if old is not None and not errs:
            old_spec, spec = old.get("spec") or {}, obj.get("spec") or {}
            if spec.get("scope") != old_spec.get("scope"):
                errs.append(FieldError.invalid("spec.scope", spec.get("scope"), "field is immutable"))
            if spec.get("group") != old_spec.get("group"):
                errs.append(FieldError.invalid("spec.group", spec.get("group"), "field is immutable"))
        if not errs:
            errs = self._name_conflicts(obj)
        return errs

    def _name_conflicts(self, obj: Obj) -> list[FieldError]:
        """Another resource of the group already uses this kind or a short name."""
        spec = obj["spec"]
        names = spec["names"]
        errs = []
        for rt in self._registry.all():
            if rt.group != spec["group"] or rt.plural == names["plural"]:
                continue
            if rt.kind == names["kind"]:
                errs.append(
                    FieldError.invalid(
                        "spec.names.kind", names["kind"], f"kind already used by {rt.plural}.{rt.group}"
                    )
                )
        return errs


def _validate_crd(obj: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [FieldError.required("spec")]
    group = spec.get("group")
    raw_names = spec.get("names")
    names: dict[str, Any] = raw_names if isinstance(raw_names, dict) else {}
    if not isinstance(group, str) or not group:
        errs.append(FieldError.required("spec.group"))
    elif "." not in group:
        errs.append(FieldError.invalid("spec.group", group, "should be a domain with at least one dot"))
    plural, kind = names.get("plural"), names.get("kind")
    for key in ("plural", "singular"):
        value = names.get(key)
        if key == "plural" and not value:
            errs.append(FieldError.required("spec.names.plural"))
        elif value and not _DNS_LABEL.match(str(value)):
            errs.append(
                FieldError.invalid(
                    f"spec.names.{key}",
                    value,
                    "a lowercase RFC 1123 label must consist of lower case "
                    "alphanumeric characters or '-', and must start and end with an alphanumeric character",
                )
            )
    if not kind:
        errs.append(FieldError.required("spec.names.kind"))
    elif not _KIND.match(str(kind)):
        errs.append(
            FieldError.invalid(
                "spec.names.kind",
                kind,
                "may have mixed case, but should otherwise match: ^[a-zA-Z][a-zA-Z0-9]*$",
            )
        )
    for i, short in enumerate(names.get("shortNames") or []):
        if not _DNS_LABEL.match(str(short)):
            errs.append(
                FieldError.invalid(f"spec.names.shortNames[{i}]", short, "must be a lowercase RFC 1123 label")
            )
    name = (obj.get("metadata") or {}).get("name")
    if plural and group and name != f"{plural}.{group}":
        errs.append(FieldError.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    if spec.get("scope") not in ("Cluster", "Namespaced"):
        errs.append(FieldError.not_supported("spec.scope", spec.get("scope"), ("Cluster", "Namespaced")))
    errs.extend(_validate_versions(spec.get("versions")))
    return errs


def _validate_versions(versions: Any) -> list[FieldError]:
    if not isinstance(versions, list) or not versions:
        return [
            FieldError.invalid(
                "spec.versions", versions or [], "must have exactly one version marked as storage version"
            )
        ]
    errs: list[FieldError] = []
    storage = [v for v in versions if isinstance(v, dict) and v.get("storage")]
    if len(storage) != 1:
        errs.append(
            FieldError.invalid(
                "spec.versions", len(storage), "must have exactly one version marked as storage version"
            )
        )
    seen: set[str] = set()
    for path, version in object_items(versions, "spec.versions", errs):
        vname = version.get("name")
        if not vname or not _DNS_LABEL.match(str(vname)):
            errs.append(FieldError.invalid(f"{path}.name", vname, "must be a DNS-1035 label"))
        elif vname in seen:
            errs.append(FieldError.duplicate(f"{path}.name", vname))
        seen.add(str(vname))
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is None:
            errs.append(
                FieldError.required(f"{path}.schema.openAPIV3Schema", "Required value: schemas are required")
            )
            continue
        errs.extend(crschema.check_schema(schema, f"{path}.schema.openAPIV3Schema"))
        for j, column in enumerate(version.get("additionalPrinterColumns") or []):
            cpath = f"{path}.additionalPrinterColumns[{j}]"
            if not isinstance(column, dict) or not column.get("name"):
                errs.append(FieldError.required(f"{cpath}.name"))
            elif not column.get("jsonPath"):
                errs.append(FieldError.required(f"{cpath}.jsonPath"))
            elif column.get("type") not in ("integer", "number", "string", "boolean", "date"):
                errs.append(
                    FieldError.not_supported(
                        f"{cpath}.type",
                        column.get("type"),
                        ("integer", "number", "string", "boolean", "date"),
                    )
                )
        errs.extend(
            _validate_selectable_fields(version.get("selectableFields"), schema, f"{path}.selectableFields")
        )
    return errs


_MAX_SELECTABLE_FIELDS = 8


def _schema_at(schema: Any, path: str) -> Any:
    for part in path.lstrip(".").split("."):
        if not isinstance(schema, dict):
            return None
        schema = (schema.get("properties") or {}).get(part)
    return schema


def _validate_selectable_fields(fields: Any, schema: Any, path: str) -> list[FieldError]:
    """As apiextensions validates `selectableFields`: at most 8, each a unique JSON path to a
    string, integer or boolean field of the schema."""
    errs: list[FieldError] = []
    if not fields:
        return errs
    if len(fields) > _MAX_SELECTABLE_FIELDS:
        errs.append(
            FieldError(
                "FieldValueTooMany",
                path,
                f"Too many: {len(fields)}: must have at most {_MAX_SELECTABLE_FIELDS} items",
            )
        )
    seen: set[str] = set()
    for i, field in enumerate(fields):
        json_path = field.get("jsonPath") if isinstance(field, dict) else None
        fpath = f"{path}[{i}].jsonPath"
        if not json_path:
            errs.append(FieldError.required(fpath))
            continue
        if json_path in seen:
            errs.append(FieldError.duplicate(fpath, json_path))
        seen.add(json_path)
        target = _schema_at(schema, json_path) if str(json_path).startswith(".") else None
        if target is None:
            errs.append(
                FieldError.invalid(
                    fpath, json_path, "is an invalid path: must point to a field of the schema"
                )
            )
        elif target.get("type") not in ("string", "integer", "boolean"):
            errs.append(
                FieldError.invalid(
                    fpath, json_path, "selectable field must have type string, integer or boolean"
                )
            )
    return errs


def crd_resource_type(registry: Registry) -> ResourceType:
    return ResourceType(
        CRD_GROUP,
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        short_names=("crd", "crds"),
        categories=("api-extensions",),
        subresources=frozenset({"status"}),
        strategy=CRDStrategy(registry),
    )


# --------------------------------------------------------------------------- the controller


class CRDController:
    """Keeps the registry in step with stored CRDs and cleans up after deleted ones."""

    def __init__(self, registry: Registry, storage: Storage, objects: ObjectAPI) -> None:
        self._registry = registry
        self._storage = storage
        self._objects = objects
        self._served: dict[str, list[tuple[str, str, str]]] = {}
        self._cleanup: asyncio.Queue[str] = asyncio.Queue()
        self.crd_type = crd_resource_type(registry)
        registry.register(self.crd_type)
        self._sub = self._subscribe()
        objects.on_removed.append(self._on_removed)

    def _subscribe(self) -> Subscription:
        for entry in list(self._storage.iter_entries(CRD_STORAGE_KEY)):
            self._sync(entry.load())
        return self._storage.subscribe(CRD_STORAGE_KEY, flt=self._observe)

    def _observe(self, ev: StoredEvent) -> str | None:
        """Runs inside the storage write: register or unregister synchronously, defer writes."""
        if ev.type == "DELETED":
            self._stop_serving(ev.obj["metadata"]["name"], drop_objects=True)
        else:
            self._sync(ev.obj)
        return None

    def _on_removed(self, rt: ResourceType, obj: Obj) -> None:
        if rt is self.crd_type:
            self._stop_serving(obj["metadata"]["name"], drop_objects=True)

    def _sync(self, crd: Obj) -> None:
        name = crd["metadata"]["name"]
        if crd["metadata"].get("deletionTimestamp"):
            self._stop_serving(name, drop_objects=False)
            if CLEANUP_FINALIZER in (crd["metadata"].get("finalizers") or []):
                self._cleanup.put_nowait(name)
            return
        types = resource_types_for(crd)
        keys = [(rt.group, rt.version, rt.plural) for rt in types]
        for old in self._served.get(name, []):
            if old not in keys:
                self._registry.unregister(*old)
        for rt in types:
            self._registry.register(rt)
        self._served[name] = keys

    def _stop_serving(self, name: str, *, drop_objects: bool) -> None:
        keys = self._served.pop(name, [])
        for key in keys:
            self._registry.unregister(*key)
        if drop_objects and keys:
            group, _, plural = keys[0]
            self._delete_all(f"{plural}.{group}")

    def _delete_all(self, storage_key: str) -> None:
        for entry in list(self._storage.iter_entries(storage_key)):
            self._storage.remove(storage_key, entry.load())

    async def run(self) -> None:
        """Finish deletions (delete the CRs, drop the finalizer); resubscribe if a fault closes our watch."""
        try:
            while True:
                if self._sub.closed:
                    self._sub = self._subscribe()
                get = asyncio.ensure_future(self._cleanup.get())
                closed = asyncio.ensure_future(self._sub.wait())
                try:
                    await asyncio.wait({get, closed}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    closed.cancel()
                    if not get.done():
                        get.cancel()
                if get.done() and not get.cancelled():
                    self._finish_deletion(get.result())
        finally:
            self._sub.close()

    def _finish_deletion(self, name: str) -> None:
        entry = self._storage.get(CRD_STORAGE_KEY, "", name)
        if entry is None:
            return
        crd = entry.load()
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        if names.get("plural") and spec.get("group"):
            self._delete_all(f"{names['plural']}.{spec['group']}")
        crd["metadata"]["finalizers"] = [
            f for f in crd["metadata"].get("finalizers") or [] if f != CLEANUP_FINALIZER
        ]
        self._objects.update(self.crd_type, None, name, crd)
