"""PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386), strategic merge patch.

Strategic merge patch has no maintained Python library; this one follows
`k8s.io/apimachinery/pkg/util/strategicpatch` for the cases clients send, driven by the kind's
published schema: lists whose field carries `x-kubernetes-patch-strategy: merge` are merged by
`x-kubernetes-patch-merge-key` (pod conditions by type, containers by name, ownerReferences by
uid, ...); every other list is replaced (so `tolerations` and node `taints`, which are atomic
in Kubernetes, are replaced as on a real server). Directives: `$patch: replace|delete|merge`
on maps and list elements, `$retainKeys`, `$deleteFromPrimitiveList/<field>`; the
`$setElementOrder/<field>` that kubectl sends gives the order of the patched elements. A merged
list is ordered as `normalizeElementOrder` orders it: the patch's elements in the patch's (or
the directive's) order, interleaved with the elements only the server has, which keep their
relative order and go before a patch element only when the live list already had them in front
of it; so an element new to the list comes before the untouched ones.

`application/apply-patch+yaml` on an object is server-side apply, with field ownership:
`localcluster.fieldmanager` (`ObjectAPI.apply`). Only the `/scale` subresource still reads an
apply body here, strategic-merged onto the Scale.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import orjson
import yaml

from localcluster import errors
from localcluster.builtin import schemas
from localcluster.registry import ResourceType

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


def decode_body(body: bytes, content_type: str) -> Any:
    try:
        if content_type.endswith("yaml"):
            return yaml.safe_load(body)
        return orjson.loads(body)
    except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
        raise errors.bad_request(f"error decoding patch: {exc}") from exc


def apply_patch(content_type: str, original: Any, body: bytes, rt: ResourceType | None) -> Any:
    """The patched document; `original` may be modified."""
    media = content_type.split(";", 1)[0].strip()
    doc = decode_body(body, media)
    if media == JSON_PATCH:
        if not isinstance(doc, list):
            raise errors.bad_request("json patch must be a list of operations")
        try:
            return jsonpatch.apply_patch(original, doc, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise errors.StatusError(
                422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
            ) from exc
    if not isinstance(doc, dict):
        raise errors.bad_request("the patch must be a JSON object")
    if media == MERGE_PATCH:
        return merge_patch(original, doc)
    if media in (STRATEGIC_PATCH, APPLY_PATCH):
        if (
            rt is not None
            and schemas.kind_schema(rt.group, rt.version, rt.kind) is None
            and media == STRATEGIC_PATCH
        ):
            if rt.group not in ("", "autoscaling"):
                raise errors.StatusError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types include: {JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}",
                )
        schema = schemas.kind_schema(rt.group, rt.version, rt.kind) if rt is not None else None
        return strategic_merge(original, doc, schema)
    raise errors.StatusError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {', '.join(PATCH_TYPES)}",
    )


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = merge_patch(target.get(key), value)
    return target


def strategic_merge(original: Any, patch: dict[str, Any], schema: schemas.Schema | None) -> Any:
    return _merge_map(original if isinstance(original, dict) else {}, patch, schema)


def _merge_map(
    original: dict[str, Any], patch: dict[str, Any], schema: schemas.Schema | None
) -> dict[str, Any] | None:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    if directive not in (None, "merge"):
        raise errors.bad_request(f"Unknown patch type: {directive}")
    retain = patch.get("$retainKeys")
    result = original
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        sub_schema = schemas.child(schema, key)
        current = result.get(key)
        if isinstance(value, dict):
            merged = _merge_map(current if isinstance(current, dict) else {}, value, sub_schema)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            order = patch.get(f"$setElementOrder/{key}")
            result[key] = _merge_list(
                current if isinstance(current, list) else [],
                value,
                sub_schema,
                order=order if isinstance(order, list) else None,
            )
        else:
            result[key] = value
    if isinstance(retain, list):
        for key in list(result):
            if key not in retain:
                del result[key]
    return result


def _merge_list(
    original: list[Any], patch: list[Any], schema: schemas.Schema | None, *, order: list[Any] | None = None
) -> list[Any]:
    resolved = schemas.resolve(schema) if schema is not None else None
    strategy = str((resolved or {}).get("x-kubernetes-patch-strategy") or "")
    merge_key = (resolved or {}).get("x-kubernetes-patch-merge-key")
    if "merge" not in strategy.split(","):
        return [
            _strip_directives(v) for v in patch if not (isinstance(v, dict) and v.get("$patch") == "delete")
        ]
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return [v for v in patch if not (isinstance(v, dict) and "$patch" in v)]
    item_schema = schemas.items(schema)
    if not merge_key:  # a merged list of primitives: a set union
        result = list(original)
        for value in patch:
            if value not in result:
                result.append(value)
        return _normalize_order(result, original, order if order is not None else patch, None)
    result = list(original)
    for element in patch:
        if not isinstance(element, dict):
            raise errors.bad_request(f"merging a list by {merge_key!r}: element is not an object")
        if merge_key not in element:
            raise errors.bad_request(f"map: {element} does not contain declared merge key: {merge_key}")
        key_value = element[merge_key]
        index = next(
            (i for i, o in enumerate(result) if isinstance(o, dict) and o.get(merge_key) == key_value), None
        )
        if element.get("$patch") == "delete":
            if index is not None:
                del result[index]
            continue
        if index is None:
            result.append(_strip_directives(element))
        else:
            merged = _merge_map(result[index], element, item_schema)
            if merged is None:
                del result[index]
            else:
                result[index] = merged
    live_patch = [v for v in patch if not (isinstance(v, dict) and v.get("$patch") == "delete")]
    return _normalize_order(result, original, order if order is not None else live_patch, merge_key)


def _normalize_order(
    merged: list[Any], original: list[Any], patch_order: list[Any], merge_key: str | None
) -> list[Any]:
    """strategicpatch's `normalizeElementOrder` + `mergeSortedSlice` for one merged list."""

    def ident(value: Any) -> Any:
        if merge_key is None:
            return (
                orjson.dumps(value, option=orjson.OPT_SORT_KEYS) if isinstance(value, dict | list) else value
            )
        return value.get(merge_key) if isinstance(value, dict) else value

    patch_index: dict[Any, int] = {}
    for i, v in enumerate(patch_order):
        patch_index.setdefault(ident(v), i)
    server_index: dict[Any, int] = {}
    for i, v in enumerate(original):
        server_index.setdefault(ident(v), i)
    patch_items = sorted((v for v in merged if ident(v) in patch_index), key=lambda v: patch_index[ident(v)])
    server_only = sorted(
        (v for v in merged if ident(v) not in patch_index),
        key=lambda v: server_index.get(ident(v), len(server_index)),
    )
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patch_items):
        if j >= len(patch_items):
            out.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            out.append(patch_items[j])
            j += 1
        else:
            li, ri = server_index.get(ident(server_only[i])), server_index.get(ident(patch_items[j]))
            if li is not None and ri is not None and li < ri:
                out.append(server_only[i])
                i += 1
            else:
                out.append(patch_items[j])
                j += 1
    return out


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value
