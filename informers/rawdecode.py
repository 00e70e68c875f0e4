"""Schema-directed decoding for projected informers: parse only what the projection keeps.

Why: with `pod_projection`, a cold start spent most of its time on fields nobody reads. orjson
parses the whole ~4.7 KB pod into ~150 containers (~33 us), the projection copies out a few
dozen values (~8 us) and freeing the rest costs as much as the projection again. msgspec,
given a schema (TypedDicts below), skips unknown fields inside its C parser without creating
any Python object for them, so `managedFields`, containers, volumes and container states are
never materialised.

What comes out is exactly what `pod_projection` makes of the same pod (plain dicts, lists,
str, int, bool, None; equal sub-objects shared from the same tables), so listers and
controllers see no difference; `tests/informers/test_rawdecode.py` checks this against the
orjson + `pod_projection` path. The schemas are derived from the projection's own field
lists (`_META_KEEP`, ...) so the two cannot drift apart. Sub-objects shared between pods
(labels, owner references, tolerations, conditions) are taken as undecoded JSON text
(`msgspec.Raw`): their text is the sharing key, and on a hit they are never parsed at all.

Anything the schema does not accept (a section of an unexpected type, malformed JSON) falls
back, for that LIST page or watch event, to orjson + the transform: same result (or the same
error) as without this module. Watch events other than ADDED / MODIFIED / DELETED / BOOKMARK
(ERROR carries a Status, not a pod) are decoded generically by orjson.

Only transforms registered in `_DECODERS` get a decoder; informers of every other resource
keep the full-object orjson path.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any, Protocol, TypedDict

import msgspec
import orjson

from apiclient import WatchEvent
from informers import gcpolicy
from informers import transform as _t

Obj = dict[str, Any]

# TypedDict built from a non-literal field table: mypy cannot check that, msgspec can.
_typed_dict: Any = TypedDict
_Raw = msgspec.Raw
_list: Any = list  # list[...] of a runtime-built TypedDict, which mypy cannot see as a type
_OptRaw = msgspec.Raw  # null arrives as the text "null" (a union with None would not decode)

_PodMeta = _typed_dict(
    "_PodMeta",
    {
        **dict.fromkeys(_t._META_KEEP, Any),
        "labels": _OptRaw,
        "annotations": dict[str, Any] | None,
        "ownerReferences": _OptRaw,
    },
    total=False,
)
_Volume = _typed_dict("_Volume", dict.fromkeys(_t._VOLUME_KEEP, Any), total=False)
_PodSpec = _typed_dict(
    "_PodSpec",
    {**dict.fromkeys(_t._SPEC_KEEP, Any), "tolerations": _OptRaw, "volumes": _list[_Volume] | None},
    total=False,
)
_ContainerStatus = _typed_dict(
    "_ContainerStatus", {"name": Any, "ready": Any, "restartCount": Any, "started": Any}, total=False
)
_PodStatus = _typed_dict(
    "_PodStatus",
    {
        **dict.fromkeys(_t._STATUS_KEEP, Any),
        "conditions": _OptRaw,
        "containerStatuses": _list[_ContainerStatus] | None,
        "initContainerStatuses": _list[_ContainerStatus] | None,
    },
    total=False,
)
_Pod = _typed_dict(
    "_Pod", {"metadata": _PodMeta | None, "spec": _PodSpec | None, "status": _PodStatus | None}, total=False
)
_PodList = _typed_dict(
    "_PodList", {"metadata": dict[str, Any] | None, "items": _list[_Pod] | None}, total=False
)
_PodEvent = _typed_dict("_PodEvent", {"type": str, "object": _Pod | None}, total=False)

_intern_short = _t._intern_short
_share_text = _t.share_json_text
_LAST_APPLIED = _t.LAST_APPLIED
_EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})


def _share_field(section: Obj, key: str, table: _t._Shared, build: Callable[[Any], Any]) -> None:
    """Put the shared projection in place of the raw JSON text at `section[key]`; drop a falsy
    value, which the projection leaves out."""
    text = section.get(key)
    if text is None:
        return
    shared = _share_text(table, bytes(text), build)
    if shared is None:
        del section[key]
    else:
        section[key] = shared


def _project_narrow_pod(pod: Obj) -> Obj:
    """`pod_projection` of a pod decoded with `_Pod`; edits the decoded sections in place.

    They are fresh from the decoder and hold nothing but kept fields, so they become the
    cached sections (key order may differ from `pod_projection`'s; equality does not).
    """
    meta = pod.get("metadata") or {}
    for key in ("namespace", "generateName", "creationTimestamp"):
        value = meta.get(key)
        if value:
            meta[key] = _intern_short(value)
    for key, table, build in (
        ("labels", _t._labels, _t._build_labels),
        ("ownerReferences", _t._owners, _t._build_owners),
    ):
        _share_field(meta, key, table, build)
    annotations = meta.get("annotations")
    if annotations:
        if _LAST_APPLIED in annotations:
            del annotations[_LAST_APPLIED]
            if not annotations:
                del meta["annotations"]
    elif "annotations" in meta:
        del meta["annotations"]

    spec = pod.get("spec") or {}
    for key in ("nodeName", "priorityClassName", "schedulerName", "restartPolicy"):
        if key in spec:
            spec[key] = _intern_short(spec[key])
    _share_field(spec, "tolerations", _t._tolerations, _t._build_tolerations)
    if "volumes" in spec and not spec["volumes"]:
        del spec["volumes"]

    status = pod.get("status") or {}
    for key in ("phase", "startTime"):
        if key in status:
            status[key] = _intern_short(status[key])
    _share_field(status, "conditions", _t._conditions, _t._build_conditions)
    for key in ("containerStatuses", "initContainerStatuses"):
        if key in status:
            statuses = status[key]
            if statuses:
                status[key] = _t._share_container_statuses(statuses)
            else:
                del status[key]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


class RawDecoder(Protocol):
    """Decodes an informer's raw LIST pages and watch lines straight into cached objects."""

    def decode_page(self, raw: bytes, out: list[Obj], *, freeze: bool) -> Obj | None:
        """Append a LIST page's cached objects to `out` and return the list's metadata.

        None (and nothing appended) if the page is not what the schema expects: the caller
        then takes the general path (orjson and the transform) for that page.
        """
        ...

    def decode_event(self, line: bytes) -> WatchEvent:
        """One watch line; the object of an ADDED / MODIFIED / DELETED / BOOKMARK event is final."""
        ...


class PodProjectionDecoder:
    """The `RawDecoder` of `pod_projection` (see the module docstring)."""

    __slots__ = ("_event", "_page")

    def __init__(self) -> None:
        self._page = msgspec.json.Decoder(_PodList)
        self._event = msgspec.json.Decoder(_PodEvent)

    def decode_page(self, raw: bytes, out: list[Obj], *, freeze: bool) -> Obj | None:
        if freeze:
            gc.collect(0)
        with gcpolicy.paused():
            try:
                page = self._page.decode(raw)
            except msgspec.DecodeError:
                return None
            items = page.get("items") or []
            # Project item by item, releasing each decoded pod at once (see `gcpolicy.transform_page`).
            items.reverse()
            pop, append, project = items.pop, out.append, _project_narrow_pod
            for _ in range(len(items)):
                append(project(pop()))
            if freeze:
                gc.freeze()
        meta: Obj = page.get("metadata") or {}
        return meta

    def decode_event(self, line: bytes) -> WatchEvent:
        try:
            frame = self._event.decode(line)
        except msgspec.DecodeError:
            frame = None
        if frame is not None:
            event_type = frame.get("type", "")
            if event_type in _EVENT_TYPES:
                return WatchEvent(event_type, _project_narrow_pod(frame.get("object") or {}))
        # ERROR (a Status), an unknown type, or a shape the schema rejects: as without a decoder.
        full = orjson.loads(line)
        event_type = str(full.get("type", ""))
        obj = full.get("object") or {}
        if event_type in _EVENT_TYPES:
            obj = _t.pod_projection(obj)
        return WatchEvent(event_type, obj)


_DECODERS: dict[Callable[[Obj], Obj], Callable[[], RawDecoder]] = {_t.pod_projection: PodProjectionDecoder}
_instances: dict[Callable[[Obj], Obj], RawDecoder] = {}


def decoder_for(transform: Callable[[Obj], Obj] | None) -> RawDecoder | None:
    """The schema-directed decoder producing `transform`'s output, if it has one (decoders are stateless: one each)."""
    if transform is None:
        return None
    found = _instances.get(transform)
    if found is None:
        factory = _DECODERS.get(transform)
        if factory is None:
            return None
        found = _instances[transform] = factory()
    return found
