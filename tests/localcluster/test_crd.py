"""CustomResourceDefinitions in process: serving, validation, status, printer columns, cleanup."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from localcluster import errors
from localcluster.builtin import register_builtins
from localcluster.crd import CRDController
from localcluster.objects import ObjectAPI
from localcluster.registry import Registry
from localcluster.storage import Storage

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "drains.test.aiokcm.io"},
    "spec": {
        "group": "test.aiokcm.io",
        "scope": "Cluster",
        "names": {"plural": "drains", "kind": "Drain", "shortNames": ["dr"], "categories": ["all"]},
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Cordon", "type": "boolean", "jsonPath": ".spec.cordon"},
                    {"name": "Drain", "type": "boolean", "jsonPath": ".spec.drain"},
                    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-validations": [
                                    {"rule": "!self.drain || self.cordon", "message": "drain requires cordon"}
                                ],
                                "properties": {
                                    "cordon": {"type": "boolean", "default": False},
                                    "drain": {"type": "boolean", "default": False},
                                    "reason": {"type": "string", "maxLength": 30},
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {"phase": {"type": "string", "enum": ["Pending", "Done"]}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


class Env:
    def __init__(self) -> None:
        self.registry = Registry()
        register_builtins(self.registry)
        self.storage = Storage()
        self.objects = ObjectAPI(self.registry, self.storage)
        self.controller = CRDController(self.registry, self.storage, self.objects)

    def rt(self, plural: str = "drains") -> Any:
        return self.registry.get("test.aiokcm.io", "v1alpha1", plural)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    e = Env()
    task = asyncio.create_task(e.controller.run())
    yield e
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def _d(result: Any) -> dict[str, Any]:
    """ObjectAPI results as plain dicts (it hands out storage entries)."""
    out: dict[str, Any] = result.load() if hasattr(result, "load") else result
    return out


def _drain(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "test.aiokcm.io/v1alpha1",
        "kind": "Drain",
        "metadata": {"name": name},
        "spec": spec,
    }


async def test_created_crd_is_established_and_served_at_once(env: Env) -> None:
    crd = _d(env.objects.create(env.controller.crd_type, None, copy.deepcopy(CRD)))
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd["status"]["acceptedNames"]["singular"] == "drain"
    assert crd["status"]["storedVersions"] == ["v1alpha1"]
    rt = env.rt()
    assert rt is not None and not rt.namespaced and rt.short_names == ("dr",) and "status" in rt.subresources
    obj = _d(env.objects.create(rt, None, _drain("a", cordon=True, bogus=1)))
    assert obj["spec"] == {"cordon": True, "drain": False}  # pruned and defaulted
    assert obj["metadata"]["generation"] == 1


async def test_rules_and_schema_errors_are_422_with_field_causes(env: Env) -> None:
    env.objects.create(env.controller.crd_type, None, copy.deepcopy(CRD))
    with pytest.raises(errors.StatusError) as exc:
        env.objects.create(env.rt(), None, _drain("a", drain=True, reason="x" * 31))
    err = exc.value
    assert err.code == 422 and err.reason == "Invalid"
    causes = {c["field"]: c["message"] for c in (err.details or {})["causes"]}
    assert causes["spec.reason"].startswith("Too long")
    assert err.message.startswith('Drain.test.aiokcm.io "a" is invalid: ')


async def test_status_subresource_keeps_spec_and_status_apart(env: Env) -> None:
    env.objects.create(env.controller.crd_type, None, copy.deepcopy(CRD))
    rt = env.rt()
    created = _d(env.objects.create(rt, None, {**_drain("a", cordon=True), "status": {"phase": "Done"}}))
    assert "status" not in created
    body = copy.deepcopy(created)
    body["status"] = {"phase": "Pending"}
    body["spec"]["drain"] = True
    updated = _d(env.objects.update_status(rt, None, "a", body))
    assert updated["status"] == {"phase": "Pending"} and updated["spec"]["drain"] is False
    with pytest.raises(errors.StatusError) as exc:
        env.objects.update_status(rt, None, "a", {**updated, "status": {"phase": "Nope"}})
    assert exc.value.code == 422


async def test_printer_columns_render_cells(env: Env) -> None:
    env.objects.create(env.controller.crd_type, None, copy.deepcopy(CRD))
    rt = env.rt()
    obj = _d(env.objects.create(rt, None, _drain("a", cordon=True)))
    table = rt.strategy.table(obj)
    assert table is not None
    cols, cells = table
    assert [c.name for c in cols] == ["Cordon", "Drain", "Phase"]
    assert cells == [True, False, None]


async def test_crd_rules_use_kubernetes_cel_libraries_and_an_invalid_rule_is_refused(env: Env) -> None:
    crd = copy.deepcopy(CRD)
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_schema["x-kubernetes-validations"].append(
        {
            "rule": "!has(self.reason) || self.reason.split(' ').all(w, w.lowerAscii() == w)",
            "message": "lower case",
        }
    )
    bad = copy.deepcopy(crd)
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "x-kubernetes-validations"
    ] = [{"rule": "self.reason.shout()"}]
    with pytest.raises(errors.StatusError) as exc:
        env.objects.create(env.controller.crd_type, None, bad)
    assert exc.value.code == 422
    assert "compilation failed: ERROR: <input>:1:13: undeclared reference to 'shout'" in exc.value.message
    assert env.rt() is None
    env.objects.create(env.controller.crd_type, None, crd)
    env.objects.create(env.rt(), None, _drain("a", reason="planned work"))
    with pytest.raises(errors.StatusError) as exc:
        env.objects.create(env.rt(), None, _drain("b", reason="Planned work"))
    assert exc.value.code == 422 and "lower case" in exc.value.message


async def test_deleting_the_crd_deletes_its_resources_and_stops_serving(env: Env) -> None:
    env.objects.create(env.controller.crd_type, None, copy.deepcopy(CRD))
    rt = env.rt()
    created = _d(env.objects.create(rt, None, _drain("a")))
    with env.storage.subscribe(
        rt.storage_key, resource_version=int(created["metadata"]["resourceVersion"])
    ) as sub:
        result = env.objects.delete(env.controller.crd_type, None, "drains.test.aiokcm.io")
        assert not result.deleted  # the cleanup finalizer holds it
        assert env.rt() is None
        for _ in range(100):
            if (
                env.storage.get("customresourcedefinitions.apiextensions.k8s.io", "", "drains.test.aiokcm.io")
                is None
            ):
                break
            await asyncio.sleep(0)
        else:
            pytest.fail("CRD was not removed after cleanup")
        assert [e.type for e in sub.drain()] == ["DELETED"]
    assert env.storage.count(rt.storage_key) == 0
