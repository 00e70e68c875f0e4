"""`metadata.managedFields` bookkeeping for one write, as the field manager of
kube-apiserver v1.24 keeps it (`fieldmanager.FieldManager` with its strip-meta, timestamp and
manager-info layers over SMD's `merge.Updater`).

Each entry is one manager with one operation (and subresource); Update entries carry the
apiVersion in their identity, Apply entries do not. An Update gives its manager the fields it
added or changed, taking them from every other manager; an Apply makes its manager own exactly
what it applied, removes fields it applied before and applies no longer (unless someone else
owns them), and fails with a conflict when it would change a field another manager owns,
unless forced.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import orjson

from kubeutil.timestamps import format_time, utcnow
from localcluster import errors
from localcluster.fieldmanager import fieldpath, typed
from localcluster.fieldmanager.fieldpath import Trie
from localcluster.fieldmanager.typeinfo import Type

APPLY, UPDATE = "Apply", "Update"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
BEFORE_FIRST_APPLY = "before-first-apply"
#: The only manager whose applies may upgrade from client-side apply (`lastAppliedManager`).
_KUBECTL = "kubectl"

#: `stripMetaManager`: fields no manager owns.
_STRIPPED: Trie = {
    "f:apiVersion": {},
    "f:kind": {},
    "f:metadata": {
        ".": {},
        "f:name": {},
        "f:namespace": {},
        "f:creationTimestamp": {},
        "f:selfLink": {},
        "f:uid": {},
        "f:clusterName": {},
        "f:generation": {},
        "f:managedFields": {},
        "f:resourceVersion": {},
    },
}


@dataclass(slots=True)
class Entry:
    manager: str
    operation: str
    api_version: str
    subresource: str
    fields: Trie
    time: str | None
    #: False for an entry read back from the stored object: its FieldsV1 is already in order.
    fresh: bool = True

    @property
    def ident(self) -> tuple[str, str, str, str]:
        return (
            self.manager,
            self.operation,
            self.api_version if self.operation == UPDATE else "",
            self.subresource,
        )


Managed = dict[tuple[str, str, str, str], Entry]


def _now() -> str:
    return format_time(utcnow())


def decode(entries: Any, *, stored: bool = False) -> Managed | None:
    """The entries of `metadata.managedFields`; None when they cannot be read. `stored`: they
    come from a stored object (this package wrote them, in order), not from a client."""
    if not isinstance(entries, list):
        return None
    out: Managed = {}
    for raw in entries:
        if not isinstance(raw, dict):
            return None
        fields = raw.get("fieldsV1")
        operation = raw.get("operation")
        if (
            operation not in (APPLY, UPDATE)
            or raw.get("fieldsType", "FieldsV1") != "FieldsV1"
            or not isinstance(fields or {}, dict)
        ):
            return None
        entry = Entry(
            str(raw.get("manager") or ""),
            operation,
            str(raw.get("apiVersion") or ""),
            str(raw.get("subresource") or ""),
            fields or {},
            raw.get("time"),
            fresh=not stored,
        )
        previous = out.get(entry.ident)
        if previous is not None:
            entry.fields = fieldpath.union(previous.fields, entry.fields)
            entry.fresh = True
        out[entry.ident] = entry
    return out


def encode(managed: Managed) -> list[dict[str, Any]]:
    """Entries sorted as `sortEncodedManagedFields`: Apply before Update, then oldest first."""

    def order(e: Entry) -> tuple[str, str, str, str, str]:
        return (e.operation, e.time or "", e.manager, e.api_version, e.subresource)

    out = []
    for e in sorted(managed.values(), key=order):
        item: dict[str, Any] = {"manager": e.manager, "operation": e.operation, "apiVersion": e.api_version}
        if e.time is not None:
            item["time"] = e.time
        item["fieldsType"] = "FieldsV1"
        item["fieldsV1"] = fieldpath.sort_trie(e.fields) if e.fresh else e.fields
        if e.subresource:
            item["subresource"] = e.subresource
        out.append(item)
    return out


def is_reset(entries: Any) -> bool:
    """`isResetManagedFields`: `[]` or `[{}]` in a request clears ownership."""
    return bool(entries == [] or entries == [{}])


def _strip(fields: Trie, ignored: tuple[str, ...]) -> Trie:
    out = fieldpath.difference(fields, _STRIPPED)
    for key in ignored:
        out.pop(fieldpath.field(key), None)
    return out


def update(
    old: Any,
    new: Any,
    managed: Managed,
    manager: str,
    api_version: str,
    subresource: str,
    t: Type,
    ignored: tuple[str, ...] = (),
) -> Managed:
    """An Update (create, PUT, non-apply PATCH): the writer owns what it changed, and nobody
    keeps fields that are gone."""
    removed: Trie
    if not old and isinstance(new, dict):
        changed, removed = _strip(typed.created(new, t), ignored), {}
    else:
        changed, removed, _ = typed.diff(old, new, t)
        changed, removed = _strip(changed, ignored), _strip(removed, ignored)
    if not changed and not removed:
        return managed
    out = _others_lose(managed, changed, removed, skip=None)
    ident = (manager, UPDATE, api_version, subresource)
    mine = fieldpath.difference(changed, removed)
    if mine:
        previous = out.get(ident)
        fields = fieldpath.union(mine, previous.fields) if previous is not None else mine
        # the /scale handler of v1.24 rebuilds its entry without a time
        out[ident] = Entry(
            manager, UPDATE, api_version, subresource, fields, None if subresource == "scale" else _now()
        )
    return cap_updaters(out)


#: `DefaultMaxUpdateManagers`, and the bucket older Update entries are merged into.
MAX_UPDATE_MANAGERS = 10
ANCIENT = "ancient-changes"


def cap_updaters(managed: Managed, limit: int = MAX_UPDATE_MANAGERS) -> Managed:
    """`capManagersManager`: past `limit` Update entries, the oldest are merged, per apiVersion,
    into an `ancient-changes` entry that takes the time of the newest merged in."""
    updaters = [ident for ident, e in managed.items() if e.operation == UPDATE]
    if len(updaters) <= limit:
        return managed
    out = dict(managed)
    updaters.sort(
        key=lambda ident: (
            _seconds(out[ident].time),
            orjson.dumps(
                {
                    "manager": ident[0],
                    "operation": UPDATE,
                    "apiVersion": ident[2],
                    **({"subresource": ident[3]} if ident[3] else {}),
                }
            ),
        )
    )
    first_of_version: dict[str, tuple[str, str, str, str]] = {}
    length = len(updaters)
    for ident in updaters:
        if length <= limit:
            break
        entry = out[ident]
        version = entry.api_version
        bucket = (ANCIENT, UPDATE, version, "")
        first = first_of_version.get(version)
        if first is None:
            first_of_version[version] = ident
            continue
        if bucket not in out:
            moved = out.pop(first)
            out[bucket] = Entry(ANCIENT, UPDATE, version, "", moved.fields, moved.time)
        out[bucket] = Entry(
            ANCIENT, UPDATE, version, "", fieldpath.union(entry.fields, out[bucket].fields), entry.time
        )
        del out[ident]
        length -= 1
    return out


def _seconds(time: str | None) -> int:
    if not time:
        return 0
    return int(dt.datetime.strptime(time, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp())


def _others_lose(
    managed: Managed, changed: Trie, removed: Trie, skip: tuple[str, str, str, str] | None
) -> Managed:
    out: Managed = {}
    for ident, entry in managed.items():
        if ident != skip:
            fields = entry.fields
            if changed:
                fields = fieldpath.difference(fields, changed)
            if removed:
                fields = fieldpath.difference(fields, removed)
            if not fields:
                continue
            if fields is not entry.fields:
                entry = Entry(
                    entry.manager, entry.operation, entry.api_version, entry.subresource, fields, entry.time
                )
        out[ident] = entry
    return out


def apply(
    live: Any,
    config: dict[str, Any],
    managed: Managed,
    manager: str,
    subresource: str,
    t: Type,
    *,
    force: bool,
    ignored: tuple[str, ...] = (),
    allowed: Trie | None = None,
) -> tuple[dict[str, Any], Managed]:
    """An Apply: the merged object and the new entries, or a 409 naming each conflict.

    `allowed` (`lastAppliedManager`): the fields of the live object's client-side
    last-applied configuration. When every conflict is one of them, the apply is an upgrade
    from client-side apply and goes through as if forced; otherwise only the others are
    reported."""
    api_version = str(config.get("apiVersion") or "")
    ident = (manager, APPLY, "", subresource)
    applied = _strip(typed.field_set(config, t), ignored)
    merged = typed.merge(live, config, t)
    previous = managed.get(ident)
    entries = dict(managed)
    entries[ident] = Entry(manager, APPLY, api_version, subresource, applied, None)
    if previous is not None and previous.fields:
        owned: Trie = {}
        for entry in entries.values():
            owned = fieldpath.union(owned, entry.fields)
        typed.remove(merged, previous.fields, owned, t)
    changed, removed, _ = typed.diff(live, merged, t)
    changed, removed = _strip(changed, ignored), _strip(removed, ignored)
    conflicts: list[tuple[Entry, tuple[str, ...]]] = []
    for other, entry in entries.items():
        if other != ident:
            conflicts += [
                (entry, path) for path in fieldpath.members(fieldpath.intersection(entry.fields, changed))
            ]
    if conflicts and not force and allowed is not None and manager == _KUBECTL:
        conflicts = [(e, p) for e, p in conflicts if not _has_member(allowed, p)]
    if conflicts and not force:
        raise conflict_error(conflicts)
    out = _others_lose(entries, changed, removed, skip=ident)
    if not applied:
        del out[ident]  # an empty set is no entry, the applier's included
    else:
        out[ident].time = _now()  # even when nothing changed (`ReturnInputOnNoop`)
    return merged, out


def last_applied_fields(live: dict[str, Any], api_version: str, t: Type) -> Trie | None:
    """The field set of the `kubectl.kubernetes.io/last-applied-configuration` annotation,
    when it is of the live object's version."""
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(LAST_APPLIED)
    if not raw:
        return None
    try:
        last = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(last, dict) or last.get("apiVersion") != api_version:
        return None
    return typed.field_set(last, t)


def _has_member(trie: Trie, path: tuple[str, ...]) -> bool:
    node: Trie | None = trie
    for element in path:
        node = node.get(element) if node is not None else None
        if node is None:
            return False
    return node is not None and fieldpath.is_member(node)


def _manager_name(entry: Entry) -> str:
    """`printManager`: Update managers are named with the apiVersion they wrote."""
    name = orjson.dumps(entry.manager).decode()
    if entry.subresource:
        name += f" with subresource {orjson.dumps(entry.subresource).decode()}"
    if entry.operation == UPDATE:
        name += f" using {entry.api_version}"
    return name


def conflict_error(conflicts: list[tuple[Entry, tuple[str, ...]]]) -> errors.StatusError:
    """`internal.NewConflictError`: 409 Conflict, one `FieldManagerConflict` cause per field."""
    conflicts = sorted(
        conflicts, key=lambda c: (_manager_name(c[0]), [fieldpath.element_order(p) for p in c[1]])
    )
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {_manager_name(e)}",
            "field": fieldpath.path_string(p),
        }
        for e, p in conflicts
    ]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {_manager_name(entry)}: {fieldpath.path_string(path)}"
    else:
        lines: list[str] = []
        by_manager: dict[str, list[str]] = {}
        for entry, path in conflicts:
            by_manager.setdefault(_manager_name(entry), []).append(fieldpath.path_string(path))
        for name in sorted(by_manager):
            lines.append(f"conflicts with {name}:")
            lines += [f"- {p}" for p in by_manager[name]]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return errors.StatusError(409, "Conflict", message, {"causes": causes})
