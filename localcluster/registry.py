"""The registry of resource types the local API server serves.

Everything that varies per kind lives here, so the REST layer, the object API, discovery,
OpenAPI and the CRD machinery all read one table instead of keeping their own lists:

- `ResourceType` names a REST resource (group, version, plural, kind, scope, short names,
  categories, subresources, verbs) and carries its `Strategy`.
- `Strategy` holds the per-kind hooks the real API server keeps in its `rest.RESTCreateStrategy`
  / `RESTUpdateStrategy` / table convertor: `default`, `prepare_for_create`, `prepare_for_update`,
  `prepare_for_status_update`, `validate`, `prune`, `selectable_fields` (field selectors),
  `table` (the columns `kubectl get` prints) and graceful deletion. The base class implements the
  generic behaviour (status subresource semantics, generation bumps on spec change) so a kind
  only overrides what is special about it. The CRD engineer subclasses it for custom resources
  (schema validation, pruning, defaulting, printer columns).
- `Registry` is the table: `register`, `unregister`, `get(group, version, plural)`,
  `by_kind(group, version, kind)`, `by_group_resource`, `all()`, and `subscribe(callback)` so
  discovery and OpenAPI refresh when a CRD adds or removes a type. Callbacks are plain sync
  callables `callback(event, rt)` with event "added" or "removed"; they must not block.

Storage is keyed by group and plural (`ResourceType.storage_key`), not version: several
versions of one resource (a CRD with v1alpha1 and v1) share their objects as the real server does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

Obj = dict[str, Any]

DEFAULT_VERBS: tuple[str, ...] = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)


@dataclass(frozen=True, slots=True)
class FieldError:
    """One cause of a 422 Invalid, as `field.Error`: `type` is the cause reason
    (`FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`, `FieldValueForbidden`,
    `FieldValueDuplicate`, `FieldValueTooLong`), `field` the JSON path (`spec.replicas`)."""

    type: str
    field: str
    message: str

    @staticmethod
    def required(path: str, message: str = "Required value") -> FieldError:
        return FieldError("FieldValueRequired", path, message)

    @staticmethod
    def invalid(path: str, value: Any, message: str) -> FieldError:
        return FieldError("FieldValueInvalid", path, f"Invalid value: {_show(value)}: {message}")

    @staticmethod
    def not_supported(path: str, value: Any, supported: Iterable[str]) -> FieldError:
        values = ", ".join(f'"{v}"' for v in supported)
        return FieldError(
            "FieldValueNotSupported", path, f"Unsupported value: {_show(value)}: supported values: {values}"
        )

    @staticmethod
    def forbidden(path: str, message: str) -> FieldError:
        return FieldError("FieldValueForbidden", path, f"Forbidden: {message}")

    @staticmethod
    def duplicate(path: str, value: Any) -> FieldError:
        return FieldError("FieldValueDuplicate", path, f"Duplicate value: {_show(value)}")


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True, slots=True)
class ScaleSubresource:
    """Where `/scale` reads and writes (JSON paths as a CRD's `subresources.scale`)."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = ".status.selector"


@dataclass(frozen=True, slots=True)
class TableColumn:
    """A `meta.k8s.io/v1` Table column definition."""

    name: str
    type: str = "string"
    format: str = ""
    description: str = ""
    priority: int = 0


class Strategy:
    """Per-kind behaviour. The defaults are what the real server does for a plain kind:
    with a status subresource, main-resource writes keep the old status and `/status` writes
    keep everything but status; `metadata.generation` starts at 1 and is bumped when anything
    outside metadata and status changes."""

    has_status_subresource: bool = False
    #: Whether metadata.generation is kept (not for pods, nodes, namespaces, configmaps, ...).
    tracks_generation: bool = True
    #: Field selector labels this kind supports besides metadata.name / metadata.namespace.
    field_labels: frozenset[str] = frozenset()
    #: Pods: DELETE sets deletionTimestamp and waits (see `graceful_period`).
    graceful_deletion: bool = False
    #: DELETE answers with the deleted object, not a Status (the store's `ReturnDeletedObject`:
    #: pods, services, service accounts).
    return_deleted_object: bool = False
    #: PUT of a missing object creates it (`AllowCreateOnUpdate`: leases, events, services, ...).
    allow_create_on_update: bool = False
    #: PUT without metadata.resourceVersion is allowed (`AllowUnconditionalUpdate`; not for leases).
    allow_unconditional_update: bool = True
    #: Custom resources are decoded as unstructured objects: a body without `kind` or
    #: `apiVersion` is refused (built-in kinds take them from the URL).
    requires_type_meta: bool = False

    # -- writes -------------------------------------------------------------------------
    def default(self, obj: Obj) -> None:
        """Fill defaults (the scheme's defaulting functions plus admission defaults)."""

    def prune(self, obj: Obj) -> None:
        """Drop fields the kind's schema does not know (as the real decoder does)."""

    def prepare_for_create(self, obj: Obj) -> None:
        if self.has_status_subresource:
            obj.pop("status", None)
        if self.tracks_generation:
            obj["metadata"]["generation"] = 1
        else:
            obj["metadata"].pop("generation", None)

    def prepare_for_update(self, obj: Obj, old: Obj) -> None:
        if self.has_status_subresource:
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)
        meta = obj["metadata"]
        if not self.tracks_generation:
            meta.pop("generation", None)
            return
        generation = old["metadata"].get("generation", 1)
        meta["generation"] = generation + 1 if _spec_changed(obj, old) else generation

    def prepare_for_status_update(self, obj: Obj, old: Obj) -> None:
        """`/status`: everything outside metadata and status comes from the old object."""
        for key in list(obj):
            if key not in ("metadata", "status", "apiVersion", "kind"):
                del obj[key]
        for key, value in old.items():
            if key not in ("metadata", "status", "apiVersion", "kind"):
                obj[key] = value
        if self.tracks_generation:
            obj["metadata"]["generation"] = old["metadata"].get("generation", 1)
        else:
            obj["metadata"].pop("generation", None)

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        """Kind-specific validation; object metadata is validated by the caller."""
        return []

    def validate_status(self, obj: Obj, old: Obj) -> list[FieldError]:
        return []

    # -- reads --------------------------------------------------------------------------
    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        """Values for field selectors; keys beyond metadata.* must be in `field_labels`."""
        return {}

    def table(self, obj: Obj) -> tuple[list[TableColumn], list[Any]] | None:
        """Extra `kubectl get` columns after NAME and before AGE (None: just name and age)."""
        return None

    def released(self, obj: Obj) -> None:
        """The object is gone from storage: free what it held (a service's node ports)."""

    def graceful_period(self, obj: Obj, requested: int | None) -> int | None:
        """Seconds of grace for DELETE, or None to delete at once. Only read when
        `graceful_deletion` is set."""
        return None


def _spec_changed(obj: Obj, old: Obj) -> bool:
    for key in obj.keys() | old.keys():
        if key in ("metadata", "status", "apiVersion", "kind"):
            continue
        if obj.get(key) != old.get(key):
            return True
    return False


@dataclass(eq=False, slots=True)
class ResourceType:
    """One served REST resource. `subresources` names what is routed (`status`, `scale`,
    `binding`, `eviction`); `scale` says where `/scale` reads and writes."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    verbs: tuple[str, ...] = DEFAULT_VERBS
    strategy: Strategy = field(default_factory=Strategy)
    scale: ScaleSubresource | None = None
    #: Whether discovery lists this version first for its group (the preferred version).
    preferred: bool = True

    def __post_init__(self) -> None:
        if not self.singular:
            self.singular = self.kind.lower()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def storage_key(self) -> str:
        """Objects are stored per group+plural, shared by all versions."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def group_resource(self) -> str:
        return self.storage_key


RegistryEvent = Literal["added", "removed"]
Listener = Callable[[RegistryEvent, ResourceType], None]


class Registry:
    """The served resource types, with change notification for discovery."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._listeners: list[Listener] = []

    def register(self, rt: ResourceType) -> None:
        """Add or replace a type (a CRD update re-registers its versions)."""
        self._types[(rt.group, rt.version, rt.plural)] = rt
        self._notify("added", rt)

    def unregister(self, group: str, version: str, plural: str) -> ResourceType | None:
        rt = self._types.pop((group, version, plural), None)
        if rt is not None:
            self._notify("removed", rt)
        return rt

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def require(self, group: str, version: str, plural: str) -> ResourceType:
        """A type the cluster always serves (a built-in): its absence is a fault in how the
        cluster was put together, never an answer for a client, so it raises."""
        rt = self._types.get((group, version, plural))
        if rt is None:
            raise LookupError(f"{plural}.{group}/{version} is not registered")
        return rt

    def by_kind(self, group: str, version: str, kind: str) -> ResourceType | None:
        for rt in self._types.values():
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        return None

    def by_group_resource(self, group: str, plural: str) -> list[ResourceType]:
        return [rt for rt in self._types.values() if rt.group == group and rt.plural == plural]

    def all(self) -> list[ResourceType]:
        return list(self._types.values())

    def groups(self) -> dict[str, list[str]]:
        """group -> versions, in registration order (the first is preferred unless marked)."""
        out: dict[str, list[str]] = {}
        for rt in self._types.values():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener(event, rt)` on every register/unregister; returns an unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _notify(self, event: RegistryEvent, rt: ResourceType) -> None:
        for listener in list(self._listeners):
            listener(event, rt)
