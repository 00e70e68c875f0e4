"""Update, patch, delete and bind share their checks of the object a write targets."""

from __future__ import annotations

import orjson
import pytest

from localcluster import errors
from localcluster.builtin import register_builtins
from localcluster.objects import ObjectAPI
from localcluster.registry import Registry, ResourceType
from localcluster.storage import Storage


def _api() -> tuple[ObjectAPI, ResourceType, ResourceType]:
    registry = Registry()
    register_builtins(registry)
    api = ObjectAPI(registry, Storage())
    ns_rt, cm_rt, pod_rt = (
        registry.get("", "v1", "namespaces"),
        registry.get("", "v1", "configmaps"),
        registry.get("", "v1", "pods"),
    )
    assert ns_rt is not None and cm_rt is not None and pod_rt is not None
    api.create(ns_rt, None, {"metadata": {"name": "default"}})
    return api, cm_rt, pod_rt


def _uid_message(wanted: str, stored: str) -> str:
    # k8s.io/apiserver/pkg/storage.Preconditions.Check: the precondition (the request's) first.
    return f"Precondition failed: UID in precondition: {wanted}, UID in object meta: {stored}"


def test_update_names_the_requests_uid_as_the_precondition() -> None:
    api, cm_rt, _ = _api()
    stored = api.create(cm_rt, "default", {"metadata": {"name": "c"}}).load()["metadata"]["uid"]
    with pytest.raises(errors.StatusError) as caught:
        api.update(cm_rt, "default", "c", {"metadata": {"name": "c", "uid": "other"}})
    assert caught.value.code == 409
    assert _uid_message("other", stored) in str(caught.value)


def test_delete_and_update_word_a_uid_precondition_alike() -> None:
    api, cm_rt, _ = _api()
    stored = api.create(cm_rt, "default", {"metadata": {"name": "c"}}).load()["metadata"]["uid"]
    with pytest.raises(errors.StatusError) as caught:
        api.delete(cm_rt, "default", "c", preconditions={"uid": "other"})
    assert caught.value.code == 409
    assert _uid_message("other", stored) in str(caught.value)


def test_bind_with_another_uid_is_a_precondition_conflict() -> None:
    api, _, pod_rt = _api()
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    stored = api.create(pod_rt, "default", pod).load()["metadata"]["uid"]
    binding = {"metadata": {"name": "p", "uid": "other"}, "target": {"name": "n1"}}
    with pytest.raises(errors.StatusError) as caught:
        api.bind(pod_rt, "default", "p", binding)
    assert caught.value.code == 409
    assert _uid_message("other", stored) in str(caught.value)


@pytest.mark.parametrize("name", ["d", None])
def test_update_and_patch_refuse_a_body_naming_another_object(name: str | None) -> None:
    api, cm_rt, _ = _api()
    api.create(cm_rt, "default", {"metadata": {"name": "c"}})
    with pytest.raises(errors.StatusError) as by_update:
        api.update(cm_rt, "default", "c", {"metadata": {"name": name}})
    patch = orjson.dumps([{"op": "replace", "path": "/metadata/name", "value": name}])
    with pytest.raises(errors.StatusError) as by_patch:
        api.patch(cm_rt, "default", "c", patch, "application/json-patch+json")
    assert by_update.value.code == by_patch.value.code == 400
    assert str(by_update.value) == str(by_patch.value)


def test_update_and_patch_refuse_a_stale_resource_version() -> None:
    api, cm_rt, _ = _api()
    api.create(cm_rt, "default", {"metadata": {"name": "c"}})
    with pytest.raises(errors.StatusError) as by_update:
        api.update(cm_rt, "default", "c", {"metadata": {"name": "c", "resourceVersion": "1"}})
    patch = orjson.dumps({"metadata": {"resourceVersion": "1"}})
    with pytest.raises(errors.StatusError) as by_patch:
        api.patch(cm_rt, "default", "c", patch, "application/merge-patch+json")
    assert by_update.value.code == by_patch.value.code == 409
