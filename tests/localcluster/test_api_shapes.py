"""Small shapes of kube-apiserver's answers that clients depend on, checked on both backends.

Trailing slashes on discovery paths (kr8s sends them on every call), what DELETE answers per
kind, the `details` of a 404 (`kubectl debug` reads it unchecked), a new Deployment's `status: {}`,
PUT creating the kinds that allow it, Secret base64 with line breaks, empty field-selector terms,
node ports of NodePort and LoadBalancer Services, and pod templates' `creationTimestamp: null`.
"""

from __future__ import annotations

import shutil
from typing import Any

import orjson
import pytest

from apiclient import KubeClient
from tests.localcluster.helpers import bare_cluster
from tests.localcluster.test_fidelity_api import kubectl

cluster = pytest.fixture(bare_cluster)
pytestmark = pytest.mark.backends("local", "real")

NS = "/api/v1/namespaces/default"
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary")


async def raw(
    kube: KubeClient,
    method: str,
    path: str,
    body: Any = None,
    *,
    query: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> tuple[int, dict[str, Any]]:
    """A request through kubernetes_asyncio with the kubeconfig's credentials, keeping the
    status code and body of any answer (a raw response is not checked by the client)."""
    resp = await kube.api_client.call_api(
        path,
        method,
        query_params=list((query or {}).items()),
        body=body,
        auth_settings=["BearerToken"],
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        _preload_content=False,
    )
    try:
        data = await resp.read()
        return resp.status, orjson.loads(data) if data else {}
    finally:
        resp.release()


@needs_kubectl
async def test_discovery_paths_answer_with_a_trailing_slash(cluster: Any) -> None:
    expected = {
        "/version/": None,
        "/api/": "APIVersions",
        "/apis/": "APIGroupList",
        "/api/v1/": "APIResourceList",
        "/apis/apps/": "APIGroup",
        "/apis/apps/v1/": "APIResourceList",
    }
    for path, kind in expected.items():
        code, out, err = await kubectl(cluster, "get", "--raw", path)
        assert code == 0, f"{path}: {err}"
        doc = orjson.loads(out)
        if kind is None:
            assert doc["major"] == "1" and doc["gitVersion"].startswith("v1.")
        else:
            assert doc["kind"] == kind
    code, out, _ = await kubectl(cluster, "get", "--raw", "/api/v1/namespaces/default/configmaps/")
    assert code == 0 and orjson.loads(out)["kind"] == "ConfigMapList"


async def test_delete_answers_with_the_object_for_services_and_service_accounts(kube: KubeClient) -> None:
    svc = {"metadata": {"name": "gone"}, "spec": {"ports": [{"port": 80}]}}
    assert (await raw(kube, "POST", f"{NS}/services", svc))[0] == 201
    status, body = await raw(kube, "DELETE", f"{NS}/services/gone")
    assert status == 200 and body["kind"] == "Service" and body["metadata"]["name"] == "gone"

    assert (await raw(kube, "POST", f"{NS}/serviceaccounts", {"metadata": {"name": "robot"}}))[0] == 201
    status, body = await raw(kube, "DELETE", f"{NS}/serviceaccounts/robot")
    assert status == 200 and body["kind"] == "ServiceAccount" and body["metadata"]["name"] == "robot"

    assert (await raw(kube, "POST", f"{NS}/configmaps", {"metadata": {"name": "cm"}}))[0] == 201
    status, body = await raw(kube, "DELETE", f"{NS}/configmaps/cm")
    assert status == 200 and body["kind"] == "Status" and body["details"]["name"] == "cm"


async def test_not_found_statuses_carry_details(kube: KubeClient) -> None:
    status, body = await raw(kube, "GET", f"{NS}/foos/x")
    assert status == 404 and body["reason"] == "NotFound" and body["details"] == {}
    status, body = await raw(kube, "GET", "/apis/apps/v1/namespaces/default/deployments/nope")
    assert status == 404 and body["details"] == {"name": "nope", "group": "apps", "kind": "deployments"}
    status, body = await raw(kube, "GET", f"{NS}/pods/nope")
    assert status == 404 and body["details"] == {"name": "nope", "kind": "pods"}


async def test_new_deployment_status_and_template_metadata(kube: KubeClient) -> None:
    body: dict[str, Any] = {
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        },
    }
    status, created = await raw(kube, "POST", "/apis/apps/v1/namespaces/default/deployments", body)
    assert status == 201 and created["status"] == {}
    assert created["spec"]["template"]["metadata"] == {"creationTimestamp": None, "labels": {"a": "b"}}
    body["metadata"]["name"] = "r"
    status, created = await raw(kube, "POST", "/apis/apps/v1/namespaces/default/replicasets", body)
    assert status == 201 and created["spec"]["template"]["metadata"]["creationTimestamp"] is None


async def test_put_creates_only_kinds_that_allow_it(kube: KubeClient) -> None:
    lease: dict[str, Any] = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l1"},
        "spec": {"holderIdentity": "me"},
    }
    status, body = await raw(kube, "PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/l1", lease)
    assert status == 201 and body["spec"]["holderIdentity"] == "me" and body["metadata"]["uid"]
    # a lease is updated only with its resourceVersion (no unconditional update)
    status, failed = await raw(
        kube, "PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/l1", lease
    )
    assert status == 422 and failed["details"]["causes"][0]["field"] == "metadata.resourceVersion"
    lease["metadata"]["resourceVersion"] = body["metadata"]["resourceVersion"]
    status, body = await raw(kube, "PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/l1", lease)
    assert status == 200
    status, body = await raw(
        kube,
        "PUT",
        f"{NS}/configmaps/c9",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c9"}},
    )
    assert status == 404 and body["details"] == {"name": "c9", "kind": "configmaps"}


async def test_secret_base64_with_line_breaks(kube: KubeClient) -> None:
    secret = {"metadata": {"name": "wrapped"}, "data": {"k": "aGVsbG8g\nd29ybGQ=", "crlf": "aGVs\r\nbG8="}}
    status, body = await raw(kube, "POST", f"{NS}/secrets", secret)
    assert status == 201 and body["data"] == {"k": "aGVsbG8gd29ybGQ=", "crlf": "aGVsbG8="}


async def test_field_selector_with_empty_terms(kube: KubeClient) -> None:
    for selector in ("metadata.name=x,", ",metadata.name=x", ","):
        status, body = await raw(kube, "GET", f"{NS}/configmaps", query={"fieldSelector": selector})
        assert status == 200 and body["kind"] == "ConfigMapList", selector


def _service(name: str, type_: str, *ports: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"type": type_, "ports": list(ports), **spec}}


async def test_node_ports(kube: KubeClient) -> None:
    status, np = await raw(kube, "POST", f"{NS}/services", _service("np", "NodePort", {"port": 80}))
    assert status == 201 and 30000 <= np["spec"]["ports"][0]["nodePort"] <= 32767
    assert np["spec"]["externalTrafficPolicy"] == "Cluster"

    status, lb = await raw(
        kube,
        "POST",
        f"{NS}/services",
        _service("lb", "LoadBalancer", {"port": 80, "name": "a"}, {"port": 81, "name": "b"}),
    )
    assert status == 201 and lb["spec"]["allocateLoadBalancerNodePorts"] is True
    ports = [p["nodePort"] for p in lb["spec"]["ports"]]
    assert len(set(ports)) == 2 and all(30000 <= p <= 32767 for p in ports)

    status, lb2 = await raw(
        kube,
        "POST",
        f"{NS}/services",
        _service("lb2", "LoadBalancer", {"port": 80}, allocateLoadBalancerNodePorts=False),
    )
    assert status == 201 and "nodePort" not in lb2["spec"]["ports"][0]

    taken = np["spec"]["ports"][0]["nodePort"]
    status, body = await raw(
        kube, "POST", f"{NS}/services", _service("dup", "NodePort", {"port": 80, "nodePort": taken})
    )
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.ports[0].nodePort"
    assert "provided port is already allocated" in body["message"]
    status, body = await raw(
        kube, "POST", f"{NS}/services", _service("low", "NodePort", {"port": 80, "nodePort": 80})
    )
    assert status == 422 and "not in the valid range" in body["message"]
    status, body = await raw(
        kube, "POST", f"{NS}/services", _service("cip", "ClusterIP", {"port": 80, "nodePort": 30081})
    )
    assert status == 422 and body["details"]["causes"][0]["reason"] == "FieldValueForbidden"

    # back to ClusterIP: the node port and the external policy go; the port is free again
    status, body = await raw(
        kube,
        "PATCH",
        f"{NS}/services/np",
        {"spec": {"type": "ClusterIP"}},
        content_type="application/merge-patch+json",
    )
    assert (
        status == 200
        and "nodePort" not in body["spec"]["ports"][0]
        and "externalTrafficPolicy" not in body["spec"]
    )
    status, body = await raw(
        kube, "POST", f"{NS}/services", _service("again", "NodePort", {"port": 80, "nodePort": taken})
    )
    assert status == 201 and body["spec"]["ports"][0]["nodePort"] == taken


async def test_statefulset_and_daemonset_strategy_validation(kube: KubeClient) -> None:
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    base = {"selector": {"matchLabels": {"a": "b"}}, "template": template}
    cases = [
        ("statefulsets", {**base, "podManagementPolicy": "Whenever"}, "spec.podManagementPolicy"),
        ("statefulsets", {**base, "updateStrategy": {"type": "Sometimes"}}, "spec.updateStrategy"),
        (
            "statefulsets",
            {**base, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": -1}}},
            "spec.updateStrategy.rollingUpdate.partition",
        ),
        ("daemonsets", {**base, "updateStrategy": {"type": "Sometimes"}}, "spec.updateStrategy"),
        (
            "daemonsets",
            {
                **base,
                "updateStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0},
                },
            },
            "spec.updateStrategy.rollingUpdate.maxUnavailable",
        ),
    ]
    for i, (plural, spec, field) in enumerate(cases):
        status, body = await raw(
            kube,
            "POST",
            f"/apis/apps/v1/namespaces/default/{plural}",
            {"metadata": {"name": f"bad-{i}"}, "spec": spec},
        )
        assert status == 422, (plural, spec, body)
        assert [c["field"] for c in body["details"]["causes"]] == [field], (plural, body)
