"""Content negotiation of answers: JSON, or protobuf for clients that prefer it, as kube-apiserver does.

Handlers write JSON; `negotiated` re-encodes an answer as protobuf when the client's Accept header
prefers it and the answer's kind has a protobuf form. A kind without one (a custom resource, the
version document) stays JSON if the client takes JSON too, else the answer is 406. LISTs and
watches, which can be large, encode stored objects one by one instead (`wants_protobuf`).
"""

from __future__ import annotations

import orjson
from aiohttp import web

from localcluster import errors, protobuf

JSON = "application/json"


def negotiated(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """A JSON answer re-encoded as protobuf when the client prefers it and the kind has a protobuf form;
    kept as JSON for a kind without one if the client takes JSON too, else 406 (kube-apiserver's
    content negotiation)."""
    accept = request.headers.get("Accept", "")
    if (
        protobuf.CONTENT_TYPE not in accept
        or response.prepared
        or not isinstance(response, web.Response)
        or response.content_type != JSON
        or not isinstance(response.body, bytes)
    ):
        return response
    encodings = protobuf.negotiate(accept)
    if encodings[:1] != ("protobuf",):
        return response
    try:
        body = protobuf.encode_body(orjson.loads(response.body))
    except (protobuf.ProtobufError, ValueError, TypeError, AttributeError):
        if "json" in encodings:
            return response
        body = protobuf.encode_body(errors.not_acceptable().status())
        return web.Response(status=406, body=body, content_type=protobuf.CONTENT_TYPE)
    answer = web.Response(status=response.status, body=body, content_type=protobuf.CONTENT_TYPE)
    for warning in response.headers.getall("Warning", ()):
        answer.headers.add("Warning", warning)
    return answer


def wants_protobuf(request: web.Request, api_version: str, kind: str) -> bool:
    accept = request.headers.get("Accept", "")
    return (
        protobuf.CONTENT_TYPE in accept
        and protobuf.negotiate(accept)[:1] == ("protobuf",)
        and protobuf.can_encode(api_version, kind)
    )
