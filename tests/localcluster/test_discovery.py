"""Discovery and OpenAPI documents, checked as JSON and through the real kubectl."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from localcluster import discovery, openapi
from localcluster.builtin import register_builtins
from localcluster.crd import resource_types_for
from localcluster.registry import Registry

AGG = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
KUBECTL_ACCEPT = (
    f"{AGG},application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)

CRD: dict[str, Any] = {
    "metadata": {"name": "widgets.example.io"},
    "spec": {
        "group": "example.io",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": False,
                "schema": {"openAPIV3Schema": {"type": "object"}},
            },
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {
                    "status": {},
                    "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"},
                },
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "description": "What the widget should be.",
                                "properties": {
                                    "size": {
                                        "type": "integer",
                                        "description": "How many parts the widget has.",
                                    }
                                },
                            }
                        },
                    }
                },
            },
        ],
    },
}


class Server:
    def __init__(self, url: str, registry: Registry, kubeconfig: Path, cache: Path) -> None:
        self.url, self.registry, self.kubeconfig, self.cache = url, registry, kubeconfig, cache

    async def get(self, path: str, accept: str = "application/json") -> tuple[str, Any]:
        async with aiohttp.ClientSession() as s, s.get(self.url + path, headers={"Accept": accept}) as r:
            assert r.status == 200, (path, r.status)
            return r.headers["Content-Type"], orjson.loads(await r.read())

    async def kubectl(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            "kubectl",
            "--kubeconfig",
            str(self.kubeconfig),
            "--cache-dir",
            str(self.cache),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        return out.decode()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    registry = Registry()
    register_builtins(registry)
    for rt in resource_types_for(CRD):
        registry.register(rt)
    app = web.Application()
    discovery.setup_routes(app, registry)
    openapi.setup_routes(app, registry)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    url = f"http://127.0.0.1:{port}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{url}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n"
    )
    try:
        yield Server(url, registry, kubeconfig, tmp_path / "cache")
    finally:
        await runner.cleanup()


async def test_legacy_discovery_documents(server: Server) -> None:
    _, apis = await server.get("/api")
    assert apis["kind"] == "APIVersions" and apis["versions"] == ["v1"]
    _, core = await server.get("/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["pods"]["shortNames"] == ["po"] and by_name["pods"]["categories"] == ["all"]
    assert by_name["pods"]["storageVersionHash"] == "xPOwRZ+Yhw8="  # the real server's value
    assert by_name["pods/eviction"] == {
        "name": "pods/eviction",
        "singularName": "",
        "namespaced": True,
        "group": "policy",
        "version": "v1",
        "kind": "Eviction",
        "verbs": ["create"],
    }
    assert by_name["pods/binding"]["kind"] == "Binding"
    assert by_name["nodes"]["namespaced"] is False
    _, apps = await server.get("/apis/apps/v1")
    scale = {r["name"]: r for r in apps["resources"]}["deployments/scale"]
    assert (scale["group"], scale["kind"], scale["verbs"]) == (
        "autoscaling",
        "Scale",
        ["get", "patch", "update"],
    )
    _, groups = await server.get("/apis")
    widget = next(g for g in groups["groups"] if g["name"] == "example.io")
    assert widget["preferredVersion"]["version"] == "v1"  # GA before alpha, whatever the order in the CRD
    assert [v["version"] for v in widget["versions"]] == ["v1", "v1alpha1"]


async def test_aggregated_discovery_only_when_asked(server: Server) -> None:
    ctype, doc = await server.get("/apis", KUBECTL_ACCEPT)
    assert ctype == AGG and doc["kind"] == "APIGroupDiscoveryList"
    apps = next(i for i in doc["items"] if i["metadata"]["name"] == "apps")
    deploy = next(r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments")
    assert deploy["scope"] == "Namespaced" and deploy["shortNames"] == ["deploy"]
    assert {s["subresource"] for s in deploy["subresources"]} == {"scale", "status"}
    ctype, doc = await server.get("/api", "application/json")
    assert ctype.startswith("application/json") and doc["kind"] == "APIVersions"


async def test_openapi_v3_patch_operations_declare_field_validation(server: Server) -> None:
    _, root = await server.get("/openapi/v3")
    url = root["paths"]["apis/example.io/v1"]["serverRelativeURL"]
    assert "?hash=" in url
    _, doc = await server.get(url)
    patch_ops = [p["patch"] for p in doc["paths"].values() if "patch" in p]
    assert patch_ops and all(
        any(param["name"] == "fieldValidation" for param in op["parameters"]) for op in patch_ops
    )
    widget = doc["components"]["schemas"]["io.example.v1.Widget"]
    assert widget["x-kubernetes-group-version-kind"] == [
        {"group": "example.io", "kind": "Widget", "version": "v1"}
    ]
    _, core = await server.get(root["paths"]["api/v1"]["serverRelativeURL"])
    containers = core["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert (containers["x-kubernetes-patch-merge-key"], containers["x-kubernetes-patch-strategy"]) == (
        "name",
        "merge",
    )


async def test_openapi_root_hash_changes_when_a_group_version_changes(server: Server) -> None:
    _, before = await server.get("/openapi/v3")
    for rt in resource_types_for(CRD):
        server.registry.register(rt)
    _, after = await server.get("/openapi/v3")
    assert before["paths"]["apis/example.io/v1"] != after["paths"]["apis/example.io/v1"]
    assert before["paths"]["apis/apps/v1"] == after["paths"]["apis/apps/v1"]


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs kubectl")
async def test_kubectl_api_resources_and_explain(server: Server) -> None:
    out = await server.kubectl("api-resources", "-o", "wide")
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "deploy" in rows["deployments"] and "apps/v1" in rows["deployments"]
    assert "wd" in rows["widgets"] and "example.io/v1" in rows["widgets"]
    assert "pdb" in rows["poddisruptionbudgets"]
    names = (await server.kubectl("api-resources", "--categories=all", "-o", "name")).split()
    assert {"pods", "deployments.apps", "replicasets.apps", "widgets.example.io"} <= set(names)
    assert "nodes" not in names
    explained = await server.kubectl("explain", "deploy.spec.strategy.rollingUpdate")
    assert "maxSurge" in explained and "maxUnavailable" in explained
    explained = await server.kubectl("explain", "wd.spec")
    assert "How many parts the widget has." in explained and "size\t<integer>" in explained
