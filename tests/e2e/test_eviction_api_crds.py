"""The EvictionRequest API's CRDs as users meet them: `kubectl apply`, `kubectl get`, and refusals.

The CRDs are deploy/crds/ (package data `controller_manager.crds`), installed on the embedded
cluster and on the real tier's kube-apiserver. The request is written as upstream documents
`lifecycle.k8s.io/v1alpha1` (spec.target.pod, spec.requester, spec.intent), in aiokcm's group.
The real tier's v1.24.0-alpha.2 has no CEL transition rules, so there the CRDs are installed
without them (tests.support.evictionrequests) and the immutability cases run on the local side.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from typing import Any

import pytest
import yaml

from apiclient import ApiError, KubeClient
from apiclient.resources import CUSTOMRESOURCEDEFINITIONS, NAMESPACES
from tests.localcluster.helpers import bare_cluster
from tests.support.evictionrequests import EVICTIONS, REQUESTS, install_eviction_api

cluster = pytest.fixture(bare_cluster)
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs the kubectl binary")
pytestmark = [pytest.mark.backends("local", "real"), needs_kubectl]

NS = "eviction-api"
UID = "bd23f542-ac79-4b44-a628-9735e18b8037"
T0 = "2024-05-01T10:00:00Z"

# Upstream's EvictionRequest for a pod, in aiokcm's group.
REQUEST_YAML = f"""\
apiVersion: lifecycle.aiokcm.io/v1alpha1
kind: EvictionRequest
metadata:
  name: web-0-maintenance
  namespace: {NS}
spec:
  target:
    pod:
      name: web-0
      uid: {UID}
  requester: acme.io/foo
  intent: Eviction
"""

EVICTION_YAML = f"""\
apiVersion: lifecycle.aiokcm.io/v1alpha1
kind: Eviction
metadata:
  name: pod-1-web-0
  namespace: {NS}
spec:
  target:
    pod:
      name: web-0
      uid: {UID}
"""


async def kubectl(cluster: Any, *args: str, stdin: str | None = None) -> tuple[int, str]:
    cache = tempfile.mkdtemp(prefix="kubectl-cache-")
    try:
        proc = await asyncio.create_subprocess_exec(
            "kubectl",
            "--kubeconfig",
            str(cluster.kubeconfig_path),
            "--cache-dir",
            cache,
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate(stdin.encode() if stdin is not None else None)
        return proc.returncode or 0, out.decode()
    finally:
        shutil.rmtree(cache, ignore_errors=True)


async def _installed(kube: KubeClient) -> bool:
    """Install the CRDs in a fresh namespace; whether the server runs their transition rules."""
    try:
        await kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    except ApiError as exc:
        if not exc.already_exists:
            raise
    await install_eviction_api(kube, namespace=NS)
    served = await kube.get(CUSTOMRESOURCEDEFINITIONS, "evictionrequests.lifecycle.aiokcm.io")
    return "oldSelf" in str(served["spec"])


def request(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(REQUEST_YAML)
    body["metadata"] = {"generateName": "bad-"}
    body["spec"].update(spec)
    return {**body, "spec": {k: v for k, v in body["spec"].items() if v is not None}}


async def refused(call: Any) -> str:
    with pytest.raises(ApiError) as caught:
        await call
    assert caught.value.invalid, caught.value
    return caught.value.message


def condition(type_: str, status: str, reason: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": "", "lastTransitionTime": T0}


async def test_kubectl_applies_and_lists_requests_and_evictions(cluster: Any, kube: KubeClient) -> None:
    await _installed(kube)
    code, out = await kubectl(cluster, "apply", "-f", "-", stdin=REQUEST_YAML + "---\n" + EVICTION_YAML)
    assert code == 0, out
    status = {
        "requesters": [
            {"name": "acme.io/foo", "intent": "Eviction"},
            {"name": "ops.example.com/drain", "intent": "Withdrawn"},
        ],
        "targetResponders": [
            {"name": "surge.example.com/web", "priority": 10000, "state": "Completed"},
            {"name": "imperative-eviction.k8s.io/evictor", "priority": 100, "state": "Active"},
        ],
        "responders": [
            {"name": "surge.example.com/web", "startTime": T0, "completionTime": T0},
            {"name": "imperative-eviction.k8s.io/evictor", "startTime": T0, "message": "PDB web blocks"},
        ],
        "conditions": [condition("TargetEvicted", "False", "AwaitingEviction")],
    }
    await kube.patch(EVICTIONS, "pod-1-web-0", {"status": status}, namespace=NS, subresource="status")
    await kube.patch(
        REQUESTS,
        "web-0-maintenance",
        {"status": {"conditions": [condition("Failed", "False", "AwaitingEviction")]}},
        namespace=NS,
        subresource="status",
    )

    code, out = await kubectl(cluster, "get", "evictionrequests,evictions", "-n", NS)
    assert code == 0, out
    tables = [t.splitlines() for t in out.strip().split("\n\n")]
    by_kind = {t[1].split("/")[0].split(".")[0]: t for t in tables}
    header, row = by_kind["evictionrequest"]
    assert header.split() == ["NAME", "POD", "REQUESTER", "INTENT", "EVICTED", "FAILED", "AGE"]
    assert row.split()[1:5] == ["web-0", "acme.io/foo", "Eviction", "False"]
    header, row = by_kind["eviction"]
    assert header.split() == ["NAME", "POD", "REQUESTERS", "RESPONDER", "TARGETEVICTED", "FAILED", "AGE"]
    assert row.split()[1] == "web-0"
    assert '"name":"ops.example.com/drain"' in row
    assert row.split()[3:5] == ["imperative-eviction.k8s.io/evictor", "False"]
    # Short names and the category.
    code, out = await kubectl(cluster, "get", "evr,evn", "-n", NS, "-o", "name")
    assert code == 0, out
    assert sorted(out.split()) == [
        "eviction.lifecycle.aiokcm.io/pod-1-web-0",
        "evictionrequest.lifecycle.aiokcm.io/web-0-maintenance",
    ]
    code, out = await kubectl(cluster, "get", "lifecycle", "-n", NS, "-o", "name")
    assert code == 0 and len(out.split()) == 2, out


async def test_the_status_subresource_splits_spec_from_status(kube: KubeClient) -> None:
    await _installed(kube)
    created = await kube.create(REQUESTS, yaml.safe_load(REQUEST_YAML), namespace=NS)
    name = created["metadata"]["name"]
    # A write to the object leaves its status alone; one to /status leaves its spec alone.
    written = await kube.patch(
        REQUESTS,
        name,
        {"spec": {"intent": "Withdrawn"}, "status": {"conditions": [condition("Failed", "True", "X")]}},
        namespace=NS,
    )
    assert written["spec"]["intent"] == "Withdrawn" and "status" not in written
    written = await kube.patch(
        REQUESTS,
        name,
        {
            "spec": {"intent": "Eviction"},
            "status": {"observedGeneration": 2, "conditions": [condition("Failed", "True", "X")]},
        },
        namespace=NS,
        subresource="status",
    )
    assert written["spec"]["intent"] == "Withdrawn"
    assert written["status"]["observedGeneration"] == 2
    assert written["metadata"]["generation"] == created["metadata"]["generation"] + 1


async def test_invalid_requests_are_refused_with_clear_messages(kube: KubeClient) -> None:
    transitions = await _installed(kube)

    def create(body: dict[str, Any]) -> Any:
        return kube.create(REQUESTS, body, namespace=NS)

    assert "domain names *.k8s.io, *.kubernetes.io are reserved" in await refused(
        create(request(requester="drain.k8s.io/ops"))
    )
    assert "domain names *.k8s.io, *.kubernetes.io are reserved" in await refused(
        create(request(requester="kubernetes.io/ops"))
    )
    assert 'must be a domain-prefixed key (such as "acme.io/foo")' in await refused(
        create(request(requester="ops"))
    )
    assert (
        'spec.intent: Unsupported value: "Evict": supported values: "Eviction", "Withdrawn"'
        in await refused(create(request(intent="Evict")))
    )
    assert "exactly one of spec.requester and spec.requesterName is required" in await refused(
        create(request(requesterName="acme.io/foo"))
    )
    assert "exactly one of spec.requester and spec.requesterName is required" in await refused(
        create(request(requester=None))
    )
    assert "must be a lowercase UUID in 8-4-4-4-12 format" in await refused(
        create(request(target={"pod": {"name": "web-0", "uid": UID.upper()}}))
    )
    # The KEP's earlier spelling is accepted in place of spec.requester.
    earlier = await create(request(requester=None, requesterName="acme.io/foo"))
    assert earlier["spec"]["requesterName"] == "acme.io/foo"

    created = await create(request())
    name = created["metadata"]["name"]
    conditions = [condition(f"Type{i}", "True", "Reason") for i in range(101)]
    message = await refused(
        kube.patch(REQUESTS, name, {"status": {"conditions": conditions}}, namespace=NS, subresource="status")
    )
    assert "status.conditions" in message and "at most 100 items" in message
    if not transitions:
        return
    assert (
        "spec.target: Invalid value"
        in (
            message := await refused(
                kube.patch(REQUESTS, name, {"spec": {"target": {"pod": {"name": "web-1"}}}}, namespace=NS)
            )
        )
        and "field is immutable" in message
    )
    assert "the requester is immutable" in await refused(
        kube.patch(REQUESTS, name, {"spec": {"requester": "acme.io/bar"}}, namespace=NS)
    )
    # Withdrawing is the one change a requester makes.
    withdrawn = await kube.patch(REQUESTS, name, {"spec": {"intent": "Withdrawn"}}, namespace=NS)
    assert withdrawn["spec"]["intent"] == "Withdrawn"


async def test_invalid_eviction_status_is_refused(kube: KubeClient) -> None:
    transitions = await _installed(kube)
    await kube.create(EVICTIONS, yaml.safe_load(EVICTION_YAML), namespace=NS)
    responders = [
        {"name": "surge.example.com/web", "priority": 10000, "state": "Active"},
        {"name": "imperative-eviction.k8s.io/evictor", "priority": 100, "state": "Inactive"},
    ]
    statuses = [
        {"name": "surge.example.com/web", "startTime": T0},
        {"name": "imperative-eviction.k8s.io/evictor"},
    ]

    def write(status: dict[str, Any]) -> Any:
        return kube.patch(EVICTIONS, "pod-1-web-0", {"status": status}, namespace=NS, subresource="status")

    long = [*statuses[:1], {**statuses[1], "message": "x" * 4001}]
    message = await refused(write({"targetResponders": responders, "responders": long}))
    assert "status.responders" in message and "4000" in message
    too_many = [{"name": f"r{i}.example.com/x", "priority": 1000 + i, "state": "Inactive"} for i in range(12)]
    assert "status.targetResponders" in await refused(write({"targetResponders": too_many}))
    assert 'Unsupported value: "Running"' in await refused(
        write({"targetResponders": [{**responders[0], "state": "Running"}]})
    )
    assert "status.targetResponders" in await refused(
        write({"targetResponders": [{**responders[0], "priority": 100001}]})
    )
    await write({"targetResponders": responders, "responders": statuses})
    if not transitions:
        return
    assert "must preserve the same length and the same keys in the same order" in await refused(
        write({"targetResponders": responders[1:]})
    )
    assert "priority is immutable" in await refused(
        write({"targetResponders": [{**responders[0], "priority": 20000}, responders[1]]})
    )
    assert "startTime is immutable once set" in await refused(
        write({"targetResponders": responders, "responders": [{"name": statuses[0]["name"]}, statuses[1]]})
    )
    # The controller moves the states on; the responder reports.
    moved = [{**responders[0], "state": "Completed"}, {**responders[1], "state": "Active"}]
    done = [{**statuses[0], "completionTime": T0}, {**statuses[1], "startTime": T0}]
    written = await write({"targetResponders": moved, "responders": done})
    assert [r["state"] for r in written["status"]["targetResponders"]] == ["Completed", "Active"]
