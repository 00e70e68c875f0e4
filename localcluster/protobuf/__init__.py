"""Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) for every built-in kind.

Go clients (kubectl's typed clients, client-go with protobuf content type) send bodies as protobuf;
the rest of the server speaks JSON dicts, so decoding at the door keeps one code path. A body is the
4 magic bytes `k8s\\x00` and a `runtime.Unknown` whose `raw` holds the typed message its TypeMeta
names. The messages' wire schema is derived from k8s.io/api's and k8s.io/apimachinery's
`generated.proto` and Go types by `generate.py` into `kubernetes.json`; custom resources have no
protobuf form (the real server answers 415 for them too).
"""

from __future__ import annotations

from localcluster.protobuf.decode import MAGIC, UnknownKindError, decode_body, decode_message
from localcluster.protobuf.encode import encode_body, encode_message
from localcluster.protobuf.wire import ProtobufError

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

__all__ = ["CONTENT_TYPE", "MAGIC", "ProtobufError", "UnknownKindError", "decode_body", "decode_message",
           "encode_body", "encode_message"]
