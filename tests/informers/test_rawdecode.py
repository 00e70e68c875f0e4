"""The schema-directed pod decoder gives exactly what orjson + `pod_projection` give."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import orjson

from apiclient.resources import PODS
from informers import SharedInformerFactory, default_transform, pod_projection
from informers.rawdecode import PodProjectionDecoder, decoder_for
from informers.transform import LAST_APPLIED
from tests.support.waiting import eventually

from .conftest import FAST
from .fakeserver import FakeApiServer, status_body
from .helpers import Obj, Recorder, pod
from .podgen import realistic_pod


def _plain(value: Any) -> bool:
    """Only dict / list / str / int / float / bool / None all the way down (no msgspec types)."""
    if isinstance(value, dict):
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return value is None or type(value) in (str, int, float, bool)


def _unusual_pods() -> list[Obj]:
    base = realistic_pod(7)
    pods: list[Obj] = [pod("bare"), {"metadata": {"name": "only-meta"}}, {}]
    p = copy.deepcopy(base)
    p["metadata"].update(
        labels=None, annotations=None, ownerReferences=None, deletionTimestamp=None, finalizers=[]
    )
    p["spec"]["tolerations"] = None
    p["status"].update(conditions=None, containerStatuses=None)
    pods.append(p)
    p = copy.deepcopy(base)
    p["metadata"].update(labels={}, annotations={LAST_APPLIED: "{}"}, ownerReferences=[])
    p["spec"]["tolerations"] = []
    p["status"].update(conditions=[], containerStatuses=[], initContainerStatuses=[])
    pods.append(p)
    p = copy.deepcopy(base)
    p["metadata"].update(
        annotations={LAST_APPLIED: "{}", "keep": "x", "n": 3, "nested": {"a": [1, None]}},
        generation=4,
        deletionTimestamp="2026-01-01T00:00:00Z",
        deletionGracePeriodSeconds=30,
        finalizers=["a/b"],
        ownerReferences=[{"kind": "ReplicaSet", "name": "r", "controller": False}, {"uid": "u", "extra": 1}],
        unknownField={"deep": [1, 2, {"x": None}]},
    )
    p["spec"].update(
        priority=None, priorityClassName="high", nodeName="", tolerations=[{"operator": "Exists"}]
    )
    p["status"] = {
        "phase": "Failed",
        "reason": "Evicted",
        "message": "The node was low on resource: memory.",
        "nominatedNodeName": "n9",
        "conditions": [
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": "False"},
        ],
        "initContainerStatuses": [{"name": "init", "ready": False, "restartCount": 2, "state": {"x": 1}}],
        "containerStatuses": [
            {"name": "c", "ready": None},
            {"name": "d", "restartCount": 1, "started": False},
        ],
        "somethingNew": [1, 2, 3],
    }
    pods.append(p)
    p = copy.deepcopy(base)
    p["spec"] = None
    p["status"] = None
    p["metadata"]["labels"] = {"\u00e9t\u00e9": "<&>", "k": ""}
    pods.append(p)
    return pods


def _pods() -> list[Obj]:
    return [realistic_pod(i) for i in range(300)] + _unusual_pods()


def _page(items: list[Obj], **meta: Any) -> bytes:
    return orjson.dumps(
        {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9", **meta}, "items": items}
    )


def test_decoder_is_only_for_the_pod_projection() -> None:
    assert isinstance(decoder_for(pod_projection), PodProjectionDecoder)
    assert decoder_for(pod_projection) is decoder_for(pod_projection)
    assert decoder_for(default_transform) is None and decoder_for(None) is None


def test_list_page_equals_orjson_and_projection() -> None:
    pods = _pods()
    expected = [pod_projection(p) for p in orjson.loads(orjson.dumps(pods))]
    out: list[Obj] = []
    meta = PodProjectionDecoder().decode_page(_page(pods, **{"continue": "tok"}), out, freeze=False)
    assert meta == {"resourceVersion": "9", "continue": "tok"}
    assert out == expected
    assert all(_plain(p) for p in out)
    # Decoded twice (now hitting the sharing tables): same again, and equal parts shared.
    again: list[Obj] = []
    PodProjectionDecoder().decode_page(_page(pods), again, freeze=True)
    assert again == expected
    assert again[0]["status"]["conditions"] is again[97]["status"]["conditions"]
    assert again[0]["metadata"]["labels"] is again[97]["metadata"]["labels"]
    assert again[0]["metadata"]["ownerReferences"] is again[97]["metadata"]["ownerReferences"]


def test_page_the_schema_rejects_is_left_to_the_general_path() -> None:
    out: list[Obj] = []
    weird = {**realistic_pod(1), "spec": ["not", "an", "object"]}
    assert PodProjectionDecoder().decode_page(_page([realistic_pod(0), weird]), out, freeze=False) is None
    assert out == []


def test_watch_events_equal_orjson_and_projection() -> None:
    dec = PodProjectionDecoder()
    for p in _pods():
        for event_type in ("ADDED", "MODIFIED", "DELETED"):
            ev = dec.decode_event(orjson.dumps({"type": event_type, "object": p}))
            assert ev.type == event_type
            assert ev.object == pod_projection(orjson.loads(orjson.dumps(p)))
    bookmark = dec.decode_event(
        b'{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":'
        b'{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}'
    )
    assert bookmark.type == "BOOKMARK" and bookmark.object["metadata"]["resourceVersion"] == "12"
    # ERROR carries a Status: decoded generically, whether or not it would fit the pod schema.
    status = status_body(410, "Expired", "too old resource version")
    assert dec.decode_event(orjson.dumps({"type": "ERROR", "object": status})).object == status
    bare = {"kind": "Status", "code": 500, "message": "boom"}
    assert dec.decode_event(orjson.dumps({"type": "ERROR", "object": bare})).object == bare
    odd = dec.decode_event(b'{"type":"SOMETHING","object":{"a":[1]}}')
    assert (odd.type, odd.object) == ("SOMETHING", {"a": [1]})
    # A pod the schema rejects: still the projection of it.
    weird = {**realistic_pod(2), "status": []}
    assert dec.decode_event(orjson.dumps({"type": "ADDED", "object": weird})).object == pod_projection(weird)


async def test_projected_informer_lists_and_watches_through_the_decoder(server: FakeApiServer) -> None:
    factory = SharedInformerFactory(server.client(), transforms={PODS: pod_projection}, options=FAST)
    async with anyio.create_task_group() as tg:
        for i in range(1100):
            server.create(PODS, realistic_pod(i))
        server.create(PODS, {**pod("weird"), "spec": []})  # its page takes the general path
        inf = factory.informer(PODS)
        rec = Recorder()
        inf.add_event_handler(rec.handler())
        factory.start(tg)
        assert await factory.wait_for_cache_sync(timeout=10)
        await server.wait_for_watches()
        p = server.create(PODS, realistic_pod(5000))
        server.update(PODS, {**p, "spec": {**p["spec"], "nodeName": "n1"}})
        server.delete(PODS, realistic_pod(3)["metadata"]["name"], "team-3")
        server.bookmark(PODS)
        await eventually(
            lambda: inf.last_sync_resource_version == str(server.rv),
            "inf.last_sync_resource_version == str(server.rv)",
        )
        lists = server.requests["list"]
        server.fail_next("watch", 410, as_event=True)  # the next watch gets ERROR 410: relist
        server.drop_watches()
        server.delete_silently(PODS, realistic_pod(4)["metadata"]["name"], "team-4")
        await eventually(lambda: server.requests["list"] >= lists + 3, "server.requests['list'] >= lists + 3")
        await server.wait_for_watches()
        expected = {
            f"{o['metadata']['namespace']}/{o['metadata']['name']}": pod_projection(o)
            for o in server.items(PODS).values()
        }
        got = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in inf.lister.list()}
        assert got == expected
        assert got[f"team-0/{realistic_pod(5000)['metadata']['name']}"]["spec"]["nodeName"] == "n1"
        tg.cancel_scope.cancel()
