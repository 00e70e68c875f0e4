"""Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) for every built-in kind.

Go clients (kubectl's typed clients, client-go with protobuf content type) send bodies as protobuf;
the rest of the server speaks JSON dicts, so decoding at the door keeps one code path. A body is the
4 magic bytes `k8s\\x00` and a `runtime.Unknown` whose `raw` holds the typed message its TypeMeta
names. The messages' wire schema is derived from k8s.io/api's and k8s.io/apimachinery's
`generated.proto` and Go types by `generate.py` into `kubernetes.json`; custom resources have no
protobuf form (the real server answers 415 for them too). Answers are protobuf when the client
prefers it (`answer.py`), as kube-apiserver's are.
"""

from __future__ import annotations

from localcluster.protobuf.answer import (
    CONTENT_TYPE,
    WATCH_CONTENT_TYPE,
    can_encode,
    encode_items,
    encode_list,
    enveloped,
    negotiate,
    watch_frame,
)
from localcluster.protobuf.decode import MAGIC, UnknownKindError, decode_body, decode_message
from localcluster.protobuf.encode import encode_body, encode_message
from localcluster.protobuf.wire import ProtobufError

__all__ = [
    "CONTENT_TYPE",
    "MAGIC",
    "WATCH_CONTENT_TYPE",
    "ProtobufError",
    "UnknownKindError",
    "can_encode",
    "decode_body",
    "decode_message",
    "encode_body",
    "encode_items",
    "encode_list",
    "encode_message",
    "enveloped",
    "negotiate",
    "watch_frame",
]
