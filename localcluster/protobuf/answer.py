"""Answering in protobuf: which encoding a client's Accept header asks for, and the answer's bytes.

kube-apiserver answers a built-in kind in protobuf when the client prefers it (Go clients with
`ContentType: application/vnd.kubernetes.protobuf`: kube-controller-manager, kube-scheduler,
kubectl's typed clients). A kind without a protobuf form (a custom resource) gets JSON if the client
accepts JSON too, else 406. Watches are a stream of `WatchEvent`s each written without the envelope
and prefixed by its length (4 bytes, big-endian), the object inside enveloped as usual.

Stored objects are JSON bytes that never change, so their protobuf form is cached by those bytes:
a LIST or a watch with many watchers encodes each object once.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Literal

import orjson

from localcluster.protobuf import schema as S
from localcluster.protobuf.encode import encode_message, envelope
from localcluster.protobuf.wire import LEN, ProtobufError, key, varint

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
WATCH_CONTENT_TYPE = CONTENT_TYPE + ";stream=watch"
Encoding = Literal["protobuf", "json"]
_JSON_RANGES = frozenset({"application/json", "application/yaml", "application/*", "*/*", "*"})


def negotiate(accept: str) -> tuple[Encoding, ...]:
    """The encodings the client accepts, preferred first (by q, then by order, as goautoneg ranks them).

    An absent header accepts JSON; ranges asking for another shape (`as=Table`) are not ours to
    answer and count as nothing."""
    if not accept.strip():
        return ("json",)
    ranked: list[tuple[float, int, Encoding]] = []
    for i, part in enumerate(accept.split(",")):
        media, *params = (p.strip() for p in part.split(";"))
        options = dict(p.partition("=")[::2] for p in params)
        if "as" in options:
            continue
        try:
            q = float(options.get("q", "1"))
        except ValueError:
            q = 0.0
        if q <= 0:
            continue
        media = media.lower()
        if media == CONTENT_TYPE:
            ranked.append((-q, i, "protobuf"))
        elif media in _JSON_RANGES:
            ranked.append((-q, i, "json"))
    ranked.sort()
    found: list[Encoding] = []
    for _, _, encoding in ranked:
        if encoding not in found:
            found.append(encoding)
    return tuple(found)


def can_encode(api_version: str, kind: str) -> bool:
    return S.kind_message(api_version, kind) is not None


@functools.lru_cache(maxsize=4096)
def _typed(raw: bytes, api_version: str, kind: str) -> tuple[str, str, bytes]:
    obj: dict[str, Any] = orjson.loads(raw)
    api_version, kind = obj.get("apiVersion") or api_version, obj.get("kind") or kind
    name = S.kind_message(api_version, kind)
    if name is None:
        raise ProtobufError(f"no protobuf message for {api_version} {kind}")
    return api_version, kind, encode_message(obj, name)


def enveloped(raw: bytes, api_version: str = "", kind: str = "") -> bytes:
    """A stored object (JSON bytes) as an enveloped protobuf object; `api_version` and `kind` fill in
    what the stored bytes lack."""
    return envelope(*_typed(raw, api_version, kind))


def encode_items(api_version: str, item_kind: str, items: Sequence[bytes]) -> bytes:
    """Stored JSON objects as a list's `items` (field 2), each encoded once (see `enveloped`)."""
    return b"".join(_len_delimited(2, _typed(raw, api_version, item_kind)[2]) for raw in items)


def encode_list(api_version: str, list_kind: str, metadata: dict[str, Any], items: bytes) -> bytes:
    """A LIST answer: its ListMeta and the `items` from `encode_items`, enveloped."""
    name = S.kind_message(api_version, list_kind)
    if name is None:
        raise ProtobufError(f"no protobuf message for {api_version} {list_kind}")
    meta = _len_delimited(1, encode_message(metadata, S.message(name).by_number[1].type))
    return envelope(api_version, list_kind, meta + items)


def watch_frame(event_type: str, raw: bytes) -> bytes:
    """One watch event: `WatchEvent{type, object: RawExtension{raw: enveloped object}}`, length-prefixed."""
    event = _len_delimited(1, event_type.encode()) + _len_delimited(2, _len_delimited(1, enveloped(raw)))
    return len(event).to_bytes(4, "big") + event


def _len_delimited(number: int, data: bytes) -> bytes:
    return key(number, LEN) + varint(len(data)) + data
