"""Which shape a GET, LIST or WATCH answers in, from its `Accept` header, and the metadata-only shapes.

kube-apiserver serves three transformations of an object besides the object itself, asked for
with media-type parameters (`application/json;as=Table;g=meta.k8s.io;v=v1`): `Table` (what
`kubectl get` prints), `PartialObjectMetadata` and `PartialObjectMetadataList` (metadata only:
client-go's metadata informers, kubernetes_asyncio's `Accept` override). The first media range
this server can produce wins, so a client that lists protobuf first (client-go's metadata client
does) gets JSON of the transformation it asked for next. A `PartialObjectMetadataList` asked of a
single object, or a `PartialObjectMetadata` of a list, is the real server's 406.

A metadata-only object carries the object's whole `metadata`; a list's `metadata` only
`resourceVersion` and `continue` (the server's conversion drops `remainingItemCount`).
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from localcluster import errors

TABLE = "Table"
PARTIAL = "PartialObjectMetadata"
PARTIAL_LIST = "PartialObjectMetadataList"
_VERSIONS = ("v1", "v1beta1")
_JSON_TYPES = ("application/json", "application/*", "*/*")


@dataclass(frozen=True, slots=True)
class Shape:
    """`as_` is "" (the object itself), `Table`, `PartialObjectMetadata` or `PartialObjectMetadataList`."""

    as_: str = ""
    version: str = "v1"

    @property
    def api_version(self) -> str:
        return f"meta.k8s.io/{self.version}"


PLAIN = Shape()


def negotiate(accept: str) -> Shape:
    """The first media range of `accept` this server answers (JSON, plain or transformed);
    plain JSON when nothing matches, as the server falls back for an `Accept` it half knows."""
    for media_range in accept.split(","):
        parts = [p.strip() for p in media_range.split(";")]
        if parts[0].lower() not in _JSON_TYPES:
            continue
        params = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        as_ = params.get("as", "")
        if not as_:
            return PLAIN
        if (
            as_ in (TABLE, PARTIAL, PARTIAL_LIST)
            and params.get("g") == "meta.k8s.io"
            and params.get("v") in _VERSIONS
        ):
            return Shape(as_, params["v"])
    return PLAIN


def _go_type(group: str, kind: str, *, custom: bool) -> str:
    if custom:
        return "*unstructured.Unstructured"
    package = group.split(".", 1)[0] if group else "core"
    return f"*{package}.{kind}"


def check_single(shape: Shape, *, group: str, kind: str, custom: bool) -> None:
    if shape.as_ == PARTIAL_LIST:
        raise errors.not_acceptable(
            f"you requested {PARTIAL_LIST}, but the requested object is not a list ({_go_type(group, kind, custom=custom)})"
        )


def check_list(shape: Shape, *, group: str, kind: str, custom: bool) -> None:
    if shape.as_ == PARTIAL:
        raise errors.not_acceptable(
            f"you requested {PARTIAL}, but the requested object is a list ({_go_type(group, kind + 'List', custom=custom)})"
        )


def partial_object(raw: bytes, shape: Shape) -> bytes:
    """An object's bytes as `PartialObjectMetadata`."""
    meta = orjson.loads(raw).get("metadata") or {}
    return orjson.dumps({"kind": PARTIAL, "apiVersion": shape.api_version, "metadata": meta})


def partial_list(
    items: list[bytes], shape: Shape, *, resource_version: str, continue_token: str | None
) -> bytes:
    """Already-converted items (`partial_object`) as a `PartialObjectMetadataList`."""
    meta: dict[str, str] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    head = orjson.dumps({"kind": PARTIAL_LIST, "apiVersion": shape.api_version, "metadata": meta})
    return head[:-1] + b',"items":[' + b",".join(items) + b"]}"
