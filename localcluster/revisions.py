"""ControllerRevisions: the template history StatefulSets and DaemonSets keep, as KCM keeps it.

A revision's `data` is the patch that puts the template back
(`{"spec": {"template": {..., "$patch": "replace"}}}`, keys sorted as Go's `json.Marshal` of a
map writes them), so a rollback finds its old revision by comparing data and renumbers it
rather than making a new one (`history.FindEqualRevisions`, `UpdateControllerRevision`).
Names are `<owner>-<hash>` with the hash spelled as `rand.SafeEncodeString` spells it; the
bytes hashed are ours, not Go's, so the strings differ from a real cluster's, not their shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from localcluster import errors
from localcluster.builtin.base import get_int
from localcluster.objects import ObjectAPI
from localcluster.registry import Obj

#: `rand.SafeEncodeString`'s alphabet: no vowels, no look-alike digits.
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_FNV_OFFSET, _FNV_PRIME = 0x811C9DC5, 0x01000193


def safe_encode(value: int) -> str:
    """`rand.SafeEncodeString(fmt.Sprint(value))`."""
    return "".join(_ALPHANUMS[ord(c) % len(_ALPHANUMS)] for c in str(value))


def fnv32(data: bytes) -> int:
    """FNV-1 (not 1a), 32 bits: what `history.HashControllerRevision` uses."""
    h = _FNV_OFFSET
    for b in data:
        h = ((h * _FNV_PRIME) & 0xFFFFFFFF) ^ b
    return h


def fnv32a(data: bytes) -> int:
    """FNV-1a, 32 bits: what `controller.ComputeHash` feeds the template into."""
    h = _FNV_OFFSET
    for b in data:
        h = ((h ^ b) * _FNV_PRIME) & 0xFFFFFFFF
    return h


def template_patch(obj: Obj) -> Obj:
    """`getPatch`: the object's template with `$patch: replace`, under spec."""
    template = dict((obj.get("spec") or {}).get("template") or {})
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def patch_bytes(data: Obj) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


def template_of(revision: Obj) -> Obj:
    """The template a revision records (its patch without the `$patch` directive)."""
    template = dict(((revision.get("data") or {}).get("spec") or {}).get("template") or {})
    template.pop("$patch", None)
    return template


def controller_of(obj: Obj) -> Obj | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def controller_ref(owner: Obj) -> Obj:
    """`metav1.NewControllerRef`."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


@dataclass(slots=True)
class History:
    """An owner's revisions (oldest first) and the one matching its template now."""

    revisions: list[Obj]
    update: Obj


class Revisions:
    """Reads and writes one owner kind's ControllerRevisions through `ObjectAPI`."""

    def __init__(self, objects: ObjectAPI) -> None:
        self.objects = objects
        self._rt = objects.registry.require("apps", "v1", "controllerrevisions")

    def owned(self, owner: Obj) -> list[Obj]:
        meta = owner["metadata"]
        uid = meta["uid"].encode()
        out = []
        for entry in self.objects.storage.iter_entries(self._rt.storage_key, meta["namespace"]):
            if uid not in entry.raw:
                continue
            rev = entry.load()
            ref = controller_of(rev)
            if ref is not None and ref.get("uid") == meta["uid"]:
                out.append(rev)
        out.sort(key=lambda r: (r.get("revision", 0), r["metadata"]["name"]))
        return out

    def sync(self, owner: Obj, *, hash_label: str, hash_of: Any, annotations: bool = False) -> History:
        """The owner's history with a revision for its current template, made or renumbered
        to be the newest as `history.FindEqualRevisions` + `UpdateControllerRevision` do.
        `hash_of(data_bytes, collision_count) -> str` names it; `hash_label` labels it."""
        revisions = self.owned(owner)
        data = template_patch(owner)
        newest = revisions[-1]["revision"] if revisions else 0
        equal = [r for r in revisions if r.get("data") == data]
        if equal:
            match = equal[-1]
            if match is not revisions[-1]:
                match["revision"] = newest + 1
                match = self.objects.update(
                    self._rt, match["metadata"]["namespace"], match["metadata"]["name"], match
                ).load()
                revisions = [r for r in revisions if r["metadata"]["name"] != match["metadata"]["name"]] + [
                    match
                ]
            return History(revisions, match)
        meta = owner["metadata"]
        collisions = get_int(owner, "status", "collisionCount")
        template_labels = ((owner.get("spec") or {}).get("template") or {}).get("metadata", {}).get(
            "labels"
        ) or {}
        while True:
            digest = hash_of(patch_bytes(data), collisions)
            name = f"{meta['name'][:223]}-{digest}"
            body: Obj = {
                "apiVersion": "apps/v1",
                "kind": "ControllerRevision",
                "metadata": {
                    "name": name,
                    "namespace": meta["namespace"],
                    "labels": {**template_labels, hash_label: digest},
                    "ownerReferences": [controller_ref(owner)],
                },
                "data": data,
                "revision": newest + 1,
            }
            if annotations and meta.get("annotations"):
                body["metadata"]["annotations"] = dict(meta["annotations"])
            try:
                created = self.objects.create(self._rt, meta["namespace"], body).load()
            except errors.StatusError as exc:
                if exc.code != 409:
                    raise
                collisions += 1  # a name taken by a different template: hash again, as with collisionCount
                continue
            return History([*revisions, created], created)

    def truncate(self, revisions: list[Obj], live: set[str], limit: int) -> None:
        """Delete the oldest revisions no pod or status refers to, beyond `limit`."""
        dead = [r for r in revisions if r["metadata"]["name"] not in live]
        for rev in dead[: max(0, len(dead) - limit)]:
            try:
                self.objects.delete(self._rt, rev["metadata"]["namespace"], rev["metadata"]["name"])
            except errors.StatusError as exc:
                if exc.code != 404:
                    raise
