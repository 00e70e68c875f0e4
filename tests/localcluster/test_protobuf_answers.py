"""Protobuf answers, on both backends: Go clients that prefer protobuf get it for built-in kinds.

An object, a list, an error Status, discovery documents and a watch stream come back as protobuf when the client's
Accept header prefers it, and decode to the JSON the same request answers; a custom resource has no
protobuf form, so it comes back as JSON when the client takes JSON too, else 406.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import orjson
import pytest

from apiclient import KubeClient
from localcluster.protobuf import CONTENT_TYPE, WATCH_CONTENT_TYPE, decode_body, encode_message
from localcluster.protobuf.encode import envelope
from localcluster.protobuf.wire import iter_fields
from tests.localcluster.helpers import bare_cluster
from tests.support.waiting import eventually, holds

cluster = pytest.fixture(bare_cluster)
pytestmark = pytest.mark.backends("local", "real")

PB = CONTENT_TYPE
GROUP = "answers.example.com"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"gadgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "kind": "Gadget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


async def get(
    kube: KubeClient, path: str, accept: str, method: str = "GET", body: Any = None
) -> tuple[int, str, bytes]:
    resp = await kube.api_client.call_api(
        path,
        method,
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        header_params={"Accept": accept, "Content-Type": "application/json"},
    )
    try:
        return resp.status, resp.headers.get("Content-Type", ""), await resp.read()
    finally:
        resp.release()


def missing(want: Any, got: Any, path: str = "") -> Iterator[str]:
    """What the JSON answer has that the decoded protobuf answer lacks or changes."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key, value in want.items():
            yield from missing(value, got.get(key), f"{path}.{key}")
    elif isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            yield from missing(w, g, f"{path}[{i}]")
    elif want != got:
        yield f"{path}: json {want!r}, protobuf {got!r}"


def without_item_type_meta(answer: dict[str, Any]) -> dict[str, Any]:
    """A typed list's items carry no apiVersion/kind in protobuf (nor in kube-apiserver's JSON)."""
    if "items" in answer:
        answer["items"] = [
            {k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in answer["items"]
        ]
    return answer


def frames(stream: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Length-prefixed WatchEvents {1 type, 2 RawExtension {1 raw}}: (type, the enveloped object decoded)."""
    events = []
    while stream:
        size = int.from_bytes(stream[:4], "big")
        event, stream = stream[4 : 4 + size], stream[4 + size :]
        fields = {n: v for n, _, v in iter_fields(event)}
        event_type, extension = fields[1], fields[2]
        assert isinstance(event_type, bytes) and isinstance(extension, bytes)
        raw = next(v for n, _, v in iter_fields(extension) if n == 1)
        assert isinstance(raw, bytes)
        events.append((event_type.decode(), decode_body(raw)))
    return events


async def test_built_in_kinds_answer_protobuf_to_clients_that_prefer_it(kube: KubeClient) -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "pb-answer", "labels": {"a": "b"}},
        "data": {"k": "v"},
    }
    code, content_type, created = await get(
        kube, "/api/v1/namespaces/default/configmaps", f"{PB}, application/json", "POST", cm
    )
    assert (code, content_type) == (201, PB)
    assert decode_body(created)["data"] == {"k": "v"}

    for path in (
        "/api/v1/namespaces/default/configmaps/pb-answer",
        "/api/v1/namespaces/default/configmaps",
        "/api/v1/namespaces/default",
        "/api/v1",
        "/apis",
        "/apis/apps",
        "/apis/apps/v1",
        "/api",
    ):
        code, content_type, as_json = await get(kube, path, "application/json")
        assert code == 200 and content_type == "application/json"
        for accept in (PB, f"{PB}, application/json", f"application/json;q=0.5, {PB}"):
            code, content_type, body = await get(kube, path, accept)
            assert (code, content_type) == (200, PB), (path, accept)
            assert list(missing(without_item_type_meta(orjson.loads(as_json)), decode_body(body))) == [], (
                path,
                accept,
            )
        for accept in (f"application/json, {PB}", f"{PB};q=0.5, application/json", "*/*", ""):
            code, content_type, _ = await get(kube, path, accept)
            assert content_type == "application/json", (path, accept)

    assert (await get(kube, "/version", f"{PB}, application/json"))[:2] == (200, "application/json")
    assert (await get(kube, "/version", PB))[0] == 406  # the version document has no protobuf form

    code, content_type, body = await get(kube, "/api/v1/namespaces/default/configmaps/nope", PB)
    assert (code, content_type) == (404, PB)
    status = decode_body(body)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "NotFound", 404)

    with anyio.fail_after(30):
        code, content_type, stream = await get(
            kube,
            "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Dpb-answer",
            f"{PB}, application/json",
        )
    assert (code, content_type) == (200, WATCH_CONTENT_TYPE)
    [(event, obj)] = frames(stream)
    assert (event, obj["kind"], obj["metadata"]["name"], obj["data"]) == (
        "ADDED",
        "ConfigMap",
        "pb-answer",
        {"k": "v"},
    )

    since = obj["metadata"]["resourceVersion"]
    watch = f"/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=2&resourceVersion={since}"
    async with anyio.create_task_group() as tg:
        answers: list[tuple[int, str, bytes]] = []

        async def watching() -> None:
            answers.append(await get(kube, watch, PB))

        tg.start_soon(watching)  # from `since`, the change is seen whenever the watch starts
        await kube.api_client.call_api(
            "/api/v1/namespaces/default/configmaps/pb-answer",
            "PATCH",
            body={"data": {"k": "w"}},
            auth_settings=["BearerToken"],
            header_params={"Content-Type": "application/merge-patch+json"},
        )
    [(code, content_type, stream)] = answers
    assert [(event, obj["metadata"]["name"], obj["data"]) for event, obj in frames(stream)] == [
        ("MODIFIED", "pb-answer", {"k": "w"})
    ]


async def test_a_protobuf_body_without_type_meta_is_the_kind_the_url_names(kube: KubeClient) -> None:
    body = envelope(
        "",
        "",
        encode_message({"metadata": {"name": "untyped"}, "data": {"a": "b"}}, "k8s.io.api.core.v1.ConfigMap"),
    )
    resp = await kube.api_client.call_api(
        "/api/v1/namespaces/default/configmaps",
        "POST",
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        header_params={"Content-Type": PB, "Accept": "application/json"},
    )
    try:
        code, created = resp.status, orjson.loads(await resp.read())
    finally:
        resp.release()
    assert code == 201, created
    assert (created["kind"], created["data"]) == ("ConfigMap", {"a": "b"})


async def test_custom_resources_answer_json_or_406_to_protobuf_clients(kube: KubeClient) -> None:
    code, _, body = await get(
        kube, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", "POST", CRD
    )
    assert code == 201, body
    path = "/apis/answers.example.com/v1/namespaces/default/gadgets"
    try:
        with anyio.fail_after(30):  # the real server serves it shortly after
            await eventually(
                lambda: holds(get(kube, path, "application/json"), lambda answer: answer[0] == 200),
                "a 200 answer",
                interval=0.1,
            )
        gadget = {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": "g"}, "size": 3}
        code, content_type, _ = await get(kube, path, f"{PB}, application/json", "POST", gadget)
        assert (code, content_type) == (201, "application/json")
        code, content_type, body = await get(kube, f"{path}/g", f"{PB}, application/json")
        assert (code, content_type, orjson.loads(body)["size"]) == (200, "application/json", 3)
        code, _, _ = await get(kube, f"{path}/g", PB)
        assert code == 406
    finally:
        await get(
            kube,
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{GROUP}",
            "application/json",
            "DELETE",
        )
